"""Synthetic LETOR-like datasets: features in correlated groups, a hidden relevance
function with nonlinear and per-query parts, grades skewed like MSLR-WEB10K or MQ2007.

Deterministic in the seed; see :func:`synthetic_dataset` for the construction and
:func:`synthetic_train_test` for a train/test pair sharing one relevance function.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from foltr_jax.data.ranking_dataset import RankingDataset, normalise_per_query

__all__ = ["synthetic_dataset", "synthetic_train_test"]

# Label distributions: MSLR-WEB10K (5 grades: 52/32/13/2/1 %) and MQ2007 (3 grades).
_GRADE_PROPORTIONS = {
    2: (0.75, 0.25),
    3: (0.74, 0.20, 0.06),
    5: (0.52, 0.32, 0.13, 0.02, 0.01),
}

_DOC_LENGTH_SIGMA = 0.9  # lognormal shape of the docs-per-query distribution
_FEATURES_PER_FACTOR = 4  # observed features per latent factor (feature groups)
_OWN_NOISE = (0.03, 0.08)  # range of a feature's own component, relative to its factor
_NUISANCE = 0.5  # norm of a group's nuisance loadings
_COUNT_LIKE = 0.4  # share of skewed, often-zero features
_MISSING = 0.03  # chance a feature is missing (constant) for a whole query
_COARSE_SHARE = 0.02  # share of a group's linear score carried by its common factor
# Weights of the hidden score's parts, each standardised (see synthetic_dataset).
_INTERACTION_WEIGHT = 0.5  # centred products of feature pairs
_BAND_WEIGHT = 0.5  # non-monotone "neither too little nor too much" features
_QUERY_WEIGHT_JITTER = 0.2  # per-query scaling of each group's linear weights
_QUERY_OFFSET = 0.8  # per-query shift of the score (how many relevant documents)
_NOISE_SCALE = 0.3  # label noise


def _grade_proportions(n_grades: int) -> np.ndarray:
    if n_grades in _GRADE_PROPORTIONS:
        return np.asarray(_GRADE_PROPORTIONS[n_grades])
    rest = 0.5 ** np.arange(n_grades - 1)
    return np.concatenate([[0.5], 0.5 * rest / rest.sum()])


@dataclasses.dataclass(frozen=True, eq=False)
class _HiddenModel:
    """The feature structure and relevance function shared by a train/test pair."""

    loadings: np.ndarray  # [F] weight of a feature's relevance factor
    nuisance: np.ndarray  # [F] weight of its group's nuisance factor
    factor_of: np.ndarray  # [F] the factor each feature observes
    own_noise: np.ndarray  # [F] a feature's own noise scale
    count_like: np.ndarray  # [F] bool: exp-transformed, often-zero features
    weights: np.ndarray  # [F] linear weights
    pair_i: np.ndarray  # [P] feature pairs of the interaction term
    pair_j: np.ndarray
    pair_w: np.ndarray  # [P]
    band: np.ndarray  # [Bd] features whose effect peaks inside the range
    band_centre: np.ndarray  # [Bd]
    spread: np.ndarray  # [F] std of a feature's raw value within a query
    centre: np.ndarray  # [F] feature means (train set), the interaction's origin
    stats: np.ndarray  # [3, 2] mean and std of the linear, interaction, band terms
    thresholds: np.ndarray  # [n_grades - 1] score cut points


def _check_positive_int(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or int(value) != value or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_shape(n_features, n_grades, mean_docs_per_query, max_docs_per_query):
    """Checks the generator's size arguments; returns them as ints (max may stay None)."""
    n_features = _check_positive_int("n_features", n_features, 1)
    n_grades = _check_positive_int("n_grades", n_grades, 2)
    if not mean_docs_per_query >= 2:
        raise ValueError(f"mean_docs_per_query must be >= 2, got {mean_docs_per_query!r}")
    if max_docs_per_query is not None:
        max_docs_per_query = _check_positive_int("max_docs_per_query", max_docs_per_query, 2)
    return n_features, n_grades, max_docs_per_query


