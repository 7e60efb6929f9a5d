"""The binaries' flags come from the configs: one name, default and help per setting."""

import dataclasses

import pytest
from absl import flags

from foltr_jax.engine import config
from foltr_jax.methods import fedips, foltr_es
from foltr_jax.methods.fpdgd import federation
from tests import binaries

BINARIES = ("fpdgd", "poisoning", "noniid", "unlearning", "foltr_es", "fedips", "benchmark")
SHARED_MODULES = ("experiments.lib.shared_flags", "experiments.lib.config_flags")
# A binary that reads a setting its own way says so in its help (0: the type's default).
OWN_HELP = {("noniid", "n_clients"), ("noniid", "local_updates")}


def _shared_flags(module: str) -> tuple[dict, list]:
    """{flag: (default, help)} of the shared definers' flags, and the binary's ConfigFlags."""
    binary = binaries.load(module)
    by_module = flags.FLAGS.flags_by_module_dict()
    found = {}
    for definer in SHARED_MODULES:
        for flag in by_module.get(definer, []):
            found[flag.name] = (flag.default, flag.help)
    return found, binary.CONFIG_FLAGS


@pytest.fixture(scope="module")
def every_binary():
    return {module: _shared_flags(module) for module in BINARIES}


def test_a_shared_setting_has_one_help_text_in_every_binary(every_binary):
    helps = {}
    for module, (found, _) in every_binary.items():
        for name, (_, text) in found.items():
            if (module, name) not in OWN_HELP:
                helps.setdefault(name, {}).setdefault(text, []).append(module)
    differing = {name: texts for name, texts in helps.items() if len(texts) > 1}
    assert not differing
    # Each is defined in several binaries (the shared settings are shared).
    for name in (
        "n_clients",
        "rounds",
        "ranker",
        "click_model",
        "n_runs",
        "seed",
        "attack",
        "aggregator",
        "n_malicious",
        "eval_every",
        "client_chunk",
        "n_devices",
    ):
        assert sum(name in found for found, _ in every_binary.values()) >= 3, name


def test_a_flag_default_is_its_config_field_or_the_binary_s_paper_default(every_binary):
    checked = 0
    for module, (found, generated) in every_binary.items():
        fields = {f.name: f for f in dataclasses.fields(generated.config_class)}
        for name in generated.names:
            flag = generated.flag(name)
            expected = generated.defaults.get(name, fields[name].default)
            assert found[flag][0] == expected, (module, flag)
            checked += 1
    assert checked > 100


def test_binaries_with_the_same_config_share_defaults_but_for_named_paper_settings(every_binary):
    """fpdgd and benchmark take FpdgdConfig's defaults; poisoning and unlearning the
    ten-client papers' (n_clients, local_updates, rounds, chunk_rounds) and nothing else."""
    generated = every_binary["fpdgd"][1].names
    fpdgd, benchmark, poisoning, unlearning = (
        {name: every_binary[module][0][name] for name in generated}
        for module in ("fpdgd", "benchmark", "poisoning", "unlearning")
    )
    assert fpdgd == benchmark
    assert poisoning == unlearning
    differ = {name for name in fpdgd if fpdgd[name] != poisoning.get(name)}
    assert differ == {"n_clients", "local_updates", "rounds", "chunk_rounds"}
    assert federation.FpdgdConfig().n_clients == fpdgd["n_clients"][0] == 1000
    assert poisoning["n_clients"][0] == 10


def test_every_flagged_field_has_help_and_registry_names():
    internal = {"top_k", "aggregation", "display_groups"}  # not flags of FPDGD, FOLtR-ES
    for config_class in (federation.FpdgdConfig, foltr_es.FoltrEsConfig, fedips.FedIpsConfig):
        for field in dataclasses.fields(config_class):
            if config_class is fedips.FedIpsConfig or field.name not in internal:
                assert config.setting_help(config_class, field.name)
    ranker_help = config.setting_help(federation.FpdgdConfig, "ranker")
    assert "linear" in ranker_help and "neural" in ranker_help
    assert "krum" in config.setting_help(fedips.FedIpsConfig, "aggregator")
    assert "adam (FedAdam)" in config.setting_help(federation.FpdgdConfig, "server_optimizer")


@pytest.mark.parametrize(
    "module, argument, named",
    [
        ("fedips", "--local_learning_rate=-1", "--local_learning_rate: must be positive"),
        ("foltr_es", "--privacy_p=2", "--privacy_p:"),
        ("noniid", "--client_chunk=3", "--client_chunk: must divide n_clients"),
        ("fpdgd", "--server_optimizer=lion", "--server_optimizer: must be one of"),
    ],
)
def test_a_bad_setting_is_one_line_naming_its_flag(tmp_path, module, argument, named):
    result = binaries.call(module, argument, f"--output_dir={tmp_path}")
    assert result.returncode != 0
    assert named in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_a_flag_absl_refuses_is_one_line_naming_it_status_2():
    """absl's own refusals (a value not of the flag's type, an unknown flag) read like every
    other bad flag: one line '<program>: error: ...' naming the flag, exit status 2."""
    done = binaries.run("fpdgd", "--n_clients=abc", "--bogus=1")
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "fpdgd: error: flag --n_clients=abc: invalid literal for int() with base 10: 'abc'"
    ]
    done = binaries.run("claims", "--bogus=1")
    assert done.returncode == 2
    assert done.stderr == "claims: error: Unknown command line flag 'bogus'\n"


def test_every_binary_parses_its_flags_with_the_shared_parser():
    """Each binary's ``app.run`` passes ``program.parse_flags`` (the subprocess test above
    tries two of them)."""
    for path in sorted((binaries.REPO_ROOT / "experiments").glob("*.py")):
        calls = [line.strip() for line in path.read_text().splitlines() if "app.run(" in line]
        assert calls in ([], ["app.run(main, flags_parser=program.parse_flags)"]), path


@pytest.mark.parametrize(
    "args, message",
    [
        (("--fold_dir={t}/nowhere",), "--fold_dir: {t}/nowhere: no such fold directory"),
        (("--fold_dir={t}",), "--fold_dir: {t}/train.txt: missing train file"),
        (("--train_path={t}/c.txt", "--test_path={t}/b.txt"), "--train_path: {t}/c.txt: no such"),
        (("--train_path={t}/a.txt", "--test_path={t}/b.txt"), "--test_path: {t}/b.txt: no such"),
        (("--train_path={t}", "--test_path={t}/b.txt"), "--train_path: {t}: a folder, not a"),
    ],
)
def test_missing_data_names_its_flag_and_path(tmp_path, args, message):
    args = [a.format(t=tmp_path) for a in args]
    (tmp_path / "a.txt").write_text("1 qid:1 1:0.5\n0 qid:1 1:0.25\n")
    done = binaries.call("fpdgd", *args, "--rounds=2", f"--output_dir={tmp_path / 'out'}")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"fpdgd: error: {message.format(t=tmp_path)}"), line
