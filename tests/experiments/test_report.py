"""foltr_jax.report and `python -m experiments.report` on small synthetic results folders."""

import dataclasses
import json
import re

import numpy as np
import pytest

from experiments.lib import figures as report
from experiments.lib import statistics
from foltr_jax.engine import results_files as format2
from tests import binaries

DATA = {"synthetic": {"seed": 0, "queries": 30, "features": 8, "docs_per_query": 15.0}}
GROUP = "synthetic (seed 0, 30 queries, 8 features)"
# method -> click model -> (final offline nDCG@10 of the 3 runs, online performance of the 3 runs)
NUMBERS = {
    "fpdgd": {
        "perfect": ([0.70, 0.72, 0.74], [10.0, 11.0, 12.0]),
        "informational": ([0.50, 0.55, 0.60], [7.0, 8.0, 9.0]),
    },
    "foltr_es": {
        "perfect": ([0.60, 0.61, 0.62], [8.0, 8.5, 9.0]),
        "informational": ([0.52, 0.56, 0.57], [6.0, 8.0, 10.0]),
    },
}
N_CLIENTS = {"fpdgd": 1000, "foltr_es": 10}
LABELS = {"fpdgd": "fpdgd, n_clients=1000", "foltr_es": "foltr_es, n_clients=10"}


def curves(final):
    """[3 runs][4 rounds] offline nDCG@10 rising to the given final values."""
    return [[0.3, 0.4, (0.4 + f) / 2, f] for f in final]


def config(click_model, n_clients=10, seed=0):
    return {
        "n_clients": n_clients,
        "local_updates": 2,
        "rounds": 4,
        "click_model": click_model,
        "n_runs": 3,
        "seed": seed,
    }


def write(path, payload):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload))


def run_file(method, config, curves_, per_run, data=DATA, panel=None, rounds=None, **rest):
    """A results file of one cell, as experiments.fpdgd and foltr_es write them."""
    panel = panel or config.get("click_model", "(no click_model)")
    first = next(iter(curves_.values()))
    cell = format2.cell(
        panel,
        labels=format2.labels(method, panel),
        evaluated_rounds=rounds or range(1, len(first[0]) + 1),
        curves=curves_,
        per_run=per_run,
    )
    return format2.document(method, config, data, [cell], **rest)


@pytest.fixture
def results_dir(tmp_path):
    root = tmp_path / "results"
    for method, by_click in NUMBERS.items():
        for click_model, (final, online) in by_click.items():
            names = ("offline_ndcg", "offline_mrr", "online_ndcg", "online_max_rr")
            write(
                root / "runs" / f"{method}_{click_model}" / "results.json",
                run_file(
                    method,
                    config(click_model, N_CLIENTS[method]),
                    {name: curves(final) for name in names},
                    {
                        "initial_offline_ndcg": [0.2, 0.2, 0.2],
                        "online_performance": online,
                        "final_offline_ndcg": final,
                    },
                ),
            )
    return root


def expected_test(metric, click_model):
    index = 0 if metric == "final_offline_ndcg" else 1
    return statistics.t_test(
        NUMBERS["foltr_es"][click_model][index], NUMBERS["fpdgd"][click_model][index]
    )


def test_library_report_numbers_tables_and_figures(results_dir, tmp_path):
    out = tmp_path / "out"
    summary = report.build_report(results_dir, out, baseline="fpdgd")
    assert summary == json.loads((out / "summary.json").read_text())
    assert len(summary["files"]) == 4
    group = summary["groups"][GROUP]
    assert group["panels"] == ["perfect", "informational"]  # the papers' order
    assert sorted(group["labels"]) == sorted(LABELS.values())
    assert group["baseline"] == LABELS["fpdgd"]
    rows = group["rows"]
    for method, by_click in NUMBERS.items():
        for click_model, (final, online) in by_click.items():
            cell = rows[LABELS[method]][click_model]
            assert cell["n_runs"] == 3 and cell["rounds"] == 4
            for metric, values in (("final_offline_ndcg", final), ("online_performance", online)):
                assert cell[metric]["mean"] == pytest.approx(np.mean(values))
                assert cell[metric]["sd"] == pytest.approx(np.std(values, ddof=1))
                assert cell[metric]["n"] == 3
    perfect = {m: rows[LABELS[m]]["perfect"]["final_offline_ndcg"] for m in NUMBERS}
    assert perfect["fpdgd"]["mean"] == pytest.approx(0.72)
    assert perfect["fpdgd"]["sd"] == pytest.approx(0.02)
    assert perfect["foltr_es"]["mean"] == pytest.approx(0.61)
    assert perfect["foltr_es"]["sd"] == pytest.approx(0.01)
    assert perfect["fpdgd"]["mean"] > perfect["foltr_es"]["mean"]
    assert "p" not in perfect["fpdgd"]  # the baseline is not tested against itself

    # Student t-tests against the baseline, Bonferroni over the 2 comparisons of each table
    for metric in report.METRICS:
        assert group["comparisons"][metric]["n_comparisons"] == 2
        for click_model in ("perfect", "informational"):
            cell = rows[LABELS["foltr_es"]][click_model][metric]
            expected = expected_test(metric, click_model)
            assert cell["test"] == "student" and cell["df"] == 4
            assert cell["t"] == pytest.approx(expected.t)
            assert cell["p"] == pytest.approx(expected.p)
            assert cell["p_adjusted"] == pytest.approx(min(2 * expected.p, 1.0))
            assert cell["significant"] == (2 * expected.p < 0.05)
    # by hand: perfect, t = -0.11 / sqrt(0.00025 · 2/3) = -8.52, df 4, p ≈ 0.001
    sig = rows[LABELS["foltr_es"]]["perfect"]["final_offline_ndcg"]
    assert sig["t"] == pytest.approx(-0.11 / np.sqrt(0.00025 * 2 / 3))
    assert sig["significant"] and sig["p_adjusted"] < 0.01
    same = rows[LABELS["foltr_es"]]["informational"]["final_offline_ndcg"]
    assert not same["significant"] and same["p"] > 0.5

    table = (out / "table.md").read_text()
    assert "0.7200 ± 0.0200" in table and "0.6100 ± 0.0100 †" in table
    assert "0.5500 ± 0.0500" in table and "11.00 ± 1.00" in table
    assert r"| FPDGD, \|C\| = 1000 (baseline) |" in table  # the labels in words
    assert f"Data: {GROUP}.  \n4 rounds, 3 runs a line (mean over runs, shaded ±1 sd)." in table
    assert "Every line: B = 2." in table  # what every row shares
    assert "Bonferroni over the 2 comparisons" in table
    tex = (out / "table.tex").read_text()
    assert r"$0.6100 \pm 0.0100^\dagger$" in tex and r"\begin{tabular}{lcc}" in tex
    assert "FOLtR-ES, $|$C$|$ = 10" in tex
    # offline nDCG curves, and offline MaxRR ones (FPDGD paper Figure 3): every run recorded them
    assert len(group["figures"]) == 4
    assert [n for n in group["figures"] if "_maxrr." in n] == group["figures"][2:]
    for name in group["figures"]:
        assert name.endswith((".png", ".pdf"))
        assert (out / name).stat().st_size > 1000
    assert (out / group["figures"][0]).read_bytes().startswith(b"\x89PNG")
    from PIL import Image

    with Image.open(out / group["figures"][0]) as png:  # the figure says what it shows
        said = png.text["Description"]
    assert png.text["Title"] == GROUP
    assert f"data: {GROUP}; 4 rounds, 3 runs a line (mean over runs, shaded ±1 sd)" in said
    assert "every line: B = 2" in said
    assert said.endswith("legend: FOLtR-ES, |C| = 10 | FPDGD, |C| = 1000 (baseline)")
    assert (out / group["figures"][1]).read_bytes().startswith(b"%PDF")
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary files left


