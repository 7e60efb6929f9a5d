"""The papers' time budget: the projection's arithmetic, and the mode on a tiny recipe."""

import json
import pathlib

import pytest

from experiments import paper_budget as pb
from experiments.lib.recipes import Recipe, Run


def test_projection_arithmetic():
    # (0.5 s/round × 10,000 rounds + 20 s compile) on each of 5 folds
    assert pb.project_seconds(0.5, 20.0, 10_000, 5) == 25_100.0
    # 243 cells × 5 runs × 10 clients × B = 5 interactions a round, T = 10,000, one fold
    assert pb.published_seconds(243 * 5 * 10 * 5, 10_000, 1) == pytest.approx(
        60_750 * 10_000 / 1_700
    )
    assert pb.published_seconds(100, 10, 2, rate=1_000) == 2.0


TINY = Recipe(
    "tiny",
    "a tiny recipe",
    (
        Run("a_perfect", "fpdgd", ("--rounds=1000", "--n_clients=4", "--click_model=perfect")),
        Run("a_navig", "fpdgd", ("--rounds=1000", "--n_clients=4", "--click_model=navigational")),
        Run("b", "noniid", ("--type=1", "--rounds=200", "--chunk_rounds=50"), own_data=True),
        Run("es", "foltr_es", ("--rounds=500",)),
    ),
)


def test_runs_differing_in_a_value_share_one_measurement():
    assert pb.representatives(TINY) == {
        "a_perfect": "a_perfect",
        "a_navig": "a_perfect",
        "b": "b",
        "es": "es",
    }
    argv = pb.measure_argv(TINY.runs[2], "out", 5, 2, 5, ["--synthetic_queries=9"], ["--x=1"])
    assert argv[2:] == [
        "experiments.noniid",  # own data: no data flags
        "--type=1",
        "--rounds=10",
        "--chunk_rounds=5",
        "--n_runs=5",
        "--x=1",
        "--output_dir=out",
    ]
    assert pb.paper_rounds(Run("p", "poisoning", ())) == 10_000


def test_mode_projects_exactly_from_the_measured_seconds(tmp_path):
    """A fake binary reports 2 s for the 10 measured rounds and 4 s of compile."""
    commands = []

    def fake(argv):
        commands.append(argv)
        out = pathlib.Path(argv[-1].split("=", 1)[1])
        out.mkdir(parents=True)
        timings = {"seconds": 2.0, "compile_seconds": 4.0, "interactions": 600}
        if "noniid" in argv[2]:  # noniid: interactions per cell
            timings = {"seconds": 2.0, "compile_seconds": 4.0, "cells": [{"interactions": 600}]}
        (out / "results.json").write_text(json.dumps(timings))
        return 0, ""

    settings = {"chunk_rounds": 5, "chunks": 2, "n_runs": 5, "folds": 5, "data": [], "extra": []}
    row = pb.measure_recipe(TINY, tmp_path, settings, run_command=fake)
    assert len(commands) == 3  # a_navig is measured as a_perfect
    per_run = {p["run"]: p for p in row["per_run"]}
    assert per_run["a_navig"]["measured_as"] == "a_perfect"
    # 0.2 s/round: (0.2 × 1,000 + 4) × 5 folds; own data: one fold; FOLtR-ES: 500 rounds
    assert per_run["a_perfect"]["projected_seconds"] == pytest.approx(1_020.0)
    assert per_run["a_navig"]["projected_seconds"] == pytest.approx(1_020.0)
    assert per_run["b"]["projected_seconds"] == pytest.approx(44.0)
    assert per_run["es"]["projected_seconds"] == pytest.approx(520.0)
    assert row["projected_seconds"] == pytest.approx(2 * 1_020 + 44 + 520)
    # published: 60 interactions a round / 1,700 per s; FOLtR-ES has no published rate
    assert per_run["a_perfect"]["published_seconds"] == pytest.approx(60 * 1_000 * 5 / 1_700)
    assert per_run["b"]["published_seconds"] == pytest.approx(60 * 200 / 1_700)
    assert per_run["es"]["published_seconds"] is None
    assert row["published_seconds"] is None
    assert row["published_partial_seconds"] == pytest.approx((2 * 300_000 + 12_000) / 1_700)
    assert "not measured (" in pb.table([row])


@pytest.mark.slow  # measures a binary in processes of its own
def test_mode_measures_a_real_binary_on_tiny_data(tmp_path):
    recipe = Recipe("real", "", (Run("f", "fpdgd", ("--rounds=300", "--n_clients=3")),))
    settings = {
        "chunk_rounds": 1,
        "chunks": 2,
        "n_runs": 2,
        "folds": 5,
        "data": [
            "--synthetic_queries=8",
            "--synthetic_test_queries=3",
            "--synthetic_features=5",
            "--synthetic_docs_per_query=6",
        ],
        "extra": [f"--cache_dir={tmp_path / 'cache'}"],
    }
    row = pb.measure_recipe(recipe, tmp_path, settings)
    (run,) = row["per_run"]
    assert run["interactions_per_round"] == 2 * 3 * 2  # runs × clients × B (default 2)
    expected = pb.project_seconds(run["seconds_per_round"], run["compile_seconds"], 300, 5)
    assert run["projected_seconds"] == pytest.approx(expected)
    assert run["seconds_per_round"] > 0
    assert row["published_seconds"] == pytest.approx(12 * 300 * 5 / 1_700)
    results = json.loads((tmp_path / "real" / "f" / "results.json").read_text())
    assert results["data"]["test"]["queries"] == 3  # --synthetic_test_queries


