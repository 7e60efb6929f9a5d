"""foltr_jax.core.compile_cache: where compiled programs are remembered, and that a program
read back gives the run it gave when compiled.

The test process itself never uses JAX's persistent cache (conftest turns it off): the
choices are checked in JAX's config here, what they do in processes of their own (slow)."""

import collections
import dataclasses
import json
import os
import pathlib
import subprocess
import sys
import threading
import time
import types
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from foltr_jax.core import compile_cache
from tests import binaries
from tests.experiments.test_golden import strip_run_fields

_CONFIG = (
    "jax_compilation_cache_dir",
    "jax_enable_compilation_cache",
    "jax_persistent_cache_min_compile_time_secs",
)
_ENV = (
    compile_cache.ENV,
    "FOLTR_JAX_CACHE",
    "JAX_COMPILATION_CACHE_DIR",
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
)


@pytest.fixture
def jax_config(monkeypatch):
    """JAX's cache settings and configure()'s record restored after the test (the cache
    stays off in this process whatever the test sets: conftest)."""
    saved = {name: getattr(jax.config, name) for name in _CONFIG}
    state = dict(compile_cache._STATE)
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    yield
    for name, value in saved.items():
        jax.config.update(name, value)
    compile_cache._STATE.update(state)
    compile_cache._reset()


def test_default_folder_is_per_user_and_keyed(jax_config, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    jax.config.update("jax_compilation_cache_dir", None)
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
    compile_cache.configure()
    expected = tmp_path / ".cache" / "foltr_jax" / "jax" / compile_cache.key()
    assert jax.config.jax_compilation_cache_dir == str(expected)
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.0  # small ones too
    monkeypatch.setenv("FOLTR_JAX_CACHE", str(tmp_path / "elsewhere"))
    compile_cache.configure()  # the default moves with the datasets' cache folder
    expected = tmp_path / "elsewhere" / "jax" / compile_cache.key()
    assert jax.config.jax_compilation_cache_dir == str(expected)


def test_the_setting_then_the_variable_then_jax_own(jax_config, tmp_path, monkeypatch):
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", str(tmp_path / "jax_own"))
    compile_cache._STATE["folder"] = None
    assert compile_cache.configure() == str(tmp_path / "jax_own")  # kept as it is
    monkeypatch.setenv(compile_cache.ENV, str(tmp_path / "variable"))
    assert compile_cache.configure() == str(tmp_path / "variable" / compile_cache.key())
    assert compile_cache.configure(str(tmp_path / "flag")) == str(
        tmp_path / "flag" / compile_cache.key()
    )
    assert compile_cache.configure("none") is None
    assert jax.config.jax_enable_compilation_cache is False
    monkeypatch.setenv(compile_cache.ENV, "None")
    jax.config.update("jax_enable_compilation_cache", True)
    assert compile_cache.configure() is None  # the variable's 'none', any case


def test_a_minimum_compile_time_the_user_set_is_kept(jax_config, tmp_path, monkeypatch):
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 2.5)
    compile_cache.configure(str(tmp_path))
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 2.5
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
    monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "1")
    compile_cache.configure(str(tmp_path))
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 1.0


def test_jax_switched_off_stays_off(jax_config, tmp_path):
    jax.config.update("jax_enable_compilation_cache", False)
    assert compile_cache.configure() is None
    assert compile_cache.configure(str(tmp_path)) is None
    assert jax.config.jax_enable_compilation_cache is False


def test_the_key_names_the_versions_and_the_instruction_set(monkeypatch):
    from jax._src.lib import version_str as jaxlib_version

    key = compile_cache.key()
    assert key.startswith(f"jax-{jax.__version__}-jaxlib-{jaxlib_version}-")
    monkeypatch.setattr(compile_cache, "_cpu_flags", lambda: "sse2 avx")
    other = compile_cache.key()
    monkeypatch.setattr(compile_cache, "_cpu_flags", lambda: "sse2 avx avx512f")
    assert compile_cache.key() != other