def test_paired_welch_and_baseline_choice(results_dir, tmp_path):
    # same seed and repetitions in both methods' files: --paired pairs them
    paired = report.build_report(results_dir, tmp_path / "paired", baseline="foltr", paired=True)
    group = paired["groups"][GROUP]
    assert group["baseline"] == LABELS["foltr_es"]
    cell = group["rows"][LABELS["fpdgd"]]["perfect"]["final_offline_ndcg"]
    expected = statistics.paired_t_test([0.70, 0.72, 0.74], [0.60, 0.61, 0.62])
    assert cell["test"] == "paired" and cell["p"] == pytest.approx(expected.p)
    welch = report.build_report(results_dir, tmp_path / "welch", baseline="fpdgd", equal_var=False)
    cell = welch["groups"][GROUP]["rows"][LABELS["foltr_es"]]["perfect"]["final_offline_ndcg"]
    expected = statistics.t_test([0.60, 0.61, 0.62], [0.70, 0.72, 0.74], equal_var=False)
    assert cell["test"] == "welch" and cell["p"] == pytest.approx(expected.p)
    # no baseline: numbers, no tests
    plain = report.build_report(results_dir, tmp_path / "plain")
    assert plain["groups"][GROUP]["baseline"] is None
    assert (
        "p"
        not in plain["groups"][GROUP]["rows"][LABELS["foltr_es"]]["perfect"]["online_performance"]
    )
    # a substring in several labels: numbers, no tests, a note
    ambiguous = report.build_report(results_dir, tmp_path / "ambiguous", baseline="n_clients")
    assert "several labels" in ambiguous["groups"][GROUP]["baseline_note"]
    with pytest.raises(report.ReportError, match="'nope' is in no setting's label"):
        report.build_report(results_dir, tmp_path / "nope", baseline="nope")


def test_poisoning_cells(tmp_path):
    cells = []
    finals = {("fedavg", "none", 0): [0.8, 0.82, 0.84], ("krum", "lie", 2): [0.5, 0.6, 0.7]}
    method = "fpdgd/poisoning/paper"
    for click_model in ("navigational", "perfect"):
        for (aggregator, attack, m), final in finals.items():
            fields = {"aggregator": aggregator, "attack": attack, "m": m}
            cells.append(
                format2.cell(
                    f"{click_model} {m} {attack} {aggregator}",
                    setting={
                        "click_model": click_model,
                        "n_malicious": m,
                        "attack": attack,
                        "aggregator": aggregator,
                        "epsilon": 0.0,
                        "sensitivity": 0.0,
                    },
                    labels=format2.labels(
                        method,
                        click_model,
                        group="poisoning",
                        figure=f"m={m}" if m else None,
                        fields={**fields, "epsilon": 0.0, "sensitivity": 0.0},
                        always=tuple(fields),
                    ),
                    evaluated_rounds=range(1, 5),
                    curves={"offline_ndcg": curves(final), "online_ndcg": curves(final)},
                    per_run={"online_performance": [1.0, 2.0, 3.0]},
                    summary={
                        "final_offline_ndcg_mean": float(np.mean(final)),
                        "final_offline_ndcg_sd": float(np.std(final, ddof=1)),
                    },
                )
            )
    payload = format2.document(method, config("informational"), DATA, cells)
    write(tmp_path / "poisoning" / "results.json", payload)
    summary = report.build_report(tmp_path, baseline="m=0", paired=True)
    group = summary["groups"][f"{GROUP}, poisoning"]
    assert group["panels"] == ["perfect", "navigational"]
    assert group["labels"] == [
        "aggregator=fedavg, attack=none, m=0",
        "aggregator=krum, attack=lie, m=2",
    ]
    attacked = group["rows"]["aggregator=krum, attack=lie, m=2"]["perfect"]["final_offline_ndcg"]
    assert attacked["mean"] == pytest.approx(0.6) and attacked["sd"] == pytest.approx(0.1)
    assert attacked["test"] == "paired"  # the grid's cells share their runs' random keys
    table = (tmp_path / "report" / "table.md").read_text()
    assert "| Krum, LIE attack, m = 2 | 0.6000 ± 0.1000 | 0.6000 ± 0.1000 |" in table
    assert "| FedAvg, no attack, m = 0 (baseline) |" in table
    # a figure per malicious count m, the no-attack cell drawn in each
    assert [name[-7:] for name in group["figures"]] == ["m-2.png", "m-2.pdf"]


