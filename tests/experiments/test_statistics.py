"""experiments.lib.statistics against textbook values worked out independently of scipy."""

import math

import numpy as np
import pytest

from experiments.lib import statistics

# Student's sleep data (Cushny & Peebles 1905, as in Student 1908 and R's `sleep`): extra hours of
# sleep of the same 10 patients under two drugs. R's t.test gives, for group 1 − group 2:
#   var.equal=TRUE:  t = -1.8608, df = 18,     p = 0.07919
#   Welch:           t = -1.8608, df = 17.776, p = 0.07939
#   paired=TRUE:     t = -4.0621, df = 9,      p = 0.002833
DRUG_1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]
DRUG_2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]


def student_t_two_tailed_p(t, df):
    """2·P(T > |t|) by integrating Student's t density with numpy (no scipy)."""
    x = np.linspace(0.0, abs(t), 200_001)
    c = math.gamma((df + 1) / 2) / (math.sqrt(df * math.pi) * math.gamma(df / 2))
    density = c * (1 + x**2 / df) ** (-(df + 1) / 2)
    area = float(np.sum((density[1:] + density[:-1]) / 2 * np.diff(x)))
    return 1 - 2 * area


def by_hand():
    """The textbook formulas with numpy only."""
    a, b = np.array(DRUG_1), np.array(DRUG_2)
    n = len(a)
    va, vb = a.var(ddof=1), b.var(ddof=1)
    pooled = ((n - 1) * va + (n - 1) * vb) / (2 * n - 2)
    student_t = (a.mean() - b.mean()) / math.sqrt(pooled * 2 / n)
    welch_df = (va / n + vb / n) ** 2 / ((va / n) ** 2 / (n - 1) + (vb / n) ** 2 / (n - 1))
    d = a - b
    paired_t = d.mean() / (d.std(ddof=1) / math.sqrt(n))
    return student_t, welch_df, paired_t


def test_hand_computation_matches_the_published_values():
    student_t, welch_df, paired_t = by_hand()
    assert student_t == pytest.approx(-1.8608, abs=1e-4)
    assert welch_df == pytest.approx(17.776, abs=1e-3)
    assert paired_t == pytest.approx(-4.0621, abs=1e-4)
    assert student_t_two_tailed_p(student_t, 18) == pytest.approx(0.07919, abs=1e-5)
    assert student_t_two_tailed_p(student_t, welch_df) == pytest.approx(0.07939, abs=1e-5)
    assert student_t_two_tailed_p(paired_t, 9) == pytest.approx(0.002833, abs=1e-6)


def test_student_t_test_on_the_sleep_data():
    student_t, _, _ = by_hand()
    result = statistics.t_test(DRUG_1, DRUG_2)
    assert result.t == pytest.approx(student_t, rel=1e-12)
    assert result.df == 18
    assert result.p == pytest.approx(student_t_two_tailed_p(student_t, 18), abs=1e-8)
    assert result.p == pytest.approx(0.07919, abs=1e-5)
    assert result.mean_difference == pytest.approx(0.75 - 2.33)
    # swapping the samples flips the sign only
    swapped = statistics.t_test(DRUG_2, DRUG_1)
    assert swapped.t == pytest.approx(-result.t) and swapped.p == pytest.approx(result.p)


def test_welch_t_test_on_the_sleep_data():
    student_t, welch_df, _ = by_hand()
    result = statistics.t_test(DRUG_1, DRUG_2, equal_var=False)
    assert result.t == pytest.approx(student_t, rel=1e-12)  # equal n: same t as Student's
    assert result.df == pytest.approx(welch_df, rel=1e-12)
    assert result.p == pytest.approx(0.07939, abs=1e-5)


def test_paired_t_test_on_the_sleep_data_and_paired_differs_from_unpaired():
    _, _, paired_t = by_hand()
    paired = statistics.paired_t_test(DRUG_1, DRUG_2)
    assert paired.t == pytest.approx(paired_t, rel=1e-12)
    assert paired.df == 9
    assert paired.p == pytest.approx(0.002833, abs=1e-6)
    # the two drugs' effects are strongly correlated across patients: pairing removes the
    # between-patient variance, so only the paired test finds the difference at α = 0.05
    assert np.corrcoef(DRUG_1, DRUG_2)[0, 1] > 0.7
    unpaired = statistics.t_test(DRUG_1, DRUG_2)
    assert paired.p < 0.05 < unpaired.p


def test_summarise_is_mean_and_sample_sd():
    mean, sd, n = statistics.summarise([2, 4, 4, 4, 5, 5, 7, 9])
    assert (mean, n) == (5.0, 8)
    assert sd == pytest.approx(math.sqrt(32 / 7))  # Σ(x − 5)² = 32, n − 1 = 7
    assert statistics.summarise(np.array([3.0, 3.0, 3.0])) == (3.0, 0.0, 3)


