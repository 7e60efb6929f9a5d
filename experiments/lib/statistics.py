"""Summaries and significance tests over independent runs (numpy + scipy).

The papers report mean ± sample standard deviation over runs and mark differences with a
two-tailed Student t-test, Bonferroni-corrected for the number of comparisons.

Zero variance: when a test's standard error is 0, equal means give t = 0, p = 1 and different
means give t = ±inf, p = 0 (the limit of the formula), instead of NaN.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np
from scipy import stats as scipy_stats


def _sample(values, name: str = "values") -> np.ndarray:
    """A 1-D float array of at least 2 finite values, or ValueError saying what is wrong."""
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be numbers, got {values!r}") from None
    if array.ndim != 1:
        raise ValueError(f"{name} must be a flat list of numbers, got shape {array.shape}")
    if array.size < 2:
        raise ValueError(f"{name} needs at least 2 values (one per run), got {array.size}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contains NaN or infinity: {array.tolist()}")
    return array


def _moments(x: np.ndarray) -> tuple[float, float]:
    """Mean and sample variance; exactly (x₀, 0) for identical values, free of rounding."""
    if np.all(x == x[0]):
        return float(x[0]), 0.0
    return float(x.mean()), float(x.var(ddof=1))


def summarise(values) -> tuple[float, float, int]:
    """(mean, sample standard deviation s = sqrt(Σ(x − x̄)² / (n − 1)), n)."""
    array = _sample(values)
    mean, variance = _moments(array)
    return mean, math.sqrt(variance), int(array.size)


@dataclasses.dataclass(frozen=True)
class TTest:
    """A two-tailed t-test: statistic, degrees of freedom, p-value and mean(a) − mean(b)."""

    t: float
    df: float
    p: float
    mean_difference: float


def _two_tailed(difference: float, standard_error: float, df: float) -> TTest:
    if standard_error == 0:
        t = 0.0 if difference == 0 else math.copysign(math.inf, difference)
        return TTest(t, df, 1.0 if difference == 0 else 0.0, difference)
    t = difference / standard_error
    p = float(2 * scipy_stats.t.sf(abs(t), df))
    return TTest(float(t), float(df), min(p, 1.0), difference)


def t_test(a, b, *, equal_var: bool = True) -> TTest:
    """Two-tailed independent two-sample t-test of mean(a) = mean(b).

    equal_var (Student): s_p² = ((n₁−1)s₁² + (n₂−1)s₂²) / (n₁+n₂−2),
    t = (x̄₁ − x̄₂) / (s_p √(1/n₁ + 1/n₂)), df = n₁ + n₂ − 2.
    Welch (equal_var=False): t = (x̄₁ − x̄₂) / √(s₁²/n₁ + s₂²/n₂), Welch–Satterthwaite
    df = (s₁²/n₁ + s₂²/n₂)² / ((s₁²/n₁)²/(n₁−1) + (s₂²/n₂)²/(n₂−1)); n₁ + n₂ − 2 when both
    variances are 0.
    """
    a, b = _sample(a, "a"), _sample(b, "b")
    n1, n2 = a.size, b.size
    (m1, v1), (m2, v2) = _moments(a), _moments(b)
    difference = m1 - m2
    if equal_var:
        pooled = ((n1 - 1) * v1 + (n2 - 1) * v2) / (n1 + n2 - 2)
        return _two_tailed(difference, math.sqrt(pooled * (1 / n1 + 1 / n2)), n1 + n2 - 2)
    w1, w2 = v1 / n1, v2 / n2
    if w1 + w2 == 0:
        df = n1 + n2 - 2
    else:
        df = (w1 + w2) ** 2 / (w1**2 / (n1 - 1) + w2**2 / (n2 - 1))
    return _two_tailed(difference, math.sqrt(w1 + w2), df)


def paired_t_test(a, b) -> TTest:
    """Two-tailed paired t-test: d = a − b, t = d̄ / (s_d / √n), df = n − 1."""
    a, b = _sample(a, "a"), _sample(b, "b")
    if a.size != b.size:
        raise ValueError(
            f"a paired t-test needs as many values in a as in b, got {a.size} and {b.size}"
        )
    mean, variance = _moments(a - b)
    return _two_tailed(mean, math.sqrt(variance / a.size), a.size - 1)


def bonferroni(p_values, n_comparisons: int | None = None) -> np.ndarray:
    """Bonferroni-adjusted p-values: min(m · p, 1), m = n_comparisons (default: how many p)."""
    try:
        p = np.asarray(p_values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"p-values must be numbers, got {p_values!r}") from None
    if p.ndim != 1:
        raise ValueError(f"p-values must be a flat list, got shape {p.shape}")
    if not np.all((p >= 0) & (p <= 1)):
        raise ValueError(f"p-values must lie in [0, 1], got {p.tolist()}")
    m = p.size if n_comparisons is None else n_comparisons
    if n_comparisons is not None and m < max(p.size, 1):
        raise ValueError(
            f"n_comparisons must be at least the number of p-values ({p.size}) and 1, got {m}"
        )
    return np.minimum(p * m, 1.0)


def bonferroni_significant(
    p_values, alpha: float = 0.05, n_comparisons: int | None = None
) -> np.ndarray:
    """True where the Bonferroni-adjusted p-value is below alpha (i.e. p < alpha / m)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    return bonferroni(p_values, n_comparisons) < alpha


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One method against the baseline: which test, its result, the corrected p-value."""

    test: str  # 'student', 'welch' or 'paired'
    t: float
    df: float
    p: float
    p_adjusted: float
    significant: bool
    mean_difference: float  # mean(method) − mean(baseline)


def _paired_values(baseline, values, label: str):
    """Aligns two samples for a paired test: by run id for mappings, by position otherwise."""
    if isinstance(baseline, Mapping) != isinstance(values, Mapping):
        raise ValueError(f"{label}: give runs as mappings (run id -> value) for both or neither")
    if isinstance(values, Mapping):
        if set(baseline) != set(values):
            missing = sorted(map(str, set(baseline) ^ set(values)))
            raise ValueError(f"{label}: runs are not paired, run ids {missing} are on one side")
        keys = list(baseline)
        return [baseline[k] for k in keys], [values[k] for k in keys]
    if len(baseline) != len(values):
        raise ValueError(
            f"{label}: a paired test needs as many runs as the baseline, "
            f"got {len(values)} and {len(baseline)}"
        )
    return baseline, values


def compare_to_baseline(
    baseline: Sequence[float] | Mapping,
    methods: Mapping[str, Sequence[float] | Mapping],
    *,
    paired: bool = False,
    equal_var: bool = True,
    alpha: float = 0.05,
    n_comparisons: int | None = None,
) -> dict[str, Comparison]:
    """Tests each method against the baseline, Bonferroni-corrected over the comparisons.

    Runs are lists, or mappings run id -> value (e.g. (seed, repetition)). With paired=True the
    runs are paired by run id (mappings) or by position (lists) and a paired t-test is used;
    otherwise an independent t-test (Student, or Welch with equal_var=False). The correction
    counts len(methods) comparisons unless n_comparisons says more (e.g. a whole table's).
    """
    if not methods:
        raise ValueError("compare_to_baseline needs at least one method to compare")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    tests, kinds = {}, {}
    for label, values in methods.items():
        if paired:
            base, other = _paired_values(baseline, values, label)
            tests[label], kinds[label] = paired_t_test(other, base), "paired"
        else:
            base = list(baseline.values()) if isinstance(baseline, Mapping) else baseline
            other = list(values.values()) if isinstance(values, Mapping) else values
            tests[label] = t_test(other, base, equal_var=equal_var)
            kinds[label] = "student" if equal_var else "welch"
    labels = list(tests)
    p_values = [tests[label].p for label in labels]
    adjusted = bonferroni(p_values, n_comparisons)
    return {
        label: Comparison(
            test=kinds[label],
            t=tests[label].t,
            df=tests[label].df,
            p=tests[label].p,
            p_adjusted=float(adjusted[i]),
            significant=bool(adjusted[i] < alpha),
            mean_difference=tests[label].mean_difference,
        )
        for i, label in enumerate(labels)
    }