def noniid_cell(name, final, online, panel, group):
    return format2.cell(
        name,
        setting={"data": name},
        labels=format2.labels(name, panel, group=group, config=False),
        evaluated_rounds=range(1, 5),
        curves={"offline_ndcg": curves(final)},
        per_run={"online_performance": online},
        summary={"final_offline_ndcg_mean": float(np.mean(final))},
    )


def test_noniid_cells(tmp_path):
    # Type 2 #R=1 on two B values, as the thesis's Figure 4.5: a group (figure, table) per B
    iid, noniid = [0.80, 0.82, 0.84], [0.30, 0.40, 0.50]
    for b in (2, 5):
        for click_model in ("perfect", "informational"):
            group = f"non-IID type 2, #R=1, |C|=5, linear ranker, B={b}"
            payload = format2.document(
                "fpdgd/noniid/type2",
                {**config(click_model, n_clients=5), "ranker": "linear", "local_updates": b},
                DATA,
                [
                    noniid_cell("iid", iid, [3.0, 3.0, 3.0], click_model, group),
                    noniid_cell("noniid", noniid, [4.0, 4.0, 4.0], click_model, group),
                    noniid_cell("fedprox_mu=0.1", noniid, [4.0, 4.0, 4.0], click_model, group),
                ],
                noniid={"type": 2, "grades_per_client": 1, "clicks": "ccm", "mix": "none"},
            )
            write(tmp_path / "noniid" / f"b{b}_{click_model}" / "results.json", payload)
    summary = report.build_report(tmp_path, baseline="iid")
    names = [f"{GROUP}, non-IID type 2, #R=1, |C|=5, linear ranker, B={b}" for b in (2, 5)]
    assert list(summary["groups"]) == names
    group = summary["groups"][names[0]]
    assert group["panels"] == ["perfect", "informational"]
    assert group["labels"] == ["iid", "noniid", "fedprox_mu=0.1"]
    assert group["baseline"] == "iid"  # exact label, although 'noniid' contains it
    cell = group["rows"]["noniid"]["informational"]["final_offline_ndcg"]
    assert cell["mean"] == pytest.approx(0.4) and cell["sd"] == pytest.approx(0.1)
    assert cell["test"] == "student" and cell["significant"]
    assert group["comparisons"]["final_offline_ndcg"]["n_comparisons"] == 4
    assert len(group["figures"]) == 2  # no MaxRR curves in non-IID files


def broken(change) -> str:
    """A one-cell results file with ``change`` applied to it, as JSON text."""
    payload = run_file("fpdgd", config("perfect"), {"offline_ndcg": [[0.1, 0.2], [0.3, 0.4]]}, {})
    change(payload, payload["cells"][0])
    return json.dumps(payload)


@pytest.mark.parametrize(
    "payload, message",
    [
        ("{not json", "not valid JSON: Expecting property name"),
        ("[1, 2]", "the top level is not a JSON object"),
        ('{"method": "x"}', "no results_format: written by an older version of foltr_jax"),
        (
            '{"results_format": 1, "offline_ndcg": [[0.5]]}',
            (
                "results format 1: written by an older version of foltr_jax; this version reads "
                "results format 2"
            ),
        ),
        (broken(lambda p, c: p.pop("cells")), "'cells' is not a non-empty list"),
        (
            broken(lambda p, c: c["curves"].update(offline_ndcg=[[0.1, 0.2], [0.3]])),
            r"cells\[0\]: curves: 'offline_ndcg' is not a list of equal-length",
        ),
        (
            broken(lambda p, c: c["per_run"].update(final_offline_ndcg=[0.1, float("nan")])),
            "contains NaN",
        ),
        (
            broken(lambda p, c: c["per_run"].update(online_performance=[1.0])),
            "'online_performance' has 1 runs but 'final_offline_ndcg' has 2",
        ),
        (broken(lambda p, c: c.pop("setting")), r"cells\[0\]: 'setting' is not an object"),
        (broken(lambda p, c: c["labels"].pop("panel")), r"cells\[0\]: labels: no 'method' or"),
        (
            broken(lambda p, c: p.update(metric="ndcg5")),
            r"cells\[0\]: no curves\['offline_ndcg5'\] \(the file's metric 'ndcg5'\)",
        ),
    ],
)
def test_malformed_results_name_the_file(tmp_path, payload, message):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "results.json").write_text(payload)
    with pytest.raises(report.ReportError, match=message) as error:
        report.build_report(tmp_path)
    assert str(error.value).startswith(str(tmp_path / "a" / "results.json"))


def test_a_folder_without_results(tmp_path):
    with pytest.raises(report.ReportError, match="no results.json under"):
        report.build_report(tmp_path)


def run_binary(*args):
    return binaries.call("report", *args)


def test_binary(results_dir, tmp_path):
    result = run_binary(f"--results_dir={results_dir}", "--baseline=fpdgd")
    assert result.returncode == 0, result.stderr
    out = results_dir / "report"
    assert str(out) in result.stdout and "2 figure(s)" in result.stdout  # nDCG and MaxRR
    summary = json.loads((out / "summary.json").read_text())
    cell = summary["groups"][GROUP]["rows"][LABELS["foltr_es"]]["perfect"]["final_offline_ndcg"]
    assert cell["mean"] == pytest.approx(0.61) and cell["significant"]
    assert "0.6100 ± 0.0100 †" in (out / "table.md").read_text()
    assert all((out / name).stat().st_size > 0 for name in summary["groups"][GROUP]["figures"])


@pytest.mark.parametrize("case", ["missing", "malformed"])
def test_binary_errors_are_one_line_naming_the_path(tmp_path, case):
    if case == "missing":
        path = tmp_path / "nowhere"
    else:
        path = tmp_path / "run" / "results.json"
        write(path, {})
        path.write_text('{"method": "fpdgd", "offline_ndcg": [[0.1, 0.2]')
    result = run_binary(f"--results_dir={tmp_path if case == 'malformed' else path}")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("report: error: ")
    assert str(path) in lines[0]