def _jax_cache(path):
    from jax._src import lru_cache

    compile_cache._whole_entries()
    return lru_cache.LRUCache(str(path), max_size=-1)


def test_an_entry_is_seen_whole_or_not_at_all(tmp_path):
    cache = _jax_cache(tmp_path)
    value = os.urandom(1 << 20) * 64  # 64 MB: a write in place is seen half done
    entry = tmp_path / "k-cache"
    seen, done = [], threading.Event()

    def read():
        while not done.is_set():
            if entry.exists():
                seen.append(len(entry.read_bytes()))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        cache.put("k", value)
    finally:
        done.set()
        reader.join()
    assert cache.get("k") == value
    assert set(seen) <= {len(value)}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k-cache"]  # no temporary left
    cache.put("k", b"other")  # an entry is never replaced
    assert cache.get("k") == value


TINY = [
    "--synthetic_queries=20",
    "--synthetic_features=8",
    "--synthetic_docs_per_query=12",
    "--n_clients=4",
    "--rounds=4",
    "--chunk_rounds=2",
    "--n_runs=2",
]


def _results(folder: pathlib.Path) -> dict:
    return strip_run_fields(json.loads((folder / "results.json").read_text()))


def _entries(folder: pathlib.Path) -> list:
    return sorted(p.name for p in folder.rglob("*-cache"))


@pytest.mark.slow  # processes of their own
def test_a_second_run_reads_its_programs_back_and_computes_the_same(tmp_path):
    cache = tmp_path / "programs"
    first = binaries.run(
        "fpdgd", *TINY, f"--compile_cache={cache}", f"--output_dir={tmp_path / 'a'}"
    )
    assert first.returncode == 0, first.stderr[-2000:]
    written = _entries(cache)
    assert any(name.startswith("jit_run_chunk-") for name in written)
    assert (cache / compile_cache.key()).is_dir()
    programs = sorted(p.name for p in (cache / compile_cache.key() / "programs").iterdir())
    assert [name.split("-")[0] for name in programs] == ["_initial", "run_chunk"]
    env = {"JAX_LOG_COMPILES": "1"}
    again = binaries.run(
        "fpdgd", *TINY, f"--compile_cache={cache}", f"--output_dir={tmp_path / 'b'}", env=env
    )
    assert again.returncode == 0, again.stderr[-2000:]
    for program in ("run_chunk", "_initial"):  # read back whole: not even traced
        assert f"Finished tracing {program} for jit" not in again.stderr
        assert f"Compiling jit({program})" not in again.stderr
    assert "Finished tracing " in again.stderr  # the log says what it traced
    assert _entries(cache) == written  # nothing compiled anew
    assert sorted(p.name for p in (cache / compile_cache.key() / "programs").iterdir()) == programs
    assert _results(tmp_path / "b") == _results(tmp_path / "a")


_GATHER = """
import sys, jax, jax.numpy as jnp
from foltr_jax.core import compile_cache
compile_cache.configure(sys.argv[1])
def gather(n, x, idx):
    return jnp.tanh(x[idx] * n).sum(), jnp.exp(x[idx[::-1]]) @ x[:5]
args = (jnp.arange(50.0).reshape(10, 5) / 50, jnp.array([3, 1, 4, 1, 5]))
program = compile_cache.compiled(jax.jit(gather, static_argnums=0), (3,), args, "gather")
print(float(program(*args)[0]))
"""


