"""Help a person can read: --help groups the flags by concern and lists what a --plugin
registers; a misspelt choice gets the nearest name; the MSLR excerpt has a name
(--data=mslr_sample); the poisoning grid runs a chosen set of rules and attacks."""

import pytest
from absl import flags

from foltr_jax.core.registry import did_you_mean, one_of
from tests import binaries
from tests.sample_data import needs_sample

PLUGIN = """
import jax.numpy as jnp
import foltr_jax
from foltr_jax.server import attacks

@foltr_jax.aggregators.register("usage_closest_half", "mean of the half nearest the median")
def closest_half(models, weights, n_malicious):
    distance = jnp.linalg.norm(models - jnp.median(models, axis=0), axis=1)
    return foltr_jax.aggregators.fedavg(models, weights * (distance <= jnp.median(distance)))

def flip(key, models, global_model, n_malicious):
    malicious = (jnp.arange(models.shape[0]) < n_malicious)[:, None]
    return jnp.where(malicious, 2 * global_model - models, models)

attacks.register("usage_sign_flip", "the malicious clients reverse their update", flip)
"""


def _help(module_name, *args, capsys):
    from experiments.lib import program

    module = binaries.load(module_name)
    with pytest.raises(SystemExit) as ended:
        program.print_help(module_name, [module_name, "--help", *args], module)
    assert ended.value.code == 0
    return capsys.readouterr().out


def test_help_groups_the_flags_by_concern_and_lists_a_plugins_names(tmp_path, capsys):
    plugin = tmp_path / "my_rules.py"
    plugin.write_text(PLUGIN)
    text = _help("fpdgd", f"--plugin={plugin}", capsys=capsys)
    assert f"Registered by --plugin={plugin}" in text
    assert "  aggregator usage_closest_half: mean of the half nearest the median" in text
    assert "  attack usage_sign_flip: the malicious clients reverse their update" in text
    headings = [line.split(":")[0] for line in text.splitlines() if line and line[0] != " "]
    groups = headings[headings.index("Flags by concern (--helpfull") + 1 :]
    assert groups == [  # fpdgd's own flags (--output_dir, --privacy_grid, ...) have concerns too
        "Data", "Clicks and rankers", "Federation", "Privacy", "Attacks", "Defences",
        "Output", "Your code", "Scale and speed",
    ]  # fmt: skip
    sections = text.split("\nDefences: ")[1].split("\nOutput: ")[0]
    assert "--aggregator:" in sections and "--[no]krum_squared_distances:" in sections
    assert "--epsilon:" in text.split("\nPrivacy: ")[1].split("\nAttacks: ")[0]


def test_every_shared_flag_has_a_concern():
    """A flag every binary shares (the shared definers') is never in a binary's own group:
    a new one is given its concern in experiments/lib/usage.py."""
    from experiments.lib import usage

    binaries.load("fpdgd")
    by_module = flags.FLAGS.flags_by_module_dict()
    shared = {f.name for m in binaries.SHARED_DEFINERS for f in by_module.get(m, [])}
    assert shared >= {"aggregator", "epsilon", "fold_dir", "data", "n_devices", "plugin"}
    assert {name for name in shared if usage.concern(name) == usage.OWN} == set()


def test_asked_reads_the_spellings_absl_reads():
    from experiments.lib import usage

    for argv in (["x", "--help"], ["x", "-?"], ["x", "--rounds=3", "-helpshort"]):
        assert usage.asked(argv), argv
    for argv in (["x"], ["x", "--help=false"], ["x", "--", "--help"], ["x", "--helpfull"]):
        assert not usage.asked(argv), argv


def test_a_misspelt_choice_gets_the_nearest_name():
    assert did_you_mean("krumm", ("fedavg", "krum", "multi_krum")) == " (did you mean 'krum'?)"
    assert did_you_mean("MAP", ("auto", "map", "vmap")) == " (did you mean 'map'?)"
    assert did_you_mean("zzz", ("fedavg", "krum")) == ""
    assert one_of(("a", "b"), 3) == "must be one of ('a', 'b'), got 3"