def test_other_metric_single_runs_and_duplicate_settings(results_dir, tmp_path):
    # a FedIPS-style file: NDCG@5, no click model, one run (λLinear): its own group, no sd
    write(
        results_dir / "fedips" / "results.json",
        run_file(
            "lambdarank",
            {"rounds": 4, "seed": 0},
            {"offline_ndcg5": [[0.3, 0.4, 0.5, 0.6]]},
            {"final_offline_ndcg5": [0.6]},
            metric="ndcg5",
        ),
    )
    # the same setting twice, in two folders: labels name the folder
    copy = (results_dir / "runs" / "fpdgd_perfect" / "results.json").read_text()
    (results_dir / "again").mkdir()
    (results_dir / "again" / "results.json").write_text(copy)
    summary = report.build_report(results_dir, tmp_path / "out", baseline="fpdgd")
    fedips = summary["groups"][f"{GROUP}, nDCG@5"]
    assert fedips["offline_metric"] == "nDCG@5" and fedips["panels"] == ["(no click_model)"]
    cell = fedips["rows"]["lambdarank"]["(no click_model)"]["final_offline_ndcg"]
    assert cell == {"mean": 0.6, "sd": None, "n": 1}
    assert "Final offline nDCG@5" in (tmp_path / "out" / "table.md").read_text()
    labels = summary["groups"][GROUP]["labels"]
    assert f"{LABELS['fpdgd']} (again)" in labels
    assert f"{LABELS['fpdgd']} (runs/fpdgd_perfect)" in labels
    assert summary["groups"][GROUP]["baseline"] is None  # 'fpdgd' is now in three labels


# ------------------------------------------------- the papers' figures (experiments.lib.paper_figures)

ROUNDS = 3


def fake_curves(level, n_runs=2):
    """[n_runs][ROUNDS] offline curves rising to about ``level``."""
    return [[level / 3, level / 2, level + 0.01 * r] for r in range(n_runs)]


def fake_cell(level, online=None, metric="ndcg"):
    """The evaluated rounds, curves and per-run values of a cell of made-up numbers."""
    online = 10 * level if online is None else online
    return {
        "evaluated_rounds": range(1, ROUNDS + 1),
        "curves": {f"offline_{metric}": fake_curves(level), "offline_mrr": fake_curves(level)},
        "per_run": {
            f"initial_offline_{metric}": [0.1, 0.1],
            "online_performance": [online, online + 0.1],
        },
    }


def fake_file(method, config, base, cells, **rest):
    return format2.document(method, config, base["data"], cells, **rest)


def flag_values(run):
    return dict(f[2:].split("=", 1) if "=" in f else (f[2:], "true") for f in run.flags)


def write_fake_run(folder, run, clicks):
    """A results file of ``run``'s binary, in its layout, with made-up numbers."""
    values = flag_values(run)
    base = {"data": {"synthetic": {"seed": 0, "queries": 60, "features": 32}}}
    if run.binary == "fpdgd":
        grid = values.get("privacy_grid", "none")
        epsilons = [0.0 if g == "none" else float(g.split(":")[0]) for g in grid.split(",")]
        method = "fpdgd"
        if "centralised" in values:
            method = "centralised_pdgd/" + values.get("centralised_form", "same_budget")
        for click in values.get("click_models", ",".join(clicks)).split(","):
            for epsilon in epsilons:
                config = {"click_model": click, "epsilon": epsilon, "n_runs": 2, "seed": 0}
                config["n_clients"] = int(values.get("n_clients", 1000))
                config["local_updates"] = int(values.get("local_updates", 2))
                online = 20.0 if method == "fpdgd" else 15.0
                cell = format2.cell(
                    click, labels=format2.labels(method, click), **fake_cell(0.6, online)
                )
                write(
                    folder / f"{click}_eps{epsilon:g}" / "results.json",
                    fake_file(method, config, base, [cell]),
                )
    elif run.binary in ("foltr_es", "fedips"):
        config = {"click_model": values.get("click_model", "perfect"), "n_runs": 2, "seed": 0}
        for name, default in (("n_clients", 2000), ("local_updates", 4)):
            config[name] = int(values.get(name, default))
        metric = "ndcg5" if run.binary == "fedips" else "ndcg"
        panel = config["click_model"]
        cell = format2.cell(
            panel, labels=format2.labels(run.binary, panel), **fake_cell(0.4, 5.0, metric)
        )
        write(
            folder / "results.json",
            fake_file(run.binary, config, base, [cell], metric=metric),
        )
    elif run.binary == "poisoning":
        cells = []
        for click in clicks:
            settings = [("none", "fedavg", 0)]
            for m in (1, 2, 3, 4):
                settings += [("none", d, m) for d in ("krum", "multi_krum", "trimmed_mean")]
                settings += [("none", "median", m)]
                for d in ("fedavg", "krum", "multi_krum", "trimmed_mean", "median"):
                    settings.append(("data_poisoning", d, m))
                settings.append(("lie", "fedavg", m))
                for attack in ("fang_krum_full", "fang_krum_partial"):
                    settings += [(attack, "krum", m), (attack, "multi_krum", m)]
            for attack, aggregator, m in settings:
                setting = {
                    "click_model": click,
                    "n_malicious": m,
                    "attack": attack,
                    "aggregator": aggregator,
                }
                fields = {"aggregator": aggregator, "attack": attack, "m": m}
                labels = format2.labels(
                    "fpdgd",
                    click,
                    group="poisoning",
                    figure=f"m={m}" if m else None,
                    fields=fields,
                    always=tuple(fields),
                )
                name = f"{click} m={m} {attack}/{aggregator}"
                cells.append(
                    format2.cell(name, setting=setting, labels=labels, **fake_cell(0.6 - 0.1 * m))
                )
        write(
            folder / "results.json",
            fake_file("fpdgd", {"n_clients": 10, "seed": 0}, base, cells),
        )
    elif run.binary == "unlearning":
        steps = [int(v) for v in values.get("unlearn_local_updates", "1,2,3,4").split(",")]
        deltas = [int(v) for v in values.get("delta_t", "5,10,20").split(",")]
        training = [
            format2.cell(
                f"{name} {click}",
                labels=format2.labels(name, click, group="unlearning", figure=None, config=False),
                **fake_cell(level),
            )
            for name, level in (("10H-0M", 0.6), ("9H-1M", 0.4), ("9H-0M", 0.6))
            for click in clicks
        ]
        unlearned = [
            format2.cell(
                f"U(9H-1M) {click} {n} {d}",
                labels=format2.labels(
                    "U(9H-1M)",
                    click,
                    group="unlearning",
                    figure=f"Δt={d}",
                    fields={"n′": n, "Δt": d},
                    always=("method", "n′", "Δt"),
                    config=False,
                ),
                **fake_cell(0.5),
            )
            for click in clicks
            for n in steps
            for d in deltas
        ]
        write(
            folder / "results.json",
            fake_file("fpdgd/unlearning", {"seed": 0}, base, training + unlearned),
        )
    elif run.binary == "noniid":
        names = ["iid", "noniid"]
        for remedy in values.get("remedies", "").split(","):
            if remedy == "fedprox":
                names += [f"fedprox_mu={mu}" for mu in values["prox_mu"].split(",")]
            elif remedy:
                names.append(remedy)
        info = {"type": int(values["type"]), "clicks": values.get("clicks")}
        config = {
            "click_model": values.get("click_model", "perfect"),
            "ranker": values.get("ranker", "linear"),
            "local_updates": int(values.get("local_updates", 5)),
            "n_clients": int(values.get("n_clients", 4)),
            "seed": 0,
        }
        kind = info["type"]
        parts = [f"non-IID type {kind}"]
        if kind == 2:
            parts.append(f"#R={values.get('grades_per_client')}, |C|={config['n_clients']}")
        parts.append(f"{config['ranker']} ranker")
        if kind != 4:
            parts.append(f"B={config['local_updates']}")
        panel = f"{str(info['clicks']).upper()} clients" if kind == 3 else config["click_model"]
        cells = [
            format2.cell(
                name,
                labels=format2.labels(name, panel, group=", ".join(parts), config=False),
                **fake_cell(0.7 if name == "iid" else 0.4, 30.0 if name == "iid" else 5),
            )
            for name in names
        ]
        write(
            folder / "results.json",
            fake_file(f"fpdgd/noniid/type{kind}", config, base, cells, noniid=info),
        )
    else:
        raise AssertionError(run.binary)