@pytest.mark.slow  # processes of their own
def test_a_program_jax_read_back_is_not_kept(tmp_path):
    # jaxlib 0.10.2: a program JAX read back from its own cache serialises without parts of
    # its code; kept and read back again, it failed ("Function wrapped_slice not found").
    script, cache = tmp_path / "gather.py", tmp_path / "cache"
    script.write_text(_GATHER)

    def run():
        done = subprocess.run(
            [sys.executable, str(script), str(cache)], cwd=binaries.REPO_ROOT,
            env={**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(binaries.REPO_ROOT)},
            capture_output=True, text=True,
            timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    first = run()  # compiled by XLA: kept in both caches
    programs = cache / compile_cache.key() / compile_cache.PROGRAMS
    assert [p.name.split("-")[0] for p in programs.iterdir()] == ["gather"]
    for entry in programs.iterdir():
        entry.unlink()
    assert run() == first  # read back from JAX's cache: not kept
    assert not list(programs.iterdir())
    assert run() == first


@pytest.mark.slow  # processes of their own
def test_two_processes_sharing_a_fresh_folder(tmp_path):
    cache = tmp_path / "programs"
    argv = [sys.executable, "-m", "experiments.fpdgd", *TINY, f"--compile_cache={cache}"]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    started = [
        subprocess.Popen(
            [*argv, f"--output_dir={tmp_path / name}"],
            cwd=binaries.REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    for process in started:
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr[-2000:]
        assert "persistent compilation cache" not in stderr.lower()  # no unreadable entry
    assert _results(tmp_path / "a") == _results(tmp_path / "b")
    assert not list(cache.rglob("*.tmp"))
    third = binaries.run(
        "fpdgd", *TINY, f"--compile_cache={cache}", f"--output_dir={tmp_path / 'c'}"
    )
    assert third.returncode == 0, third.stderr[-2000:]
    assert _results(tmp_path / "c") == _results(tmp_path / "a")


@pytest.mark.slow  # a process of its own
def test_none_remembers_nothing(tmp_path):
    env = {"FOLTR_JAX_CACHE": str(tmp_path / "cache")}
    done = binaries.run(
        "fpdgd", *TINY, "--compile_cache=none", f"--output_dir={tmp_path / 'a'}", env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert not _entries(tmp_path)


@pytest.mark.slow  # a process of its own
def test_the_python_api_remembers_by_default(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in _ENV}
    env.update(HOME=str(tmp_path), JAX_PLATFORMS="cpu")
    program = (
        "import jax, foltr_jax\n"
        "print(jax.jit(lambda x: x + 1)(1.0))\n"  # compiles in milliseconds: remembered too
    )
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=binaries.REPO_ROOT, env=env,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    folder = tmp_path / ".cache" / "foltr_jax" / "jax" / compile_cache.key()
    assert any(name.startswith("jit__lambda") for name in _entries(folder))


def _double(n, x, y):
    return (x * n, {"sum": y + 1, "none": None}), [y]


_DOUBLE = jax.jit(_double, static_argnums=0)


def _key(static=(2,), args=None):
    args = (jnp.ones(3), jnp.int32(0)) if args is None else args
    return compile_cache.program_key(_DOUBLE, static, args, "double")


@pytest.fixture
def main_with_source(monkeypatch):
    """A ``__main__`` with a source file: pytest's own has one, an xdist worker's has none (its
    code comes over a channel), and a program key refuses a ``__main__`` without one."""
    import sys
    import types

    main = sys.modules["__main__"]
    if getattr(main, "__file__", None) is None:
        stand_in = types.ModuleType("__main__")
        stand_in.__file__ = __file__
        monkeypatch.setitem(sys.modules, "__main__", stand_in)


def test_a_program_key_follows_what_tracing_reads(monkeypatch, main_with_source):
    key = _key()
    assert _key() == key  # the same program, the same key
    assert _key(static=(3,)) != key  # a static value
    assert _key(args=(jnp.ones(4), jnp.int32(0))) != key  # a shape
    assert _key(args=(jnp.ones(3, jnp.bfloat16), jnp.int32(0))) != key  # a type
    assert _key(args=(jnp.ones(3), 0.0 + jnp.zeros(()))) != key  # a type and weak type
    assert _key(args=((jnp.ones(3),), jnp.int32(0))) != key  # a structure
    with jax.default_matmul_precision("highest"):  # an option set in a context
        assert _key() != key
    for option, value, same in (
        ("jax_log_compiles", True, True),  # what is logged is not part of a program
        ("jax_numpy_rank_promotion", "raise", False),  # what a program may be is
    ):
        saved = getattr(jax.config, option)
        jax.config.update(option, value)
        try:
            assert (_key() == key) is same
        finally:
            jax.config.update(option, saved)
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=true")  # a numerics variable
    assert _key() != key


def test_a_program_key_follows_the_source_of_every_module(tmp_path, monkeypatch, main_with_source):
    module = tmp_path / "a_users_plugin.py"
    module.write_text("SCALE = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        __import__("a_users_plugin")
        key = _key()
        assert _key() == key
        module.write_text("SCALE = 3\n")  # the same size, then loaded again
        os.utime(module, ns=(1, 1))
        del sys.modules["a_users_plugin"]
        __import__("a_users_plugin")
        assert _key() != key
    finally:
        sys.modules.pop("a_users_plugin", None)


@dataclasses.dataclass(frozen=True)
class _Spec:
    width: int
    ranker: object = None


def test_a_static_value_is_named_by_its_contents_or_not_cached(monkeypatch, main_with_source):
    assert _key(static=(_Spec(3),)) != _key(static=(_Spec(4),))
    hidden = _Spec(3)
    object.__setattr__(hidden, "extra", 1.5)  # set beside the fields: named too
    assert _key(static=(hidden,)) != _key(static=(_Spec(3),))
    scale = 2.0
    for value in (
        _Spec(3, lambda x: x),  # a lambda
        _Spec(3, lambda x: x * scale),  # a closure
        _Spec(3, object()),  # an object of unknown kind
    ):
        with pytest.raises(compile_cache.Uncacheable):
            _key(static=(value,))
    with pytest.raises(compile_cache.Uncacheable):  # a NumPy array is a value, not a leaf
        _key(args=(np.ones(3), jnp.int32(0)))
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))  # python -c
    with pytest.raises(compile_cache.Uncacheable):
        _key()


class Carry(NamedTuple):  # a state a program returns and takes back (module level: importable)
    count: jax.Array
    total: jax.Array


def test_an_outputs_tree_is_written_as_json_and_read_back():
    outputs = ((1, {"b": None, "a": [2, 3]}), Carry(4, (5,)))
    tree = jax.tree_util.tree_structure(outputs)
    form = json.loads(json.dumps(compile_cache._tree_to_json(tree)))
    assert compile_cache._tree_from_json(form) == tree  # Carry itself, not a look-alike
    local = collections.namedtuple("RoundMetrics", ["offline", "online"])  # not importable
    form = compile_cache._tree_to_json(jax.tree_util.tree_structure(local(1, 2)))
    assert form["namedtuple"] == "RoundMetrics"  # rebuilt as a look-alike of its name
    rebuilt = compile_cache._tree_from_json(json.loads(json.dumps(form)))
    assert str(rebuilt) == str(jax.tree_util.tree_structure(local(1, 2)))


def test_a_program_read_back_takes_its_own_outputs_as_inputs(tmp_path):
    """A run feeds each chunk's state to the next chunk: a program read back must accept
    the named tuple it returns (its outputs once came back as a look-alike class, and the
    second chunk's call failed: 'their Python types differ')."""
    unique = float(time.time_ns() % 1_000_003)  # a new program: never JAX's cached one

    def step(state):
        return Carry(state.count + 1, state.total + state.count + unique)

    start = Carry(jnp.int32(0), jnp.float32(0))
    path = tmp_path / "step-0.bin"
    compile_cache._store_program(path, jax.jit(step).lower(start).compile())
    program = compile_cache._load_program(path, (start,))
    state = program(program(program(start)))
    assert type(state) is Carry
    assert int(state.count) == 3 and float(state.total) == 3 + 3 * unique


def test_an_unreadable_program_is_compiled_again(tmp_path):
    path = tmp_path / "double-0.bin"
    for damaged in (b"{}\nnot a program", b"\x00\xff not even a header"):
        path.write_bytes(damaged)
        with pytest.warns(RuntimeWarning, match="compiled again"):
            assert compile_cache._load_program(path, (jnp.ones(3), jnp.int32(0))) is None
    assert compile_cache._load_program(tmp_path / "missing.bin", ()) is None  # no warning
