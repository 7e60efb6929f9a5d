"""Results that can be traced to what made them: results.json's "provenance", and a batch or
the claims check reusing a finished run only when that very command, code, plugin source and
data made it."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests import binaries
from tests.sample_data import REPO_ROOT

TINY = ("--synthetic_queries=30", "--synthetic_features=8", "--synthetic_docs_per_query=15",
        "--n_clients=4", "--local_updates=2", "--rounds=2", "--n_runs=1", "--nocheckpoint")  # fmt: skip


def letor(path, shift=0):
    """A small LETOR file: 6 queries of 5 documents, 3 features."""
    lines = []
    for q in range(6):
        for d in range(5):
            label = (q + d + shift) % 3
            lines.append(f"{label} qid:{q + 1} 1:{d / 5:.2f} 2:{(q * d) % 7 / 7:.3f} 3:{d % 2}")
    path.write_text("\n".join(lines) + "\n")
    return path


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def swap(args, old, new):
    assert old in args
    return tuple(new if a == old else a for a in args)


def command(out, *args, binary="fpdgd"):
    """The argv a batch would give ``run_missing``."""
    return [sys.executable, "-m", f"experiments.{binary}", *args, f"--output_dir={out}"]


def test_results_record_the_command_flags_code_and_data_content(tmp_path):
    train, test = letor(tmp_path / "train.txt"), letor(tmp_path / "test.txt", 1)
    args = (f"--train_path={train}", f"--test_path={test}", *TINY[3:])
    out = tmp_path / "out"
    done = binaries.call("fpdgd", *args, f"--output_dir={out}", cache_dir=tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    found = json.loads((out / "results.json").read_text())["provenance"]
    assert found["command"] == ["experiments.fpdgd", *args]  # less --output_dir
    assert found["flags"]["rounds"] == 2 and found["flags"]["train_path"] == str(train)
    assert "output_dir" not in found["flags"]
    assert [(d["path"], d["bytes"], d["sha256"]) for d in found["data_files"]] == [
        (str(train), train.stat().st_size, sha(train)),
        (str(test), test.stat().st_size, sha(test)),
    ]
    from experiments.lib import provenance

    assert found["code"] == provenance.code() and found["plugins"] == []


def test_a_fold_s_files_and_a_plugin_s_source_are_recorded(tmp_path):
    fold = tmp_path / "Fold1"
    fold.mkdir()
    letor(fold / "train.txt"), letor(fold / "vali.txt", 2), letor(fold / "test.txt", 1)
    plugin = tmp_path / "nothing_much.py"
    plugin.write_text("# a plugin that registers nothing\n")
    out = tmp_path / "out"
    args = (f"--fold_dir={fold}", f"--plugin={plugin}", *TINY[3:], f"--output_dir={out}")
    done = binaries.call("foltr_es", *args, cache_dir=tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    found = json.loads((out / "results.json").read_text())["provenance"]
    assert [d["path"] for d in found["data_files"]] == [
        str(fold / f"{s}.txt") for s in ("train", "vali", "test")
    ]
    assert found["plugins"] == [{"plugin": str(plugin), "path": str(plugin), "sha256": sha(plugin)}]


def test_output_dir_is_left_out_of_the_command_in_every_spelling():
    from experiments.lib import provenance

    args = ["--a=1", "--output_dir=x", "-output_dir=y", "--output_dir", "z", "--b"]
    assert provenance.without_output_dir(args) == ["--a=1", "--b"]
    assert provenance.command_of(["python", "-m", "experiments.noniid", "--type=2"]) == [
        "experiments.noniid", "--type=2"
    ]  # fmt: skip


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """One finished fpdgd run on a small LETOR file, a plugin among its arguments and a flag
    file that names another (nested) flag file."""
    tmp = tmp_path_factory.mktemp("made")
    train, test = letor(tmp / "train.txt"), letor(tmp / "test.txt", 1)
    plugin = tmp / "inert.py"
    plugin.write_text("# inert\n")
    nested = tmp / "nested.flags"
    nested.write_text("--seed=3\n")
    flag_file = tmp / "run.flags"
    flag_file.write_text(f"# the seed is in another file\n--flagfile={nested}\n")
    out = tmp / "run"
    args = (f"--train_path={train}", f"--test_path={test}", f"--plugin={plugin}",
            f"--flagfile={flag_file}", *TINY[3:])  # fmt: skip
    done = binaries.call("fpdgd", *args, f"--output_dir={out}", cache_dir=tmp / "cache")
    assert done.returncode == 0, done.stderr
    return {"out": out, "args": args, "train": train, "plugin": plugin, "flag_file": flag_file,
            "nested": nested}  # fmt: skip


def test_a_flag_file_is_recorded_with_its_content(made):
    found = json.loads((made["out"] / "results.json").read_text())["provenance"]
    flag_file, nested = made["flag_file"], made["nested"]
    assert found["flag_files"] == [
        {"path": str(flag_file), "sha256": sha(flag_file)},
        {"path": str(nested), "sha256": sha(nested)},
    ]
    assert found["flags"]["seed"] == 3  # what it held, as read
    assert found["arguments"] == [*made["args"][:3], "--seed=3", *made["args"][4:]]


def test_flag_files_are_read_in_every_spelling_and_nested_as_absl_reads_them(tmp_path, monkeypatch):
    from absl import flags

    from experiments.lib import provenance

    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.flags").write_text("--a=2\n\n# a comment\n// another\n--flagfile=n1.flags\n")
    (tmp_path / "n1.flags").write_text("--flagfile=n2.flags\n--b=1\n--flagfile=x.flags\n")
    (tmp_path / "n2.flags").write_text("--c=3\n")
    (tmp_path / "y").write_text("--d\n")
    args = ["--a=1", "--flagfile=x.flags", "-flagfile=y", "--flagfile", "y", "--flagfiles=v",
            "--", "--flagfile=x.flags"]  # fmt: skip
    expanded, read = provenance.expand_flag_files(args)
    assert expanded == flags.FlagValues().read_flags_from_files(args)
    assert expanded == [
        "--a=1",
        "--a=2",
        "--c=3",
        "--b=1",
        "--d",
        "--d",
        "--flagfiles=v",
        "--",
        "--flagfile=x.flags",
    ]  # a cycle is cut, nothing after -- is read
    names = ["x.flags", "n1.flags", "n2.flags", "y", "y"]
    assert [entry["path"] for entry in read] == [str(tmp_path / n) for n in names]
    assert provenance.flag_files(["--flagfile=n2.flags"]) == [str(tmp_path / "n2.flags")]
    with pytest.raises(provenance.FlagFileError, match=r"the flag file .*/missing cannot be read"):
        provenance.expand_flag_files(["--flagfile=missing"])
    os.mkfifo(tmp_path / "fifo")  # never opened: it would wait for a writer
    with pytest.raises(provenance.FlagFileError, match="it is a FIFO"):
        provenance.expand_flag_files(["--flagfile=fifo"])


def test_a_run_is_reused_only_by_the_command_that_made_it(made, capsys):
    from experiments.lib import runs

    out, args = made["out"], made["args"]
    assert runs.complete(out, command(out, *args))
    assert runs.complete(out)  # without a command: the results exist and read
    assert capsys.readouterr().err == ""

    assert not runs.complete(out, command(out, *swap(args, "--n_runs=1", "--n_runs=2")))
    said = capsys.readouterr().err
    assert "not made by this command: other arguments (--n_runs=1 then; --n_runs=2 now)" in said
    assert said.rstrip().endswith("running it again")

    assert not runs.complete(out, command(out, *args, binary="foltr_es"))
    assert "made by ['experiments.fpdgd']" in capsys.readouterr().err
    assert not runs.complete(out, command(out, *swap(args, "--n_runs=1", "--n_runs=2")), say=False)
    assert capsys.readouterr().err == ""


def test_an_edited_data_file_or_plugin_or_other_code_is_not_reused(made, capsys, monkeypatch):
    from experiments.lib import provenance, runs

    out, args = made["out"], made["args"]
    for path in (made["train"], made["plugin"], made["flag_file"], made["nested"]):
        before = path.read_bytes()
        try:
            path.write_bytes(before + b"\n")  # one byte more: another content
            assert not runs.complete(out, command(out, *args))
            assert f"{path} has changed since; running it again" in capsys.readouterr().err
        finally:
            path.write_bytes(before)
        assert runs.complete(out, command(out, *args))
    monkeypatch.setattr(provenance, "code", lambda: "0123456789abcdef")
    assert not runs.complete(out, command(out, *args))
    assert "other code (version" in capsys.readouterr().err


def test_same_run_compares_everything_that_can_change_a_number(made, monkeypatch):
    """Each thing ``same_run`` compares, changed alone, makes another run: the list is
    enumerated here, so a new entry needs its case."""
    import copy

    from experiments.lib import provenance
    from foltr_jax.core import files

    out, args = made["out"], made["args"]
    recorded = json.loads((out / "results.json").read_text())["provenance"]
    assert provenance.same_run(recorded, command(out, *args)) is None
    assert recorded["environment"] == {} and recorded["device"] == {"platform": "cpu",
                                                                    "kind": "cpu"}  # fmt: skip
    assert set(recorded["runtime"]) == {"jax", "jaxlib", "numpy"}

    def edited(path, text):
        def change():
            before = path.read_text()
            path.write_text(text)
            return lambda: path.write_text(before)

        return change

    def recorded_as(key, value):
        def change():
            recorded[key] = value
            return lambda: recorded.__setitem__(key, copy.deepcopy(original[key]))

        return change

    def set_variable(name, value):
        def change():
            monkeypatch.setenv(name, value)
            return lambda: monkeypatch.delenv(name)

        return change

    def other_code():
        monkeypatch.setattr(provenance, "code", lambda: "0123456789abcdef")
        return monkeypatch.undo

    original = copy.deepcopy(recorded)
    cases = {
        "program": (None, "it was made by ['experiments.fpdgd']"),
        "arguments": (edited(made["nested"], "--seed=4\n"),  # a nested flag file
                      "other arguments (--seed=3 then; --seed=4 now)"),
        "flag files": (edited(made["nested"], "--seed=3\n# said again\n"),
                       f"the flag file {made['nested']} has changed since"),
        "code": (other_code, "other code (version"),
        "plugins": (edited(made["plugin"], "# edited\n"), f"the plugin {made['plugin']} has"),
        "data files": (edited(made["train"], "1 qid:1 1:0.5\n"),
                       f"the data file {made['train']} has changed since"),
        "dataset cache": (recorded_as("dataset_cache", {**original["dataset_cache"], "parser": 1}),
                          "other dataset cache versions (parser=1 then; parser="),
        "runtime": (recorded_as("runtime", {**original["runtime"], "jaxlib": "0.0.1"}),
                    "other versions (jaxlib=0.0.1 then; jaxlib="),
        "environment": (set_variable("JAX_ENABLE_X64", "1"),
                        ("other numerics environment "
                         "variables (JAX_ENABLE_X64 unset then; JAX_ENABLE_X64=1 now)")),
        "device": (recorded_as("device", {"platform": "gpu", "kind": "NVIDIA H100"}),
                   "other device (kind=NVIDIA H100, platform=gpu then; kind=cpu, platform=cpu"),
    }  # fmt: skip
    assert tuple(cases) == provenance.COMPARED
    for aspect, (change, said) in cases.items():
        argv = command(out, *args, binary="foltr_es") if aspect == "program" else None
        undo = change() if change else (lambda: None)
        try:
            found = provenance.same_run(recorded, argv or command(out, *args))
        finally:
            undo()
        assert found is not None and said in found, (aspect, found)
        assert provenance.same_run(recorded, command(out, *args)) is None, aspect
    for key in ("arguments", "flag_files", "dataset_cache", "runtime", "environment", "device"):
        older = {k: v for k, v in recorded.items() if k != key}  # an older version's file
        assert "an older version wrote it" in provenance.same_run(older, command(out, *args))
    assert set(files.NUMERICS_VARIABLES) >= {"JAX_ENABLE_X64", "JAX_DEFAULT_MATMUL_PRECISION",
                                            "XLA_FLAGS"}  # fmt: skip


def test_a_checkpoint_is_not_resumed_under_other_numerics_variables(tmp_path, monkeypatch):
    from foltr_jax.core import files

    path = tmp_path / "state.npz"
    files.save_arrays(path, "f", {}, [[1.0]])
    for name, value in (("JAX_ENABLE_X64", "1"), ("XLA_FLAGS", "--xla_cpu_enable_fast_math")):
        with monkeypatch.context() as env:
            env.setenv(name, value)
            assert files.numerics_environment() == {name: value}
            with pytest.raises(files.StoredFileError, match="numerics variables"):
                files.load_arrays(path, "f")
    assert files.load_arrays(path, "f")[0] == {}


def test_results_without_provenance_are_not_reused(made, tmp_path, capsys):
    from experiments.lib import runs

    old = tmp_path / "old"
    old.mkdir()
    written = json.loads((made["out"] / "results.json").read_text())
    del written["provenance"]
    (old / "results.json").write_text(json.dumps(written))
    assert not runs.complete(old, command(old, *made["args"]))
    assert "records no provenance" in capsys.readouterr().err


def test_run_missing_reruns_what_other_settings_made_and_removes_their_results(
    made, tmp_path, monkeypatch, capsys
):
    """The claims check's and the batch's one entry point: a run made by other settings is
    run again (its old results removed first, so a failed new run leaves none); one made by
    this command is not."""
    import shutil

    from experiments.lib import runs

    same, other = tmp_path / "same", tmp_path / "other"
    for folder in (same, other):
        shutil.copytree(made["out"], folder)
    started = []

    def fake_run(argv, *_):
        started.append(argv)
        assert not (other / "results.json").exists()  # removed before the run
        return subprocess.CompletedProcess(argv, 1, "", "it failed")

    monkeypatch.setattr(runs, "run_one", fake_run)
    args = made["args"]
    todo = [
        (same, command(same, *args)),
        (other, command(other, *swap(args, "--n_runs=1", "--n_runs=3"))),
    ]
    failed = runs.run_missing(todo, 1, "claims")
    assert [a[-1] for a in started] == [f"--output_dir={other}"] and failed == [other]
    assert (same / "results.json").is_file() and not (other / "results.json").exists()
    assert "--n_runs=1 then; --n_runs=3 now" in capsys.readouterr().err


def test_quick_and_full_batches_never_share_a_recipe_s_folder(tmp_path):
    results = tmp_path / "results"
    (results / "fpdgd_fig5").mkdir(parents=True)
    (results / "fpdgd_fig5" / "batch.json").write_text(
        json.dumps({"quick": True, "data": "synthetic", "folds": ["synthetic"]})
    )
    done = binaries.call(
        "batch", "--recipe=fpdgd_fig5", "--data_root=synthetic", f"--results_dir={results}",
        cache_dir=tmp_path / "cache",
    )  # fmt: skip
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "holds the runs of a --quick batch (quick True there, False now)" in line, line
    assert sorted(p.name for p in (results / "fpdgd_fig5").iterdir()) == ["batch.json"]


def test_a_recipe_s_folder_records_its_batch_and_refuses_another_dataset(tmp_path):
    batch = binaries.load("batch")
    from experiments.lib.cli import UserError

    folder = tmp_path / "fpdgd_fig5"
    first = {"quick": False, "data": str(tmp_path / "A"), "folds": ["Fold1"]}
    batch.claim_recipe_folder(folder, first)
    assert json.loads((folder / "batch.json").read_text()) == first
    batch.claim_recipe_folder(folder, first)  # the same batch again: fine
    with pytest.raises(UserError, match=r"data '.*/A' there, '.*/B' now"):
        batch.claim_recipe_folder(folder, {**first, "data": str(tmp_path / "B")})


def test_a_checkpoint_written_under_another_plugin_source_is_not_resumed(tmp_path):
    from foltr_jax.core import files

    path = tmp_path / "state.npz"
    try:
        files.set_user_code({"/p/rule.py": "a" * 64})
        files.save_arrays(path, "f", {}, [[1.0]])
        assert files.load_arrays(path, "f")[0] == {}
        files.set_user_code({"/p/rule.py": "b" * 64})  # the plugin was edited
        with pytest.raises(files.StoredFileError, match="written by other code or plugin files"):
            files.load_arrays(path, "f")
    finally:
        files.set_user_code({})
    assert files.code_version() == files.source_version()  # no plugin: as before


PLUGIN = textwrap.dedent(
    """
    import foltr_jax


    @foltr_jax.aggregators.register("traced_mean", "FedAvg under another name")
    def traced_mean(models, weights, n_malicious):
        return foltr_jax.aggregators.fedavg(models, weights)
    """
)


@pytest.mark.slow  # a process killed and started again
def test_a_plugin_edited_between_kill_and_resume_starts_the_run_over(tmp_path):
    plugin = tmp_path / "rule.py"
    plugin.write_text(PLUGIN)
    out = tmp_path / "out"
    env = {**os.environ, "FOLTR_JAX_CACHE": str(tmp_path / "cache"), "JAX_PLATFORMS": "cpu"}
    argv = command(out, *TINY[:3], "--n_clients=200", "--rounds=400", "--chunk_rounds=5",
                   "--n_runs=1", "--aggregator=traced_mean", f"--plugin={plugin}")  # fmt: skip
    process = subprocess.Popen(argv, cwd=REPO_ROOT, env=env, stderr=subprocess.DEVNULL)
    deadline = time.time() + 600
    while not (out / ".checkpoint.npz").exists() and process.poll() is None:
        assert time.time() < deadline
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (out / "results.json").exists(), "the run finished before it could be killed"
    plugin.write_text(PLUGIN + "# edited\n")
    done = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "written by other code or plugin files" in done.stderr
    assert "the run starts over" in done.stderr
    assert "resumed from the checkpoint" not in done.stderr
    recorded = json.loads((out / "results.json").read_text())["provenance"]["plugins"]
    assert recorded[0]["sha256"] == sha(plugin)