def _draw_hidden(rng: np.random.Generator, n_features: int, hidden_weights) -> _HiddenModel:
    """Draws feature groups and the relevance function (no statistics yet)."""
    n_factors = max(1, n_features // _FEATURES_PER_FACTOR)
    factor_of = rng.permutation(np.arange(n_features) % n_factors)
    loadings = rng.uniform(0.6, 1.0, n_features)
    own_noise = rng.uniform(*_OWN_NOISE, n_features)
    count_like = rng.random(n_features) < _COUNT_LIKE
    if hidden_weights is None:
        w = rng.normal(size=n_features)
        w[rng.random(n_features) < 0.3] = 0.0  # some features are pure noise
        if not np.any(w):
            w[rng.integers(n_features)] = 1.0
    else:
        w = np.asarray(hidden_weights, dtype=np.float64)
        if w.shape != (n_features,):
            raise ValueError(f"hidden_weights must have shape ({n_features},), got {w.shape}")
        if not np.all(np.isfinite(w)) or not np.any(w):
            raise ValueError("hidden_weights must be finite and not all zero")
    nuisance = rng.normal(size=n_features)
    for g in range(n_factors):
        members = factor_of == g
        nuisance[members] *= _NUISANCE / (np.linalg.norm(nuisance[members]) or 1.0)
    if hidden_weights is None:
        w = _split_weights(rng, w, loadings, nuisance, own_noise, factor_of, n_factors)
    # Nuisance loadings (document length, spam and the like): within each group
    # orthogonal to the weights, so that x @ w cancels the nuisance.
    for g in range(n_factors):
        members = factor_of == g
        wg = w[members]
        if np.any(wg):
            nuisance[members] -= wg * (nuisance[members] @ wg) / (wg @ wg)
        nuisance[members] *= _NUISANCE / (np.linalg.norm(nuisance[members]) or 1.0)
    n_pairs = max(1, n_features // 4)
    n_band = max(1, n_features // 8)
    return _HiddenModel(
        loadings=loadings,
        nuisance=nuisance,
        factor_of=factor_of,
        own_noise=own_noise,
        count_like=count_like,
        weights=w,
        pair_i=rng.integers(n_features, size=n_pairs),
        pair_j=rng.integers(n_features, size=n_pairs),
        pair_w=rng.normal(size=n_pairs),
        band=rng.choice(n_features, size=n_band, replace=False),
        band_centre=rng.uniform(0.3, 0.7, n_band),
        spread=np.sqrt(loadings**2 + nuisance**2 + own_noise**2),
        centre=np.zeros(n_features),
        stats=np.zeros((0, 2)),
        thresholds=np.zeros(0),
    )


def _split_weights(rng, w, loadings, nuisance, own_noise, factor_of, n_factors):
    """Rebuilds each group's weights so that the group's common factor carries only
    ``_COARSE_SHARE`` of its linear score's variance; the rest comes from the features'
    own components (fine differences between views of one quantity), which are small
    and orthogonal, within the group, to the factor and the nuisance loadings."""
    out = np.zeros_like(w)
    for g in range(n_factors):
        members = np.flatnonzero(factor_of == g)
        wg = w[members]
        if not np.any(wg):
            continue
        a, b = loadings[members], nuisance[members]
        b_unit = b / (np.linalg.norm(b) or 1.0)
        a_perp = a - (a @ b_unit) * b_unit  # the factor's direction, nuisance removed
        if np.linalg.norm(a_perp) <= 1e-9:
            out[members] = wg
            continue
        coarse = a_perp / np.linalg.norm(a_perp)
        fine = wg - (wg @ b_unit) * b_unit - (wg @ coarse) * coarse
        fine_var = ((fine * own_noise[members]) ** 2).sum()
        if fine_var <= 1e-12:  # groups of one or two features: keep the drawn weights
            out[members] = wg
            continue
        coarse_var = (coarse @ a) ** 2  # variance of the factor term per unit weight
        scale = np.sqrt(_COARSE_SHARE / (1 - _COARSE_SHARE) * fine_var / coarse_var)
        out[members] = fine + rng.choice([-1.0, 1.0]) * scale * coarse
    return out if np.any(out) else w


def _draw_lengths(rng, n_queries, mean_docs, max_docs) -> np.ndarray:
    sigma = _DOC_LENGTH_SIGMA
    mu = math.log(mean_docs) - 0.5 * sigma**2  # lognormal mean == mean_docs
    lengths = np.rint(rng.lognormal(mu, sigma, size=n_queries)).astype(np.int64)
    lengths = np.maximum(lengths, 2)
    if max_docs is not None:
        lengths = np.minimum(lengths, max_docs)
    return lengths


def _draw_features(rng, lengths: np.ndarray, hidden: _HiddenModel):
    """LETOR-looking features in correlated groups, min-max normalised per query."""
    n_features = hidden.loadings.size
    n_factors = int(hidden.factor_of.max()) + 1
    n_queries = lengths.size
    n_docs = int(lengths.sum())
    offsets = np.cumsum(lengths) - lengths
    q_of_doc = np.repeat(np.arange(n_queries), lengths)
    factors = rng.standard_normal((n_docs, n_factors))
    nuisance = rng.standard_normal((n_docs, n_factors))
    q_mean = rng.normal(size=(n_queries, n_features))
    q_scale = rng.lognormal(0.0, 0.5, size=(n_queries, n_features))
    own = hidden.own_noise * rng.standard_normal((n_docs, n_features))
    raw = q_mean[q_of_doc] + q_scale[q_of_doc] * (
        hidden.loadings * factors[:, hidden.factor_of]
        + hidden.nuisance * nuisance[:, hidden.factor_of]
        + own
    )
    # Count-like features (term frequencies etc.): skewed and often zero.
    count_like = hidden.count_like
    raw[:, count_like] = np.where(
        rng.random((n_docs, int(count_like.sum()))) < 0.3,
        0.0,
        np.exp(raw[:, count_like] / hidden.spread[count_like]),
    )
    missing = rng.random((n_queries, n_features)) < _MISSING
    raw = np.where(missing[q_of_doc], 0.0, raw)
    return normalise_per_query(raw, offsets, lengths), offsets, q_of_doc


def _score_parts(x: np.ndarray, weights: np.ndarray, hidden: _HiddenModel):
    """[3, n_docs]: the linear, interaction and band terms of the hidden score."""
    lin = np.einsum("df,df->d", x, weights) if weights.ndim == 2 else x @ weights
    xc = x - hidden.centre
    inter = (xc[:, hidden.pair_i] * xc[:, hidden.pair_j]) @ hidden.pair_w
    band = -(((x[:, hidden.band] - hidden.band_centre) / 0.2) ** 2).sum(axis=1)
    return np.stack([lin, inter, band])


def _generate(
    rng,
    *,
    n_queries,
    n_features,
    mean_docs,
    max_docs,
    n_grades,
    hidden: _HiddenModel | None,
    hidden_weights,
    name,
    qid_start,
):
    """One synthetic dataset; draws (and returns) the hidden model if not given."""
    fit = hidden is None
    if hidden is None:
        hidden = _draw_hidden(rng, n_features, hidden_weights)
    lengths = _draw_lengths(rng, n_queries, mean_docs, max_docs)
    features, offsets, q_of_doc = _draw_features(rng, lengths, hidden)
    x = features.astype(np.float64)
    # Query-level effects: each query weighs the features a little differently and has
    # its own share of relevant documents.
    # Each query scales each feature group's weights by its own factor, so the groups'
    # structure (nuisance cancelled, factor and own components) holds in every query.
    group_factor = 1.0 + _QUERY_WEIGHT_JITTER * rng.standard_normal(
        (n_queries, int(hidden.factor_of.max()) + 1)
    )
    w_query = hidden.weights * group_factor[:, hidden.factor_of]
    if fit:
        hidden = dataclasses.replace(hidden, centre=x.mean(axis=0))
    parts = _score_parts(x, w_query[q_of_doc], hidden)
    if fit:
        stats = np.stack([parts.mean(axis=1), parts.std(axis=1)], axis=1)
        stats[:, 1] = np.where(stats[:, 1] > 0, stats[:, 1], 1.0)
        hidden = dataclasses.replace(hidden, stats=stats)
    z = (parts - hidden.stats[:, :1]) / hidden.stats[:, 1:]
    score = (
        z[0]
        + _INTERACTION_WEIGHT * z[1]
        + _BAND_WEIGHT * z[2]
        + _QUERY_OFFSET * rng.standard_normal(n_queries)[q_of_doc]
        + _NOISE_SCALE * rng.standard_normal(x.shape[0])
    )
    if fit:
        cum = np.cumsum(_grade_proportions(n_grades))[:-1]
        hidden = dataclasses.replace(hidden, thresholds=np.quantile(score, cum))
    labels = np.searchsorted(hidden.thresholds, score, side="right")
    dataset = RankingDataset(
        features=features,
        labels=labels.astype(np.int32),
        query_offsets=offsets.astype(np.int32),
        query_lengths=lengths.astype(np.int32),
        query_ids=np.asarray([f"q{qid_start + i}" for i in range(n_queries)], dtype=np.str_),
        name=name,
    )
    return dataset, hidden


def synthetic_dataset(
    seed,
    *,
    n_queries: int = 200,
    n_features: int = 32,
    mean_docs_per_query: float = 40,
    max_docs_per_query: int | None = None,
    n_grades: int = 5,
    hidden_weights=None,
    name: str = "synthetic",
) -> RankingDataset:
    """A LETOR-like synthetic dataset, deterministic in ``seed``.

    * Documents per query: lognormal (long tail) with mean
      ``mean_docs_per_query``, at least 2, at most ``max_docs_per_query``.
    * Features, in groups of about 4 (many views of one quantity, as BM25 and TF-IDF
      over several fields in LETOR): raw value = query-specific offset + query-specific
      scale × (loading × the group's common factor + nuisance loading × the group's
      nuisance factor + the feature's own component, 3-8 % of the factor's scale);
      40 % count-like (exponentiated, 30 % zeros), 3 % missing (constant) for a whole
      query; min-max normalised per query, so in ``[0, 1]``.
    * Drawn hidden weights ``w`` (~30 % zeros before the split) are split per group:
      the common factor carries only 2 % of the group's linear score, the rest is in
      the features' small own components (fine differences between views of one
      quantity), orthogonal within the group to the factor and nuisance loadings.
      The mean difference between relevant and other documents, which one FPDGD round
      from zero mostly follows, is dominated by the high-variance common factors, so
      it ranks clearly worse than the best linear model; the low-variance own
      components take a linear ranker many rounds to weigh up.
    * Labels ``0 .. n_grades-1``: a hidden score, the sum of standardised parts:
      the linear term ``x @ w_q`` with ``w_q = w`` scaled per query and group by
      ``1 + 0.2 N(0, 1)`` (queries weigh kinds of evidence differently; ``w`` =
      ``hidden_weights`` or drawn from the seed), 0.5 × a sum of products of centred
      feature pairs ``(x_i - m_i)(x_j - m_j)`` (``m``: train means; no linear part),
      0.5 × a sum of non-monotone "band" terms ``-((x_f - c_f) / 0.2)²`` (a feature
      is best in the middle of its range; a linear ranker can express neither, a
      neural one can), 0.8 × a per-query offset (queries differ in how many relevant
      documents they have; some have none) and 0.3 × Gaussian noise.  The score is
      cut at global quantiles so grades are skewed like MSLR-WEB10K (52/32/13/2/1 %
      for 5 grades)
      or MQ2007 (74/20/6 % for 3 grades).
    """
    n_queries = _check_positive_int("n_queries", n_queries, 1)
    n_features, n_grades, max_docs_per_query = _check_shape(
        n_features, n_grades, mean_docs_per_query, max_docs_per_query
    )
    rng = np.random.default_rng(seed)
    dataset, _ = _generate(
        rng,
        n_queries=n_queries,
        n_features=n_features,
        mean_docs=float(mean_docs_per_query),
        max_docs=max_docs_per_query,
        n_grades=n_grades,
        hidden=None,
        hidden_weights=hidden_weights,
        name=name,
        qid_start=0,
    )
    return dataset


def synthetic_train_test(
    seed=0,
    *,
    n_train_queries: int = 200,
    n_test_queries: int = 100,
    n_features: int = 32,
    mean_docs_per_query: float = 40,
    n_grades: int = 5,
    max_docs_per_query: int | None = None,
) -> tuple[RankingDataset, RankingDataset]:
    """A synthetic train and test set sharing one hidden relevance function.

    The queries (and documents) differ; the feature groups and loadings, hidden
    weights, nonlinear terms, score standardisation and grade thresholds are
    drawn/fitted on the train set and reused for the test set (see
    :func:`synthetic_dataset`).  Query ids do not overlap
    (``q0..`` for train, continuing the numbering for test).
    """
    n_train_queries = _check_positive_int("n_train_queries", n_train_queries, 1)
    n_test_queries = _check_positive_int("n_test_queries", n_test_queries, 1)
    n_features, n_grades, max_docs_per_query = _check_shape(
        n_features, n_grades, mean_docs_per_query, max_docs_per_query
    )
    rng = np.random.default_rng(seed)
    common = dict(
        n_features=n_features,
        mean_docs=float(mean_docs_per_query),
        max_docs=max_docs_per_query,
        n_grades=n_grades,
        hidden_weights=None,
    )
    train, hidden = _generate(
        rng, n_queries=n_train_queries, hidden=None, name="synthetic-train", qid_start=0, **common
    )
    test, _ = _generate(
        rng,
        n_queries=n_test_queries,
        hidden=hidden,
        name="synthetic-test",
        qid_start=n_train_queries,
        **common,
    )
    return train, test