@pytest.fixture(scope="module")
def paper_pages(tmp_path_factory):
    """Every quick recipe's paper.json, from fake results of every run (nothing drawn)."""
    from experiments.lib import paper_figures, recipes

    clicks = ("perfect", "navigational", "informational")
    pages = {}
    for name, recipe in recipes.recipes(quick=True).items():
        root = tmp_path_factory.mktemp(name)
        for run in recipe.runs:
            write_fake_run(root / "synthetic" / run.name, run, clicks)
        pages[name] = paper_figures.make_page(root, recipe, draw=False)
        assert pages[name] == json.loads((root / "report" / "paper.json").read_text())
    return pages


CLICK_COLUMNS = ["Perfect", "Navigational", "Informational"]


def figure_of(page, name):
    (figure,) = [f for f in page["figures"] if f["name"] == name]
    return figure


def labels_by_panel(figure):
    return {
        (p["row"], p["column"]): [line["label"] for line in p["lines"]] for p in figure["panels"]
    }


def test_every_recipe_has_a_paper_layout(paper_pages):
    from experiments.lib import paper_figures, recipes

    assert set(paper_figures.LAYOUTS) == set(recipes.recipes(quick=True))
    for name, page in paper_pages.items():
        assert page["figures"], name
        for figure in page["figures"]:
            for panel in figure["panels"]:
                assert panel["lines"], (name, figure["name"], panel)
                for line in panel["lines"]:  # the papers' words, not configuration dumps
                    assert "n_clients" not in line["label"] and "_" not in line["label"]
            assert len(figure["legend"]) == len(set(figure["legend"]))


def test_fpdgd_figures_2_3_and_table_2(paper_pages):
    page = paper_pages["fpdgd_fig2"]
    expected = [f"FPDGD ε = {e}" for e in ("1.2", "2.3", "4.5", "10")]
    expected += ["PDGD (same updates)", "PDGD (same budget)"]
    expected += [f"FOLtR-ES p = {p}" for p in ("0.25", "0.5", "0.9", "1")]
    for name, metric in (("Figure 2", "offline nDCG@10"), ("Figure 3", "offline MaxRR")):
        figure = figure_of(page, name)
        assert figure["rows"] == ["synthetic"] and figure["columns"] == CLICK_COLUMNS
        assert figure["metric"] == metric
        panels = labels_by_panel(figure)
        assert len(panels) == 3 and all(labels == expected for labels in panels.values())
    (table,) = page["tables"]
    assert table["name"] == "Table 2"
    assert table["header"][1:] == [
        "ε = 1.2 (p = 0.25)",
        "ε = 2.3 (p = 0.5)",
        "ε = 4.5 (p = 0.9)",
        "ε = 10 (p = 1)",
    ]
    assert [row[0] for row in table["rows"]] == ["synthetic"] + [
        x for c in CLICK_COLUMNS for x in (f"{c}: FPDGD", "FOLtR-ES")
    ]
    # FPDGD's online performance (20, 20.1) against FOLtR-ES's (5, 5.1): ▲ after Bonferroni
    assert all(cell == "20.05 ▲" for cell in table["rows"][1][1:])
    assert all(cell == "5.05" for cell in table["rows"][2][1:])