def test_every_recipe_s_measured_command_keeps_eval_every_within_the_measured_rounds():
    """poisoning_figs2_4 evaluates every 50 rounds: measured over 10 rounds, K must become
    10 (the binary refuses K > rounds), and stay as it is where it fits."""
    from experiments.lib.recipes import recipes

    checked = 0
    for recipe in recipes(quick=False).values():
        for run in recipe.runs:
            argv = pb.measure_argv(run, "out", 5, 2, 5, [], [])
            values = [a for a in argv if a.startswith("--eval_every=")]
            wanted = pb.flag_value(run.flags, "eval_every")
            assert len(values) == (wanted is not None), (recipe.name, run.name)
            if values:
                assert values[0] == f"--eval_every={min(int(wanted), 10)}"
                checked += 1
            assert sum(a.startswith("--rounds=") for a in argv) == 1
    assert checked  # poisoning_figs2_4's grid at least
    short = Run("r", "fpdgd", ("--eval_every=4",))
    assert "--eval_every=4" in pb.measure_argv(short, "out", 5, 2, 1, [], [])


def test_a_measured_run_takes_the_rounds_its_flags_need(tmp_path):
    """The unlearning replay stores updates every Δt rounds: measured with fewer rounds than
    its largest Δt the binary refuses the run (the default --recipes=all stopped there)."""
    from experiments.lib.recipes import recipes

    (table3,) = recipes(quick=False)["unlearning_table3"].runs
    assert pb.needed_rounds(table3) == 20  # the binary's default Δt = 5, 10, 20
    assert pb.measured_chunks(table3, 5, 2) == 4 and pb.measured_chunks(table3, 25, 2) == 2
    assert pb.measured_chunks(table3, 3, 2) == 7  # 21 rounds: at least 20
    assert pb.needed_rounds(Run("u", "unlearning", ("--delta_t=2,4",))) == 4
    assert pb.needed_rounds(Run("f", "fpdgd", ("--rounds=9",))) == 1
    for recipe in recipes(quick=False).values():
        for run in recipe.runs:
            rounds = 5 * pb.measured_chunks(run, 5, 2)
            assert 10 <= rounds and pb.needed_rounds(run) <= rounds, (recipe.name, run.name)

    commands = []

    def fake(argv):
        commands.append(argv)
        out = pathlib.Path(argv[-1].split("=", 1)[1])
        out.mkdir(parents=True)
        wall = {"training": 3.0, "unlearning": 1.0, "unlearning_compile": 5.0}
        interactions = {"training": 400, "unlearning": 100}
        (out / "results.json").write_text(
            json.dumps({"wall_seconds": wall, "interactions": interactions})
        )
        return 0, ""

    settings = {"chunk_rounds": 5, "chunks": 2, "n_runs": 5, "folds": 5, "data": [], "extra": []}
    recipe = Recipe("u", "", (table3,))
    row = pb.measure_recipe(recipe, tmp_path, settings, run_command=fake)
    (command,) = commands
    assert "--rounds=20" in command and "--chunk_rounds=5" in command
    (run,) = row["per_run"]
    assert run["measured_rounds"] == 20
    assert run["seconds_per_round"] == pytest.approx(4.0 / 20)  # per measured round
    assert run["projected_seconds"] == pytest.approx((4.0 / 20 * 10_000 + 5.0) * 5)


def test_the_line_that_says_why_a_measured_run_failed():
    absl = (
        "FATAL Flags parsing error: Unknown command line flag 'bogus'\n"
        "Pass --helpshort or --helpfull to see help on flags.\n"
    )
    assert pb.why(absl) == "FATAL Flags parsing error: Unknown command line flag 'bogus'"
    assert pb.why("one\nfpdgd: error: --rounds: must be at least 1\n").endswith("at least 1")
    assert pb.why("last line\n") == "last line" and pb.why("") == "(no output)"


def test_no_recipe_is_refused_in_one_line(tmp_path):
    from tests import binaries

    done = binaries.call("paper_budget", "--recipes=", f"--output={tmp_path / 'o' / 'b.json'}")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "--recipes: name one or more recipes" in line
    assert not (tmp_path / "o").exists()


@pytest.mark.slow  # the documented example, at a tiny size: the poisoning grid measured
def test_the_documented_poisoning_budget_runs(tmp_path):
    from tests import binaries

    out = tmp_path / "results" / "budget.json"
    tiny = "--synthetic_queries=8,--synthetic_test_queries=3,--synthetic_features=5,--synthetic_docs_per_query=6"
    done = binaries.run(
        "paper_budget", "--recipes=poisoning_figs2_4", f"--data={tiny}", "--n_runs=1",
        "--measure_chunk_rounds=1", "--measure_chunks=2", f"--output={out}",
        cache_dir=tmp_path / "cache", timeout=1200,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    (row,) = json.loads(out.read_text())["recipes"]
    assert row["recipe"] == "poisoning_figs2_4" and row["projected_seconds"] > 0


@pytest.mark.slow  # the recipe the default --recipes=all stopped at, measured at a tiny size
def test_the_unlearning_budget_runs(tmp_path):
    from tests import binaries

    out = tmp_path / "budget.json"
    tiny = (
        "--synthetic_queries=8,--synthetic_test_queries=3,--synthetic_features=5,"
        "--synthetic_docs_per_query=6"
    )
    done = binaries.run(
        "paper_budget", "--recipes=unlearning_table3", f"--data={tiny}", "--n_runs=1",
        f"--output={out}", cache_dir=tmp_path / "cache", timeout=1200,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    (row,) = json.loads(out.read_text())["recipes"]
    (run,) = row["per_run"]
    assert run["measured_rounds"] == 20 and row["projected_seconds"] > 0