def test_zero_variance():
    same = statistics.t_test([0.5, 0.5, 0.5], [0.5, 0.5, 0.5])
    assert (same.t, same.p) == (0.0, 1.0)
    lower = statistics.t_test([0.4, 0.4, 0.4], [0.5, 0.5, 0.5])
    assert lower.t == -math.inf and lower.p == 0.0 and lower.df == 4
    welch = statistics.t_test([1.0, 1.0], [2.0, 2.0, 2.0], equal_var=False)
    assert welch.t == -math.inf and welch.p == 0.0 and welch.df == 3
    # one constant sample is fine: the other's variance carries the test
    one_sided = statistics.t_test([1.0, 1.0, 1.0], [0.0, 1.0, 2.0])
    assert one_sided.t == 0.0 and one_sided.p == pytest.approx(1.0)
    # a constant difference between paired runs is certain; no difference at all is not
    assert statistics.paired_t_test([1.0, 2.0, 4.0], [0.0, 1.0, 3.0]).p == 0.0
    assert statistics.paired_t_test([1.0, 2.0, 4.0], [1.0, 2.0, 4.0]).p == 1.0


def test_bonferroni_known_numbers():
    p = [0.01, 0.02, 0.04, 0.5]
    np.testing.assert_allclose(statistics.bonferroni(p), [0.04, 0.08, 0.16, 1.0])
    np.testing.assert_allclose(statistics.bonferroni(p, n_comparisons=10), [0.1, 0.2, 0.4, 1.0])
    assert statistics.bonferroni(p, 4).max() == 1.0  # 2.0 clipped
    assert statistics.bonferroni_significant(p).tolist() == [True, False, False, False]
    assert statistics.bonferroni_significant(p, alpha=0.1).tolist() == [True, True, False, False]
    assert statistics.bonferroni([]).size == 0


def test_compare_to_baseline():
    baseline = [0.50, 0.52, 0.51, 0.49]
    methods = {"better": [0.60, 0.61, 0.62, 0.59], "same": [0.50, 0.53, 0.50, 0.49]}
    result = statistics.compare_to_baseline(baseline, methods)
    for label, values in methods.items():
        expected = statistics.t_test(values, baseline)
        assert result[label].test == "student"
        assert result[label].p == pytest.approx(expected.p)
        assert result[label].p_adjusted == pytest.approx(min(2 * expected.p, 1.0))
        assert result[label].mean_difference == pytest.approx(np.mean(values) - np.mean(baseline))
    assert result["better"].significant and not result["same"].significant
    assert result["better"].t > 0
    table_wide = statistics.compare_to_baseline(baseline, methods, n_comparisons=6)
    assert table_wide["better"].p_adjusted == pytest.approx(6 * result["better"].p)


def test_compare_to_baseline_pairs_runs_by_seed():
    baseline = {(0, 0): 0.1, (0, 1): 0.5, (0, 2): 0.9}
    shifted = {(0, 2): 0.95, (0, 0): 0.16, (0, 1): 0.54}  # +0.05 ± 0.01, another order
    paired = statistics.compare_to_baseline(baseline, {"shifted": shifted}, paired=True)
    expected = statistics.paired_t_test([0.16, 0.54, 0.95], [0.1, 0.5, 0.9])
    assert paired["shifted"].test == "paired"
    assert paired["shifted"].p == pytest.approx(expected.p) and paired["shifted"].significant
    unpaired = statistics.compare_to_baseline(baseline, {"shifted": shifted})
    assert unpaired["shifted"].p > 0.5 and not unpaired["shifted"].significant
    welch = statistics.compare_to_baseline(baseline, {"shifted": shifted}, equal_var=False)
    assert welch["shifted"].test == "welch"
    with pytest.raises(ValueError, match=r"not paired.*\(1, 0\)"):
        statistics.compare_to_baseline(
            baseline, {"x": {(0, 0): 1, (0, 1): 2, (1, 0): 3}}, paired=True
        )


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: statistics.summarise([0.5]), "at least 2 values"),
        (lambda: statistics.summarise([]), "at least 2 values"),
        (lambda: statistics.summarise([[1, 2], [3, 4]]), "flat list"),
        (lambda: statistics.summarise([1.0, float("nan")]), "NaN"),
        (lambda: statistics.summarise(["a", "b"]), "must be numbers"),
        (lambda: statistics.t_test([1.0], [1.0, 2.0]), "a needs at least 2 values"),
        (lambda: statistics.t_test([1.0, 2.0], [1.0]), "b needs at least 2 values"),
        (lambda: statistics.paired_t_test([1, 2, 3], [1, 2]), "as many values in a as in b"),
        (lambda: statistics.bonferroni([0.5, 1.5]), r"in \[0, 1\]"),
        (lambda: statistics.bonferroni([0.1, 0.2], n_comparisons=1), "at least the number"),
        (lambda: statistics.bonferroni_significant([0.1], alpha=5), "alpha"),
        (lambda: statistics.compare_to_baseline([1, 2], {}), "at least one method"),
        (
            lambda: statistics.compare_to_baseline([1, 2, 3], {"m": [1, 2]}, paired=True),
            "m: a paired test needs as many runs",
        ),
        (
            lambda: statistics.compare_to_baseline([1, 2], {"m": {0: 1, 1: 2}}, paired=True),
            "both or neither",
        ),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(call, message):
    with pytest.raises(ValueError, match=message):
        call()