@pytest.mark.parametrize(
    "recipe, figure, expected",
    [
        (
            "fpdgd_fig4",
            "Figure 4",
            [f"|C| = {n}, w{o} DP" for n in (10, 100, 1000) for o in ("", "/o")],
        ),
        ("fpdgd_fig5", "Figure 5", ["|B| = 2", "|B| = 4", "|B| = 8"]),
        ("fpdgd_fig6", "Figure 6", ["|B| = 2", "|B| = 4", "|B| = 8"]),
    ],
)
def test_fpdgd_figures_4_to_6(paper_pages, recipe, figure, expected):
    figure = figure_of(paper_pages[recipe], figure)
    assert figure["columns"] == CLICK_COLUMNS
    panels = labels_by_panel(figure)
    assert len(panels) == 3 and all(labels == expected for labels in panels.values())
    per_round = {line["x_per_round"] for p in figure["panels"] for line in p["lines"]}
    if recipe == "fpdgd_fig6":  # the paper's x: interactions spent, |C|·|B| per update
        assert figure["xlabel"].startswith("interactions") and per_round == {2000, 4000, 8000}
    else:
        assert figure["xlabel"] == "global updates" and per_round == {1.0}


def test_thesis_foltr_es_study_figures_3_1_to_3_5(paper_pages):
    """Thesis §3.1: a row per dataset and ranker, a column per click model; MaxRR (3.1, 3.3),
    online nDCG (3.4), offline nDCG (3.5); p ∈ {0.5, 0.9, 1}, PDGD beside p = 1."""
    page = paper_pages["thesis_fig3_1"]
    rows = ["synthetic, linear ranker", "synthetic, neural ranker"]
    by_p = [f"FOLtR-ES p = {p}" for p in ("0.5", "0.9", "1")]
    for name, metric, expected in (
        ("Figure 3.1", "mean batch MaxRR", by_p),
        ("Figure 3.3", "mean batch MaxRR", ["FOLtR-ES p = 1", "PDGD (batch)"]),
        ("Figure 3.4", "online nDCG@10", by_p),
        ("Figure 3.5", "offline nDCG@10", ["FOLtR-ES p = 1", "PDGD (batch)"]),
    ):
        figure = figure_of(page, name)
        assert figure["rows"] == rows and figure["columns"] == CLICK_COLUMNS
        assert figure["metric"] == metric
        panels = labels_by_panel(figure)
        assert len(panels) == 6 and all(labels == expected for labels in panels.values())
    figure = figure_of(paper_pages["thesis_fig3_2"], "Figure 3.2")
    assert figure["xlabel"].startswith("ranker updates")
    for panel in figure["panels"]:
        labels = [line["label"] for line in panel["lines"]]
        assert labels == ["|C| = 50", "|C| = 1,000", "|C| = 2,000"]
        assert [line["x_per_round"] for line in panel["lines"]] == [200, 4000, 8000]


def test_thesis_foltr_es_study_settings():
    """B = 4, 2,000 clients, p ∈ {0.5, 0.9, 1}, linear and neural; Figure 3.2 at a fixed
    2,000,000 ranker updates with p = 0.9; PDGD in batches of the same size."""
    from experiments.lib import recipes

    runs = recipes.recipes(quick=False)["thesis_fig3_1"].runs
    es = [flag_values(r) for r in runs if r.binary == "foltr_es"]
    assert len(es) == 18 and {v["local_updates"] for v in es} == {"4"}
    assert {v["n_clients"] for v in es} == {"2000"} and {v["rounds"] for v in es} == {"250"}
    assert {v["privacy_p"] for v in es} == {"0.5", "0.9", "1.0"}
    assert {v["ranker"] for v in es} == {"linear", "neural"}
    pdgd = [flag_values(r) for r in runs if r.binary == "fpdgd"]
    assert [v["centralised_form"] for v in pdgd] == ["batch", "batch"]
    assert all(v["n_clients"] == "2000" and v["local_updates"] == "4" for v in pdgd)
    for run in recipes.recipes(quick=False)["thesis_fig3_2"].runs:
        v = flag_values(run)
        assert v["privacy_p"] == "0.9" and v["local_updates"] == "4"
        assert int(v["n_clients"]) * 4 * int(v["rounds"]) == 2_000_000


def test_fpdgd_figure_6_keeps_the_budget_and_clients_with_dp():
    """FPDGD paper §5.3: |C| = 1,000 kept, B = 2/4/8 with T = 200/100/50, ε = 4.5, Δ = 5."""
    from experiments.lib import recipes

    for quick, rounds in ((False, (200, 100, 50)), (True, (40, 20, 10))):
        runs = recipes.recipes(quick=quick)["fpdgd_fig6"].runs
        values = [flag_values(run) for run in runs]
        assert [int(v["local_updates"]) for v in values] == [2, 4, 8]
        assert [int(v["rounds"]) for v in values] == list(rounds)
        assert {v["n_clients"] for v in values} == {"1000"}
        assert {v["privacy_grid"] for v in values} == {"4.5:5"}


def test_fpdgd_figure_6_reads_the_curves_at_fixed_budgets():
    """nDCG once k interactions are spent: the last update the budget covers."""
    from experiments.lib.paper_figures.fpdgd import ndcg_after_interactions
    from experiments.lib.series import Series

    def series(per_client, offline_rounds=None, columns=4):
        curves = np.arange(1, columns + 1)[None, :] / 10.0 * np.ones((2, 1))
        return Series(
            source="x", group="g", panel="perfect", always=(), run_ids=[],
            fields={"n_clients": 10, "local_updates": per_client},
            final_offline_ndcg=curves[:, -1], offline_ndcg=curves,
            offline_rounds=offline_rounds, initial_offline_ndcg=np.zeros(2),
        )  # fmt: skip

    b2 = series(2)  # 20 interactions per update
    assert list(ndcg_after_interactions(b2, 19)) == [0.0, 0.0]  # before the first update
    assert list(ndcg_after_interactions(b2, 40)) == [0.2, 0.2]
    assert list(ndcg_after_interactions(b2, 1000)) == [0.4, 0.4]
    sparse = series(2, offline_rounds=np.array([2, 4, 5]), columns=3)  # --eval_every=2
    assert list(ndcg_after_interactions(sparse, 60)) == [0.1, 0.1]  # round 3: the round-2 value


