"""Folders a run writes into are its own (a planted symbolic link is refused, never
followed), and no binary computes the same cell twice under two names."""

import os

import pytest

from tests import binaries

TINY = ("--synthetic_queries=20", "--synthetic_features=6", "--synthetic_docs_per_query=10",
        "--n_runs=1", "--rounds=2")  # fmt: skip


@pytest.mark.parametrize(
    "module, args, folder",
    [
        ("noniid", ("--type=2",), ".cells"),
        (
            "unlearning",
            ("--n_clients=4", "--delta_t=1", "--unlearn_local_updates=1", "--click_models=perfect"),
            ".phases",
        ),
    ],
)
def test_a_binary_never_writes_through_a_linked_work_folder(tmp_path, module, args, folder):
    target = tmp_path / "users_folder"
    target.mkdir()
    (target / "precious.npz").write_text("the user's")
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(target, out / folder)
    done = binaries.call(module, *TINY, *args, f"--output_dir={out}", cache_dir=tmp_path / "c")
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert f"{folder} is a symbolic link, which is never followed" in line
    assert sorted(p.name for p in target.iterdir()) == ["precious.npz"]
    assert (target / "precious.npz").read_text() == "the user's"
    assert not (out / "results.json").exists()


@pytest.mark.parametrize(
    "module, args, message",
    [
        ("poisoning", ("--malicious_counts=1,01",), "--malicious_counts: 1 is asked for twice"),
        ("poisoning", ("--click_models=perfect,perfect",), "--click_models: perfect is asked"),
        ("unlearning", ("--delta_t=5,5",), "--delta_t: 5 is asked for twice"),
        ("unlearning", ("--click_models=perfect,perfect",), "--click_models: perfect is asked"),
        ("unlearning", ("--unlearn_local_updates=1,1",), "--unlearn_local_updates: 1 is asked"),
        ("unlearning", ("--forget_clients=0,0",), "--forget_clients: 0 is asked for twice"),
        ("fpdgd", ("--click_models=perfect,perfect",), "--click_models: perfect is asked"),
        ("noniid", ("--type=2", "--remedies=fedprox,fedprox"), "--remedies: fedprox is asked"),
        ("noniid", ("--type=2", "--remedies=fedprox", "--prox_mu=0.1,0.10"), "--prox_mu: 0.1 is"),
        ("noniid", ("--type=4", "--steps=1,1"), "--steps: 1 is asked for twice"),
    ],
)
def test_every_binary_refuses_a_cell_asked_for_twice(tmp_path, module, args, message):
    out = tmp_path / "out"
    done = binaries.call(module, *TINY, *args, f"--output_dir={out}", cache_dir=tmp_path / "c")
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert message in line, line
    assert not (out / "results.json").exists()
