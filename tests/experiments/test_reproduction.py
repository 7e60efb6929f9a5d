"""The papers' orderings on the MSLR sample, read from a report's aggregated numbers.

Small versions of two experiments run through their binaries into one results
folder; foltr_jax.report aggregates them as it does for the figures, and the test
checks the orderings on summary.json (never on pixels):

* data poisoning by 4 of 10 clients below the honest federation (poisoning paper
  Figure 2, informational clicks);
* the unlearned model above the model with the malicious client (unlearning
  paper Figure 3).

FPDGD above FOLtR-ES is the claims' reduced set's to check (fpdgd_table2, all three
click models and privacy levels, tests/experiments/test_claims.py), so it is not run twice here.
"""

import json

import pytest

pytestmark = pytest.mark.slow  # ~2 min: pytest -m slow tests/experiments/test_reproduction.py
from experiments.lib import figures as report
from tests.binaries import run
from tests.sample_data import SAMPLE_DIR, needs_sample


@pytest.fixture(scope="module")
def summary(tmp_path_factory):
    root = tmp_path_factory.mktemp("reproduction")
    data = [f"--train_path={SAMPLE_DIR / 'train.txt'}", f"--test_path={SAMPLE_DIR / 'test.txt'}"]
    jobs = {
        "poisoning": [
            "--rounds=150",
            "--grid=paper",
            "--malicious_counts=4",
            "--click_models=informational",
            "--chunk_rounds=100",
        ],
        "unlearning": [
            "--rounds=300",
            "--click_models=informational",
            "--delta_t=10",
            "--unlearn_local_updates=3",
            "--chunk_rounds=100",
        ],
    }
    for binary, flags in jobs.items():
        done = run(
            binary,
            *data,
            *flags,
            "--n_runs=3",
            f"--output_dir={root / binary}",
            cache_dir=root / "cache",
        )
        assert done.returncode == 0, done.stderr
    return report.build_report(root, root / "report")


def _final(summary, group_word, label, panel):
    (group,) = [g for name, g in summary["groups"].items() if group_word in name]
    return group["rows"][label][panel]["final_offline_ndcg"]["mean"]


@needs_sample
def test_data_poisoning_stays_below_the_honest_federation(summary):
    (group,) = [g for name, g in summary["groups"].items() if "poisoning" in name]
    finals = {
        label: row["informational"]["final_offline_ndcg"]["mean"]
        for label, row in group["rows"].items()
    }
    honest = [v for k, v in finals.items() if "attack=none" in k and "fedavg" in k]
    poisoned = [v for k, v in finals.items() if "data_poisoning" in k and "fedavg" in k]
    assert len(honest) == 1 and len(poisoned) == 1, finals
    assert poisoned[0] < honest[0] - 0.05


@needs_sample
def test_unlearning_recovers_above_the_malicious_federation(summary):
    unlearned = _final(summary, "unlearning", "U(9H-1M), n′=3, Δt=10", "informational")
    malicious = _final(summary, "unlearning", "9H-1M", "informational")
    retrained = _final(summary, "unlearning", "9H-0M", "informational")
    assert malicious < retrained - 0.03
    assert unlearned > malicious + 0.5 * (retrained - malicious)
    assert json.dumps(summary)  # the summary is plain JSON