def test_poisoning_figures_2_to_4(paper_pages):
    page = paper_pages["poisoning_figs2_4"]
    shares = ("10%", "20%", "30%", "40%")
    figure = figure_of(page, "Figure 2")
    assert figure["rows"] == ["Krum", "Multi-Krum", "Trimmed Mean", "Median"]
    panels = labels_by_panel(figure)
    assert len(panels) == 12
    for labels in panels.values():
        assert labels == ["honest"] + [f"{s}, no defence" for s in shares] + [
            f"{s}, with the defence" for s in shares
        ]
    figure = figure_of(page, "Figure 3")
    assert len(figure["rows"]) == 3 and figure["columns"] == CLICK_COLUMNS
    rows = [labels_by_panel(figure)[(row, "Perfect")] for row in figure["rows"]]
    assert rows[0] == ["honest"] + [f"{s}, LIE" for s in shares] + [
        f"{s}, data poisoning" for s in shares
    ]
    assert rows[1][5:] == [f"{s}, partial knowledge" for s in shares]
    assert rows[2][1:5] == [f"{s}, Fang" for s in shares]
    figure = figure_of(page, "Figure 4")
    for labels in labels_by_panel(figure).values():
        assert labels == ["FedAvg", "Krum", "Multi-Krum", "Trimmed Mean", "Median"]
    for figure in page["figures"]:  # one colour per share of attackers, in every figure
        colours = {}
        for panel in figure["panels"]:
            for line in panel["lines"]:
                colours.setdefault(line["label"].split(",")[0], set()).add(line["colour"])
        assert all(len(c) == 1 for c in colours.values())


def test_unlearning_figures_2_3_and_table_3(paper_pages):
    page = paper_pages["unlearning_table3"]
    for labels in labels_by_panel(figure_of(page, "Fig. 2")).values():
        assert labels == ["10H-0M", "9H-1M", "9H-0M"]
    for labels in labels_by_panel(figure_of(page, "Fig. 3")).values():
        assert labels == ["unlearn", "baseline"]
    (table,) = page["tables"]
    assert table["header"] == ["#", "Ranker"] + [
        f"{c}, Δt = {d}" for c in CLICK_COLUMNS for d in (2, 4)
    ]
    assert [row[1] for row in table["rows"]] == ["9H-0M", "U(9H-1M), n′ = 3", "U(9H-1M), n′ = 1"]
    # retrained 0.6 vs unlearned 0.5 in every run: bold and significantly better than a and b
    assert all(cell == "**0.605**^a^b" for cell in table["rows"][0][2:])


def test_noniid_figures_and_tables(paper_pages):
    page = paper_pages["noniid_type1"]
    figure = figure_of(page, "Figure 4.3")
    assert len(figure["rows"]) == 2 and figure["columns"] == CLICK_COLUMNS
    assert all(labels == ["IID", "non-IID"] for labels in labels_by_panel(figure).values())
    panels = labels_by_panel(figure_of(page, "Figure 4.4"))
    rows = figure_of(page, "Figure 4.4")["rows"]
    assert panels[(rows[0], "Perfect")] == ["IID", "non-IID", "FedProx μ = 0.01", "FedProx μ = 1"]
    assert panels[(rows[1], "Perfect")] == ["IID", "non-IID", "FedPer"]
    (table,) = page["tables"]
    assert table["header"] == [""] + CLICK_COLUMNS and len(table["rows"]) == 4
    assert table["rows"][0][1].endswith("▲")  # IID (30, 30.1) against non-IID (5, 5.1)

    page = paper_pages["noniid_type2"]
    panels = labels_by_panel(figure_of(page, "Figure 4.5"))
    linear, neural = figure_of(page, "Figure 4.5")["rows"]
    assert panels[(linear, "Perfect")] == [
        f"{kind}, B = {b}" for b in (2, 5, 10) for kind in ("IID", "non-IID")
    ]
    assert panels[(neural, "Perfect")] == ["IID, B = 5", "non-IID, B = 5"]  # --quick: B = 5
    panels = labels_by_panel(figure_of(page, "Figure 4.7"))
    assert panels[(linear, "Perfect")] == ["IID", "non-IID", "FedProx μ = 0.1", "Data-sharing"]
    assert panels[(neural, "Perfect")] == [
        "IID",
        "non-IID",
        "FedProx μ = 0.1",
        "FedPer",
        "Data-sharing",
    ]
    (table,) = page["tables"]
    assert table["header"][1:] == [
        "linear ranker, B = 2",
        "linear ranker, B = 5",
        "linear ranker, B = 10",
        "neural ranker, B = 5",
    ]
    assert len(table["rows"]) == 6

    figure = figure_of(paper_pages["noniid_type2_r2"], "Figure 4.6")
    assert figure["rows"] == ["synthetic (linear ranker)"] and len(figure["panels"]) == 3
    figure = figure_of(paper_pages["noniid_type3"], "Figure 4.8")
    assert [p["title"] for p in figure["panels"]] == [
        "linear ranker under CCM clicks",
        "linear ranker under PBM clicks",
    ]
    figure = figure_of(paper_pages["noniid_type4"], "Figure 4.9")
    assert len(figure["rows"]) == 3 and len(figure["panels"]) == 9


def test_fedips_figures_1_and_2(paper_pages):
    figure = figure_of(paper_pages["fedips_fig1"], "Figure 1")
    assert figure["columns"] == ["γ = 0.5", "γ = 1", "γ = 1.5", "γ = 2"]
    assert figure["metric"] == "NDCG@5"
    for labels in labels_by_panel(figure).values():
        assert labels == ["FedIPS", "FedAvg", "λLinear"]
    figure = figure_of(paper_pages["fedips_fig2"], "Figure 2")
    left, right = (p["lines"] for p in figure["panels"])
    assert [x["label"] for x in left] == ["|U| = 100", "|U| = 500"]
    assert [x["label"] for x in right] == ["FedIPS (estimated IPS)", "FedIPS (real IPS)", "FedAvg"]


