r"""A plain, slow NumPy reference implementation of FPDGD.

This module is deliberately independent of the JAX simulator: apart from
``foltr_jax.data`` (for reading LETOR files) it imports nothing from
``foltr_jax``.  It is written for obviousness, not speed, and is meant to
produce learning curves that the fast simulator's curves can be compared
against.

Semantics (those of the published FPDGD implementation):

* linear ranker ``f(x) = x . w``; initial weights a random unit vector times
  0.01 (``init='random_small'``) or zeros (``init='zero'``);
* neural ranker (``ranker='neural'``) ``f(x) = sigmoid(x W1 + b1) . w2`` with
  64 hidden units: W1, b1 and w2 drawn from N(0, (1/fan_in)^2), b1 with W1's
  fan-in (the public code's PDGDNeuralRanker); its gradient is written out by hand;
* every round each of ``n_clients`` clients starts from the global weights and
  performs ``local_updates`` interactions; each interaction picks a training
  query uniformly at random, samples a Plackett-Luce ranking of
  ``k = min(10, n_docs)`` documents, simulates cascade (CCM/SDBN) clicks and,
  if anything was clicked, applies one PDGD step ``w += lr * gradient``;
* the server averages the client weights (FedAvg weighted by the number of
  local interactions, which is the same for every client);
* offline nDCG@10 of the global model on the test set is recorded before every
  server update (``offline_ndcg_before``, the published alignment) and after
  it (``offline_ndcg_after``); online nDCG@10 is the mean over all displayed
  lists of the round.

Usage:

  python -m tests.methods.fpdgd.reference_fpdgd \
      --train_path=../shared/data/mslr_sample/train.txt \
      --test_path=../shared/data/mslr_sample/test.txt \
      --n_clients=10 --local_updates=5 --rounds=100 --click_model=perfect \
      --n_runs=20 --seed=0 --output=/tmp/reference_perfect.json   # --ranker=neural
"""

from __future__ import annotations

import dataclasses
import json
import math
import multiprocessing
import os
import time

import numpy as np
from absl import app, flags

from foltr_jax.data import RankingDataset, read_letor

RANKING_LENGTH = 10  # k: documents displayed per interaction, and the nDCG cutoff

# P(click | label) and P(stop | click, label) for 5-grade labels (0..4).
CLICK_MODELS = {
    "perfect": {
        "click": (0.0, 0.2, 0.4, 0.8, 1.0),
        "stop": (0.0, 0.0, 0.0, 0.0, 0.0),
    },
    "navigational": {
        "click": (0.05, 0.3, 0.5, 0.7, 0.95),
        "stop": (0.2, 0.3, 0.5, 0.7, 0.9),
    },
    "informational": {
        "click": (0.4, 0.6, 0.7, 0.8, 0.9),
        "stop": (0.1, 0.2, 0.3, 0.4, 0.5),
    },
}


# --------------------------------------------------------------------------
# Ranking, clicks, PDGD
# --------------------------------------------------------------------------