@pytest.mark.parametrize(
    "module, argument, line",
    [
        ("fpdgd", "--aggregator=krumm",
         ("fpdgd: error: --aggregator: must be one of ('fedavg', "
          "'krum', 'multi_krum', 'trimmed_mean', 'median'")),
        ("fpdgd", "--click_model=perfct",
         ("fpdgd: error: --click_model: unknown click model "
          "'perfct' (did you mean 'perfect'?); choose one of")),
        ("fpdgd", "--attack=lei", "fpdgd: error: --attack: must be one of"),
        ("fpdgd", "--data=mslr_smaple",
         ("fpdgd: error: --data: must be one of ('synthetic', "
          "'mslr_sample'), got 'mslr_smaple' (did you mean 'mslr_sample'?)")),
        ("poisoning", "--aggregators=krum,trimed_mean",
         ("poisoning: error: --aggregators: must "
          "be one of ('fedavg', 'krum', 'multi_krum', 'trimmed_mean', 'median'")),
        ("poisoning", "--attacks=none,lei", "poisoning: error: --attacks: must be one of"),
    ],
)  # fmt: skip
def test_a_bad_choice_is_one_line_with_a_suggestion(tmp_path, module, argument, line):
    done = binaries.call(module, argument, f"--output_dir={tmp_path / 'out'}")
    assert done.returncode == 2
    (found,) = done.stderr.strip().splitlines()
    assert found.startswith(line), found
    wrong = argument.split("=")[1].split(",")[-1]  # the plugin's names may follow the built-in
    meant = {"krumm": "krum", "perfct": "perfect", "lei": "lie", "mslr_smaple": "mslr_sample",
             "trimed_mean": "trimmed_mean"}[wrong]  # fmt: skip
    assert f"'{wrong}' (did you mean '{meant}'?)" in found, found


def test_the_poisoning_grid_runs_a_chosen_set_of_rules_and_attacks():
    poisoning = binaries.load("poisoning")
    paper = poisoning.grid_settings("paper", ["perfect"], [1, 2])
    assert len(paper) == 1 + 2 * 18  # the paper's grid: its 219 cells are 3 × (1 + 4 × 18)
    chosen = poisoning.grid_settings("paper", ["perfect"], [1], ["fedavg", "krum"], [])
    assert [(s.attack, s.aggregator) for s in chosen] == [
        ("none", "fedavg"), ("none", "krum"), ("data_poisoning", "fedavg"),
        ("data_poisoning", "krum"), ("lie", "fedavg"), ("fang_krum_full", "krum"),
        ("fang_krum_partial", "krum"),
    ]  # fmt: skip
    full = poisoning.grid_settings("full", ["perfect"], [2], ["krum", "mine"], ["none", "lie"])
    assert [(s.attack, s.aggregator, s.n_malicious) for s in full] == [
        ("none", "fedavg", 0), ("none", "krum", 2), ("none", "mine", 2), ("lie", "krum", 2),
        ("lie", "mine", 2),
    ]  # fmt: skip


@needs_sample
def test_the_mslr_excerpt_has_a_name(monkeypatch):
    from experiments.lib import shared_flags

    binaries.load("fpdgd")
    flags.FLAGS.unparse_flags()
    flags.FLAGS(["fpdgd", "--data=mslr_sample"])
    try:
        train, test, source = shared_flags.load_datasets()
    finally:
        flags.FLAGS.unparse_flags()
    assert source["name"] == "mslr_sample"
    assert source["train_path"].endswith("mslr_sample/train.txt")
    assert (train.n_queries, test.n_queries, train.n_features) == (43, 43, 136)


def test_data_named_twice_is_one_line(tmp_path):
    done = binaries.call("fpdgd", "--data=mslr_sample", f"--fold_dir={tmp_path}",
                         f"--output_dir={tmp_path / 'out'}")  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "fpdgd: error: --data=mslr_sample: given with --fold_dir/--train_path/--test_path; "
        "name the data once"
    )


@pytest.mark.slow  # a binary's own process: --help is acted on while absl parses the flags
def test_help_in_a_process_lists_the_plugins_names_and_exits_0(tmp_path):
    plugin = tmp_path / "my_rules.py"
    plugin.write_text(PLUGIN)
    done = binaries.run("poisoning", "--help", f"--plugin={plugin}")
    assert done.returncode == 0, done.stderr
    assert "aggregator usage_closest_half: mean of the half nearest the median" in done.stdout
    own = done.stdout.split("\nIts own: what this binary alone takes\n")[1].split("\n\n")[0]
    assert "--grid:" in own and "--malicious_counts:" not in own  # that one is the attacks'
    defences = done.stdout.split("\nDefences: ")[1].split("\n\n")[0]
    assert "--aggregators: The aggregation rules (defences) of the grid" in defences