def test_a_recipe_page_is_drawn(tmp_path):
    """One small recipe drawn for real: a file per figure, and the page, PNG and PDF."""
    from experiments.lib import paper_figures, recipes

    recipe = recipes.recipes(quick=True)["fpdgd_fig5"]
    for run in recipe.runs:
        write_fake_run(tmp_path / "Fold1" / run.name, run, ())
        write_fake_run(tmp_path / "Fold2" / run.name, run, ())
    page = paper_figures.make_page(tmp_path, recipe)
    assert page["files"] == [
        "paper_figure_5.png",
        "paper_figure_5.pdf",
        "page.png",
        "page.pdf",
    ]
    for name in page["files"]:
        assert (tmp_path / "report" / name).stat().st_size > 1000
    (figure,) = page["figures"]
    assert figure["columns"] == CLICK_COLUMNS
    line = figure["panels"][0]["lines"][0]
    assert line["n_runs"] == 4 and line["folds"] == 2  # folds pooled, as the papers average
    # The page says how small its runs are, and a recipe of figures only has no tables file.
    assert page["scale"].endswith("(--quick: smaller than the paper's runs)"), page["scale"]
    assert re.match(r"\d+ rounds, 4 runs \(", page["scale"]), page["scale"]  # 2 folds of 2
    assert not (tmp_path / "report" / "paper_tables.md").exists()
    # Each figure file says so itself, visibly and in its PNG text: data, size, quick, band.
    from PIL import Image

    with Image.open(tmp_path / "report" / "paper_figure_5.png") as png:
        title, said = png.text["Title"], png.text["Description"]
    assert title.startswith("fpdgd_fig5, Figure 5: ")
    assert (
        f"data: {page['datasets'][0]}; {page['scale']}; each line: mean over runs, shaded ±1 "
        "sd" in said
    )
    assert "(--quick: smaller than the paper's runs)" in said
    assert said.endswith("legend: |B| = 2 | |B| = 4 | |B| = 8")


def test_curves_of_an_eval_every_run(tmp_path):
    """--eval_every: offline curves at the rounds listed in offline_rounds (last: T)."""
    curve = [[0.3, 0.5, 0.6], [0.35, 0.55, 0.65]]
    payload = run_file(
        "fpdgd",
        {**config("perfect"), "rounds": 10, "eval_every": 4},
        {"offline_ndcg": curve, "offline_mrr": curve},
        {"initial_offline_ndcg": [0.2, 0.2], "online_performance": [5.0, 6.0]},
        rounds=[4, 8, 10],
    )
    write(tmp_path / "run" / "results.json", payload)
    (series,) = report.load_series(tmp_path)
    np.testing.assert_array_equal(series.offline_rounds, [4, 8, 10])
    np.testing.assert_array_equal(series.final_offline_ndcg, [0.6, 0.65])
    figure = report.plot_curves("t", [dataclasses.replace(series, label="fpdgd")])
    x = figure.axes[0].lines[0].get_xdata()
    np.testing.assert_array_equal(x, [0, 4, 8, 10])  # the initial model, then the rounds
    assert figure.axes[0].get_xlim() == (0, 10)  # the axis ends where the rounds end
    summary = report.build_report(tmp_path)
    assert summary["groups"][GROUP]["rows"]["fpdgd"]["perfect"]["rounds"] == 10


def test_round_ticks_are_whole_rounds(tmp_path):
    """A short (quick) run's figure marks rounds 0, 1, 2, 3, never 0.5 or 2.5."""
    curve = [[0.3, 0.5, 0.6], [0.35, 0.55, 0.65]]
    payload = run_file(
        "fpdgd",
        {**config("perfect"), "rounds": 3},
        {"offline_ndcg": curve, "offline_mrr": curve},
        {"initial_offline_ndcg": [0.2, 0.2], "online_performance": [5.0, 6.0]},
        rounds=[1, 2, 3],
    )
    write(tmp_path / "run" / "results.json", payload)
    (series,) = report.load_series(tmp_path)
    figure = report.plot_curves("t", [dataclasses.replace(series, label="fpdgd")])
    ticks = [t for t in figure.axes[0].get_xticks() if 0 <= t <= 3]
    assert ticks == [0, 1, 2, 3], ticks


@pytest.mark.parametrize(
    "rounds, message",
    [
        ([4, 8], "'offline_ndcg' has 3 rounds but 'evaluated_rounds' lists 2"),
        ([4, 4, 10], "not a strictly increasing list"),
        ([0, 8, 10], "not a strictly increasing list"),
        ("4,8,10", "not a strictly increasing list"),
    ],
)
def test_malformed_offline_rounds(tmp_path, rounds, message):
    payload = run_file("fpdgd", config("perfect"), {"offline_ndcg": [[0.3, 0.5, 0.6]]}, {})
    payload["cells"][0]["evaluated_rounds"] = rounds
    write(tmp_path / "a" / "results.json", payload)
    with pytest.raises(report.ReportError, match=message):
        report.build_report(tmp_path)


def test_settings_in_words():
    """Legends and headings name settings as the papers do, not as flags."""
    from experiments.lib import words

    fields = {"method": "fpdgd", "epsilon": 4.5, "sensitivity": 5.0, "n_clients": 10}
    assert words.setting(fields, ["method", "epsilon", "sensitivity"]) == "FPDGD, ε = 4.5, Δ = 5"
    assert words.setting({"epsilon": 0.0, "sensitivity": 0.0}, ["epsilon", "sensitivity"]) == (
        "no DP"
    )
    lines = [
        {"method": "fpdgd", "n_clients": 10, "local_updates": 5, "n_malicious": 3,
         "attack": "lie", "aggregator": rule, "epsilon": 0.0}
        for rule in ("fedavg", "krum")
    ]  # fmt: skip
    assert words.field("method", "fpdgd/poisoning/full") == "FPDGD (poisoning, full)"
    assert words.shared(lines) == (
        "FPDGD, |C| = 10, B = 5, 3 of the 10 clients malicious, LIE attack, no DP"
    )
