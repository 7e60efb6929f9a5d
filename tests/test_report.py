"""foltr_jax.report and `python -m experiments.report` on small synthetic results folders."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from sample_data import REPO_ROOT

from experiments import figures as report
from foltr_jax import statistics

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


@pytest.fixture
def results_dir(tmp_path):
    root = tmp_path / "results"
    for method, by_click in NUMBERS.items():
        for click_model, (final, online) in by_click.items():
            write(
                root / "runs" / f"{method}_{click_model}" / "results.json",
                {
                    "method": method,
                    "config": config(click_model, N_CLIENTS[method]),
                    "data": DATA,
                    "versions": {"foltr_jax": "0.1.0"},
                    "initial_offline_ndcg": [0.2, 0.2, 0.2],
                    "offline_ndcg": curves(final),
                    "offline_mrr": curves(final),
                    "online_ndcg": curves(final),
                    "online_max_rr": curves(final),
                    "online_performance": online,
                    "final_offline_ndcg": final,
                },
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
    assert f"| {LABELS['fpdgd']} (baseline) |" in table
    assert "Bonferroni over the 2 comparisons" in table
    tex = (out / "table.tex").read_text()
    assert r"$0.6100 \pm 0.0100^\dagger$" in tex and r"\begin{tabular}{lcc}" in tex
    assert "foltr\\_es, n\\_clients=10" in tex
    # offline nDCG curves, and offline MaxRR ones (FPDGD paper Figure 3): every run recorded them
    assert len(group["figures"]) == 4
    assert [n for n in group["figures"] if "_maxrr." in n] == group["figures"][2:]
    for name in group["figures"]:
        assert name.endswith((".png", ".pdf"))
        assert (out / name).stat().st_size > 1000
    assert (out / group["figures"][0]).read_bytes().startswith(b"\x89PNG")
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
    for click_model in ("navigational", "perfect"):
        for (aggregator, attack, m), final in finals.items():
            cells.append(
                {
                    "setting": {
                        "click_model": click_model,
                        "n_malicious": m,
                        "attack": attack,
                        "aggregator": aggregator,
                        "epsilon": 0.0,
                        "sensitivity": 0.0,
                    },
                    "offline_ndcg": curves(final),
                    "online_ndcg": curves(final),
                    "online_performance": [1.0, 2.0, 3.0],
                    "final_offline_ndcg_mean": float(np.mean(final)),
                    "final_offline_ndcg_sd": float(np.std(final, ddof=1)),
                }
            )
    payload = {"method": "fpdgd/poisoning/paper", "config": config("informational")}
    write(tmp_path / "poisoning" / "results.json", {**payload, "data": DATA, "cells": cells})
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
    assert "| aggregator=krum, attack=lie, m=2 | 0.6000 ± 0.1000 | 0.6000 ± 0.1000 |" in table
    # a figure per malicious count m, the no-attack cell drawn in each
    assert [name[-7:] for name in group["figures"]] == ["m-2.png", "m-2.pdf"]


def noniid_cell(name, final, online):
    return {
        "name": name,
        "setting": {"data": name},
        "offline_ndcg": curves(final),
        "online_performance": online,
        "final_offline_ndcg_mean": float(np.mean(final)),
    }


def test_noniid_cells(tmp_path):
    # Type 2 #R=1 on two B values, as the thesis's Figure 4.5: a group (figure, table) per B
    iid, noniid = [0.80, 0.82, 0.84], [0.30, 0.40, 0.50]
    for b in (2, 5):
        for click_model in ("perfect", "informational"):
            payload = {
                "method": "fpdgd/noniid/type2",
                "config": {**config(click_model, n_clients=5), "ranker": "linear"},
                "noniid": {"type": 2, "grades_per_client": 1, "clicks": "ccm", "mix": "none"},
                "data": DATA,
                "cells": [
                    noniid_cell("iid", iid, [3.0, 3.0, 3.0]),
                    noniid_cell("noniid", noniid, [4.0, 4.0, 4.0]),
                    noniid_cell("fedprox_mu=0.1", noniid, [4.0, 4.0, 4.0]),
                ],
            }
            payload["config"]["local_updates"] = b
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


@pytest.mark.parametrize(
    "payload, message",
    [
        ("{not json", "not valid JSON: Expecting property name"),
        ("[1, 2]", "the top level is not a JSON object"),
        ('{"method": "x"}', "no 'offline_ndcg', 'final_offline_ndcg' or 'cells'"),
        ('{"offline_ndcg": [[0.1, 0.2], [0.3]]}', "'offline_ndcg' is not a list of equal-length"),
        ('{"final_offline_ndcg": [0.1, NaN]}', "contains NaN"),
        (
            '{"final_offline_ndcg": [0.1, 0.2], "online_performance": [1.0]}',
            "'online_performance' has 1 runs but 'final_offline_ndcg' has 2",
        ),
        ('{"cells": [{"offline_ndcg": [[0.5]]}]}', r"cells\[0\]: no 'setting' object"),
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
    return subprocess.run(
        [sys.executable, "-m", "experiments.report", *args],
        check=False,
        cwd=REPO_ROOT,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        capture_output=True,
        text=True,
        timeout=120,
    )


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
        {
            "method": "lambdarank",
            "config": {"rounds": 4, "seed": 0},
            "data": DATA,
            "metric": "offline_ndcg = NDCG@5 of the global model on the test split",
            "offline_ndcg": [[0.3, 0.4, 0.5, 0.6]],
            "final_offline_ndcg": [0.6],
        },
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