def sample_ranking(scores: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Plackett-Luce sample of ``k`` documents without replacement.

    At every position the next document is drawn from softmax(scores) over the
    documents not yet placed.
    """
    scores = np.asarray(scores, dtype=np.float64)
    remaining = np.ones(scores.shape[0], dtype=bool)
    ranking = np.empty(k, dtype=np.int64)
    for i in range(k):
        candidates = np.flatnonzero(remaining)
        logits = scores[candidates]
        p = np.exp(logits - logits.max())
        p /= p.sum()
        choice = candidates[rng.choice(candidates.shape[0], p=p)]
        ranking[i] = choice
        remaining[choice] = False
    return ranking


def simulate_clicks(
    labels_displayed: np.ndarray, click_model: str, rng: np.random.Generator
) -> np.ndarray:
    """Cascade click model: scan top-down, click w.p. P(click|label), then stop w.p. P(stop|label)."""
    table = CLICK_MODELS[click_model]
    clicks = np.zeros(labels_displayed.shape[0], dtype=bool)
    for i, label in enumerate(labels_displayed):
        label = int(label)
        if label >= len(table["click"]):
            raise ValueError(f"label {label} has no entry in click model {click_model!r}")
        if rng.random() < table["click"][label]:
            clicks[i] = True
            if rng.random() < table["stop"][label]:
                break
    return clicks


def plackett_luce_log_prob(scores: np.ndarray, ranking: np.ndarray) -> float:
    """log P(ranking) of a displayed prefix under Plackett-Luce, float64, by the definition.

    The denominator at position i sums exp(score) over *all* documents of the
    query that are not placed at positions < i (documents never displayed
    included).  Scores are shifted by their maximum for stability; the shift
    cancels in every factor.
    """
    scores = np.asarray(scores, dtype=np.float64)
    ranking = np.asarray(ranking, dtype=np.int64)
    n, k = scores.shape[0], ranking.shape[0]
    e = np.exp(scores - scores.max())
    # not_placed[i, d]: document d is not at any position < i.
    not_placed = np.ones((k, n), dtype=bool)
    for i in range(1, k):
        not_placed[i] = not_placed[i - 1]
        not_placed[i, ranking[i - 1]] = False
    denominators = (not_placed * e[None, :]).sum(axis=1)
    return float(np.sum(np.log(e[ranking]) - np.log(denominators)))


def plackett_luce_prob(scores: np.ndarray, ranking: np.ndarray) -> float:
    """P(ranking) of a displayed prefix (exp of :func:`plackett_luce_log_prob`)."""
    return math.exp(plackett_luce_log_prob(scores, ranking))


def debias_weight(scores: np.ndarray, ranking: np.ndarray, pos_i: int, neg_i: int) -> float:
    """rho = P(R*) / (P(R) + P(R*)) with R* = R with positions pos_i and neg_i swapped.

    Evaluated as 1 / (1 + P(R)/P(R*)) with the ratio taken in log space, which is
    the same number but cannot produce 0/0 when both probabilities underflow.
    """
    swapped = np.array(ranking, dtype=np.int64, copy=True)
    swapped[pos_i], swapped[neg_i] = swapped[neg_i], swapped[pos_i]
    log_p = plackett_luce_log_prob(scores, ranking)
    log_p_swapped = plackett_luce_log_prob(scores, swapped)
    return 1.0 / (1.0 + math.exp(log_p - log_p_swapped))


def pair_weight(s_pos: float, s_neg: float) -> float:
    """e^{s_p} e^{s_n} / (e^{s_p} + e^{s_n})^2, with a max-shift (it is shift invariant)."""
    m = max(s_pos, s_neg)
    a, b = math.exp(s_pos - m), math.exp(s_neg - m)
    return a * b / (a + b) ** 2


def pdgd_gradient(
    features: np.ndarray, scores: np.ndarray, ranking: np.ndarray, clicks: np.ndarray
) -> np.ndarray:
    """The PDGD gradient of one interaction (zero vector without clicks).

    features: [n_docs, F] of the query, or generally the rows ∇f(d) of every
    document (a linear ranker's are its features); scores: [n_docs]; ranking:
    [k] doc indices, top first; clicks: bool [k] per displayed position.
    """
    features = np.asarray(features, dtype=np.float64)
    scores = np.asarray(scores, dtype=np.float64)
    gradient = np.zeros(features.shape[1], dtype=np.float64)
    clicks = np.asarray(clicks, dtype=bool)
    if not clicks.any():
        return gradient
    k = ranking.shape[0]
    last = int(np.flatnonzero(clicks).max())
    positives = [i for i in range(k) if clicks[i]]
    negatives = [i for i in range(k) if not clicks[i] and i <= last + 1]
    for p in positives:
        for q in negatives:
            d_pos, d_neg = ranking[p], ranking[q]
            weight = debias_weight(scores, ranking, p, q) * pair_weight(
                scores[d_pos], scores[d_neg]
            )
            gradient += weight * (features[d_pos] - features[d_neg])
    return gradient


# --------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------


def dcg(labels_in_order: np.ndarray, cutoff: int = RANKING_LENGTH) -> float:
    labels = np.asarray(labels_in_order, dtype=np.float64)[:cutoff]
    gains = 2.0**labels - 1.0
    discounts = 1.0 / np.log2(np.arange(labels.shape[0]) + 2.0)  # rank r (1-based): 1/log2(r+1)
    return float(np.sum(gains * discounts))


def ideal_dcg(query_labels: np.ndarray, cutoff: int = RANKING_LENGTH) -> float:
    return dcg(np.sort(np.asarray(query_labels))[::-1], cutoff)


def ndcg_of_list(displayed_labels: np.ndarray, query_labels: np.ndarray) -> float:
    """nDCG@10 of a displayed list; 0 when the query has no relevant document."""
    ideal = ideal_dcg(query_labels)
    if ideal <= 0.0:
        return 0.0
    return dcg(displayed_labels) / ideal


def offline_ndcg(weights: np.ndarray, dataset: RankingDataset, ranker=None) -> float:
    """Mean nDCG@10 of the deterministic ranking by descending score.

    Ties are broken by document order in the file (stable sort).  Queries
    without any relevant document are left out of the mean.  ``ranker``
    (default: linear) scores the documents with the parameters ``weights``.
    """
    ranker = ranker or Linear(dataset.n_features)
    values = []
    w = np.asarray(weights, dtype=np.float64)
    for q in range(dataset.n_queries):
        start = int(dataset.query_offsets[q])
        stop = start + int(dataset.query_lengths[q])
        labels = dataset.labels[start:stop]
        if not (labels > 0).any():
            continue
        scores = ranker.scores(w, dataset.features[start:stop].astype(np.float64))
        order = np.argsort(-scores, kind="stable")
        values.append(dcg(labels[order]) / ideal_dcg(labels))
    return float(np.mean(values)) if values else 0.0


# --------------------------------------------------------------------------
# Rankers: scores and per-document gradients of a flat parameter vector
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Linear:
    """f(x) = x . w."""

    n_features: int

    def scores(self, theta: np.ndarray, features: np.ndarray) -> np.ndarray:
        return features @ theta

    def doc_gradients(self, theta: np.ndarray, features: np.ndarray) -> np.ndarray:
        return features


@dataclasses.dataclass(frozen=True)
class Neural:
    """f(x) = sigmoid(x W1 + b1) . w2; theta = (W1 row-major, b1, w2) flattened."""

    n_features: int
    hidden_units: int = 64

    def split(self, theta: np.ndarray):
        f, h = self.n_features, self.hidden_units
        return theta[: f * h].reshape(f, h), theta[f * h : f * h + h], theta[f * h + h :]

    def join(self, w1, b1, w2) -> np.ndarray:
        return np.concatenate([np.ravel(w1), np.ravel(b1), np.ravel(w2)]).astype(np.float64)

    def init(self, rng: np.random.Generator) -> np.ndarray:
        f, h = self.n_features, self.hidden_units
        w1 = rng.standard_normal((f, h)) / f
        b1 = rng.standard_normal(h) / f  # public code: the hidden biases like W1
        return self.join(w1, b1, rng.standard_normal(h) / h)

    def hidden(self, theta, features):
        w1, b1, _ = self.split(theta)
        return 1.0 / (1.0 + np.exp(-(features @ w1 + b1)))

    def scores(self, theta: np.ndarray, features: np.ndarray) -> np.ndarray:
        return self.hidden(theta, features) @ self.split(theta)[2]

    def doc_gradients(self, theta: np.ndarray, features: np.ndarray) -> np.ndarray:
        """Row d: ∂f(d)/∂theta by the chain rule (∂f/∂b1_j = w2_j h_j (1 - h_j))."""
        h = self.hidden(theta, features)
        d_b1 = self.split(theta)[2] * h * (1.0 - h)  # [n, H]
        d_w1 = features[:, :, None] * d_b1[:, None, :]  # [n, F, H]
        return np.concatenate([d_w1.reshape(len(features), -1), d_b1, h], axis=1)


def make_ranker(name: str, n_features: int, hidden_units: int = 64):
    if name == "linear":
        return Linear(n_features)
    if name == "neural":
        return Neural(n_features, hidden_units)
    raise ValueError(f"unknown ranker {name!r}; expected 'linear' or 'neural'")


# --------------------------------------------------------------------------
# The federated simulation
# --------------------------------------------------------------------------


def initial_weights(n_features: int, init: str, rng: np.random.Generator) -> np.ndarray:
    if init == "zero":
        return np.zeros(n_features, dtype=np.float64)
    if init == "random_small":
        w = rng.standard_normal(n_features)
        return w / np.linalg.norm(w) * 0.01
    raise ValueError(f"unknown init {init!r}; expected 'random_small' or 'zero'")


def interact(
    weights: np.ndarray,
    train: RankingDataset,
    click_model: str,
    learning_rate: float,
    rng: np.random.Generator,
    ranker=None,
) -> tuple[np.ndarray, float]:
    """One client interaction; returns (updated weights, online nDCG@10 of the displayed list)."""
    ranker = ranker or Linear(train.n_features)
    q = int(rng.integers(train.n_queries))
    start = int(train.query_offsets[q])
    stop = start + int(train.query_lengths[q])
    features = train.features[start:stop].astype(np.float64)
    labels = train.labels[start:stop]
    scores = ranker.scores(weights, features)
    k = min(RANKING_LENGTH, stop - start)
    ranking = sample_ranking(scores, k, rng)
    displayed_labels = labels[ranking]
    clicks = simulate_clicks(displayed_labels, click_model, rng)
    online = ndcg_of_list(displayed_labels, labels)
    gradient = pdgd_gradient(ranker.doc_gradients(weights, features), scores, ranking, clicks)
    return weights + learning_rate * gradient, online


def run_reference(
    train: RankingDataset,
    test: RankingDataset,
    *,
    n_clients: int,
    local_updates: int,
    rounds: int,
    click_model: str,
    seed: int,
    learning_rate: float = 0.1,
    init: str = "random_small",
    ranker: str = "linear",
    hidden_units: int = 64,
) -> dict:
    """One FPDGD run.

    ``init`` applies to the linear ranker; the neural one always starts from
    N(0, (1/fan_in)^2) weights and hidden biases.

    Returns numpy arrays:
      offline_ndcg_before [rounds]: test nDCG@10 of the global model after t
        server updates, t = 0..rounds-1 (what the published code records);
      offline_ndcg_after [rounds]: after updates 1..rounds;
      online_ndcg [rounds]: mean nDCG@10 of the lists displayed in the round.
    """
    if click_model not in CLICK_MODELS:
        raise ValueError(
            f"unknown click model {click_model!r}; expected one of {sorted(CLICK_MODELS)}"
        )
    rng = np.random.default_rng(seed)
    model = make_ranker(ranker, train.n_features, hidden_units)
    if ranker == "linear":
        global_w = initial_weights(train.n_features, init, rng)
    else:
        global_w = model.init(rng)
    offline = [offline_ndcg(global_w, test, model)]
    online = np.zeros(rounds, dtype=np.float64)
    for t in range(rounds):
        client_weights, client_counts, online_values = [], [], []
        for _ in range(n_clients):
            w = global_w.copy()
            for _ in range(local_updates):
                w, value = interact(w, train, click_model, learning_rate, rng, model)
                online_values.append(value)
            client_weights.append(w)
            client_counts.append(local_updates)
        counts = np.asarray(client_counts, dtype=np.float64)
        global_w = np.sum(np.stack(client_weights) * counts[:, None], axis=0) / counts.sum()
        online[t] = np.mean(online_values)
        offline.append(offline_ndcg(global_w, test, model))
    offline = np.asarray(offline, dtype=np.float64)
    return {
        "offline_ndcg_before": offline[:-1],
        "offline_ndcg_after": offline[1:],
        "online_ndcg": online,
        "final_weights": global_w,
    }


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------

FLAGS = flags.FLAGS


def define_flags() -> None:
    """The CLI's flags, defined only when this file runs as a program: the test suite
    imports it next to the binaries' modules, which define flags of the same names."""
    flags.DEFINE_string("train_path", "", "LETOR training file.")
    flags.DEFINE_string("test_path", "", "LETOR test file.")
    flags.DEFINE_string(
        "cache_dir", None, "Cache folder for parsed LETOR files (default: the project's)."
    )
    flags.DEFINE_integer("n_clients", 10, "Clients per round.")
    flags.DEFINE_integer("local_updates", 5, "Interactions (and PDGD steps) per client per round.")
    flags.DEFINE_integer("rounds", 100, "Server rounds.")
    flags.DEFINE_enum("click_model", "perfect", sorted(CLICK_MODELS), "Cascade click model.")
    flags.DEFINE_float("learning_rate", 0.1, "PDGD step size.")
    flags.DEFINE_enum(
        "init", "random_small", ["random_small", "zero"], "Initial weights of the linear ranker."
    )
    flags.DEFINE_enum(
        "ranker", "linear", ["linear", "neural"], "linear | neural (64 sigmoid units with biases)."
    )
    flags.DEFINE_integer("n_runs", 20, "Independent runs; run r uses seed + r.")
    flags.DEFINE_integer("seed", 0, "Seed of the first run.")
    flags.DEFINE_integer("processes", 2, "Worker processes for the runs (1: run in this process).")
    flags.DEFINE_string("output", "", "JSON result file (empty: print only).")


# Datasets handed to forked workers (set before the pool is created).
_WORKER_DATA: dict = {}


def _one_run(args):
    run, seed, settings = args
    start = time.time()
    result = run_reference(_WORKER_DATA["train"], _WORKER_DATA["test"], seed=seed, **settings)
    return run, seed, result, time.time() - start


def _summary(values) -> dict:
    values = np.asarray(values, dtype=np.float64)
    return {
        "per_run": values.tolist(),
        "mean": float(values.mean()),
        "std": float(values.std()),
    }


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments {argv[1:]}")
    if not FLAGS.train_path or not FLAGS.test_path:
        raise app.UsageError("--train_path and --test_path are required")
    wall_start = time.time()
    train = read_letor(FLAGS.train_path, cache_dir=FLAGS.cache_dir)
    test = read_letor(FLAGS.test_path, cache_dir=FLAGS.cache_dir)
    print(f"train: {train}\ntest:  {test}", flush=True)
    settings = {
        "n_clients": FLAGS.n_clients,
        "local_updates": FLAGS.local_updates,
        "rounds": FLAGS.rounds,
        "click_model": FLAGS.click_model,
        "learning_rate": FLAGS.learning_rate,
        "init": FLAGS.init,
        "ranker": FLAGS.ranker,
    }
    _WORKER_DATA["train"], _WORKER_DATA["test"] = train, test
    jobs = [(run, FLAGS.seed + run, settings) for run in range(FLAGS.n_runs)]
    results = {}

    def report(item):
        run, seed, result, seconds = item
        results[run] = result
        print(
            f"run {run:3d} (seed {seed}): final offline nDCG@10 "
            f"before-update {result['offline_ndcg_before'][-1]:.4f}, "
            f"after-update {result['offline_ndcg_after'][-1]:.4f}, "
            f"online (last round) {result['online_ndcg'][-1]:.4f}  [{seconds:.1f}s] "
            f"({len(results)}/{FLAGS.n_runs} done)",
            flush=True,
        )

    if FLAGS.processes > 1 and FLAGS.n_runs > 1:
        # fork: workers inherit the datasets in _WORKER_DATA without pickling.
        context = multiprocessing.get_context("fork")
        with context.Pool(min(FLAGS.processes, FLAGS.n_runs)) as pool:
            for item in pool.imap_unordered(_one_run, jobs):
                report(item)
    else:
        for job in jobs:
            report(_one_run(job))

    ordered = [results[run] for run in range(FLAGS.n_runs)]
    stack = {
        key: np.stack([r[key] for r in ordered])
        for key in ("offline_ndcg_before", "offline_ndcg_after", "online_ndcg")
    }
    wall = time.time() - wall_start
    output = {
        "implementation": "tests/methods/fpdgd/reference_fpdgd.py (NumPy reference)",
        "train_path": FLAGS.train_path,
        "test_path": FLAGS.test_path,
        "settings": settings,
        "n_runs": FLAGS.n_runs,
        "seeds": [FLAGS.seed + run for run in range(FLAGS.n_runs)],
        "final_offline_ndcg_before": _summary(stack["offline_ndcg_before"][:, -1]),
        "final_offline_ndcg_after": _summary(stack["offline_ndcg_after"][:, -1]),
        "final_online_ndcg": _summary(stack["online_ndcg"][:, -1]),
        "mean_curves": {key: value.mean(axis=0).tolist() for key, value in stack.items()},
        "std_curves": {key: value.std(axis=0).tolist() for key, value in stack.items()},
        "wall_seconds": wall,
        "processes": FLAGS.processes,
    }
    before, after = output["final_offline_ndcg_before"], output["final_offline_ndcg_after"]
    print(
        f"{FLAGS.click_model}: final offline nDCG@10 before-update "
        f"{before['mean']:.4f} ± {before['std']:.4f}, after-update "
        f"{after['mean']:.4f} ± {after['std']:.4f} over {FLAGS.n_runs} runs; "
        f"wall {wall:.1f}s",
        flush=True,
    )
    if FLAGS.output:
        directory = os.path.dirname(os.path.abspath(FLAGS.output))
        os.makedirs(directory, exist_ok=True)
        with open(FLAGS.output, "w") as fh:
            json.dump(output, fh, indent=1)
            fh.write("\n")
        print(f"wrote {FLAGS.output}", flush=True)
    return 0


if __name__ == "__main__":
    define_flags()
    app.run(main)
