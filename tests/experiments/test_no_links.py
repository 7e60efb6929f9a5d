"""Nothing is written through a symbolic link, wherever a tool writes (a report, a batch, the
claims, a checkpoint): ``files.refuse_links`` is the one check, and each tool refuses in one
line naming its flag before it writes."""

import os
import sys

import pytest

from tests import binaries
from tests.experiments.test_judged_runs import fake_results


@pytest.fixture
def victim(tmp_path):
    """A folder a planted link points to: nothing may appear in it."""
    folder = tmp_path / "victim"
    folder.mkdir()
    return folder


def test_a_file_is_never_written_into_a_linked_folder(tmp_path, victim):
    from foltr_jax.core import files

    os.symlink(victim, tmp_path / "linked")
    with pytest.raises(files.LinkedPathError, match="linked is a symbolic link, which is never"):
        files.write_atomically(tmp_path / "linked" / "x.json", lambda s: s.write(b"{}"))
    with pytest.raises(files.LinkedPathError):  # a checkpoint goes the same way
        files.save_arrays(tmp_path / "linked" / ".checkpoint.npz", "f", {}, [[1.0]])
    assert list(victim.iterdir()) == []
    assert files.linked_part(tmp_path / "linked" / "a" / "b", below=tmp_path) == (
        tmp_path / "linked"
    )
    assert files.linked_part(tmp_path / "real" / "a", below=tmp_path) is None
    (tmp_path / "x.json").symlink_to(victim / "x.json")  # a link at a file's own name:
    files.write_atomically(tmp_path / "x.json", lambda s: s.write(b"{}"))  # replaced
    assert not (tmp_path / "x.json").is_symlink() and list(victim.iterdir()) == []


def test_the_report_never_writes_through_a_linked_report_folder(tmp_path, victim):
    results = tmp_path / "res"
    fake_results(results / "run" / "results.json", "any")
    os.symlink(victim, results / "report")
    done = binaries.call("report", f"--results_dir={results}")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("report: error: --results_dir: ") and "symbolic link" in line, line
    assert list(victim.iterdir()) == []


def test_the_claims_never_write_through_a_linked_results_folder(tmp_path, victim):
    os.symlink(victim, tmp_path / "claims")
    done = binaries.call("claims", "--norun", "--claims=fpdgd_fig4", "--data_root=synthetic",
                         f"--results_dir={tmp_path / 'claims'}")  # fmt: skip
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("claims: error: --results_dir: ") and "symbolic link" in line, line
    assert list(victim.iterdir()) == []


def test_a_batch_never_runs_into_a_linked_folder(tmp_path, victim):
    from experiments.lib import runs
    from experiments.lib.cli import UserError
    from foltr_jax.engine.results_files import OutputError

    results = tmp_path / "results"
    (results / "recipe").mkdir(parents=True)
    os.symlink(victim, results / "recipe" / "Fold1")
    out = results / "recipe" / "Fold1" / "run"
    argv = [sys.executable, "-m", "experiments.fpdgd", f"--output_dir={out}"]
    with pytest.raises(UserError, match=r"^--results_dir: .*Fold1 is a symbolic link"):
        runs.run_missing([(out, argv)], 1, "t", below=results)
    assert list(victim.iterdir()) == []
    batch = binaries.load("batch")
    os.symlink(victim, results / "recipe" / "report")
    with pytest.raises(OutputError, match=r"^--results_dir: .*report is a symbolic link"):
        batch.claim_recipe_folder(results / "recipe", {"quick": True})
    assert list(victim.iterdir()) == []
