"""A method written outside the package: federated Dueling Bandit Gradient Descent.

DBGD (Yue & Joachims, ICML 2009) with team-draft interleaving (Radlinski et al., CIKM
2008), federated as in FPDGD's Algorithm 2: every client starts a round from the global
linear ranker w and, for each of its B interactions, draws a unit direction u, interleaves
the rankings of w and w + δu, and moves w ← w + αu when the candidate's team gets more
clicks; the server aggregates the clients' models (FedAvg, or any registered rule after
any registered attack).  Only DBGD's client step is here (``engine.Federated``): the
clients × runs, their B steps, keys, the round over client chunks and devices, the server
pipeline, evaluation, checkpoints, the result and the shared settings
(``engine.config.ListsConfig``: clients, B, click model, k, runs, seed, attack, ...) are
the engine's.

    python examples/federated_dbgd.py        # a small run on synthetic data
"""

import dataclasses

import jax
import jax.numpy as jnp

from foltr_jax import data, engine
from foltr_jax.engine.config import ListsConfig, described


@dataclasses.dataclass(frozen=True)
class DbgdConfig(ListsConfig):
    delta: float = described(1.0, "δ, the exploration step: the candidate ranker is w + δu.")
    alpha: float = described(0.01, "α, the update step: w ← w + αu when the candidate wins.")


def team_draft(key, ranking_a, ranking_b, k: int):
    """Team-draft interleaving of two full rankings (candidate positions, best first):
    (list [k], from_b [k]).  The team with fewer picks picks next (a coin decides ties)
    its best document not yet in the list."""

    def pick(carry, coin):
        used, picks_a, picks_b = carry
        b_turn = (picks_b < picks_a) | ((picks_a == picks_b) & coin)
        ranking = jnp.where(b_turn, ranking_b, ranking_a)
        doc = ranking[jnp.argmin(used[ranking])]  # first unused (False sorts first)
        return (used.at[doc].set(True), picks_a + ~b_turn, picks_b + b_turn), (doc, b_turn)

    start = (jnp.zeros(ranking_a.shape[0], bool), jnp.int32(0), jnp.int32(0))
    _, (shown, from_b) = jax.lax.scan(pick, start, jax.random.bernoulli(key, shape=(k,)))
    return shown, from_b


@dataclasses.dataclass(frozen=True)
class Dbgd(engine.Federated):
    """DBGD's clients as the engine runs them: B steps each, sending their models."""

    config: DbgdConfig
    window: int  # the longest query, at least k

    def init_params(self, lists, init_keys):
        return jnp.zeros((init_keys.shape[0], lists.train.features.shape[1]))

    def score(self, w, features):
        return features @ w

    def client_step(self, lists, w, key):
        """One DBGD interaction of one client: (new w, nDCG of the interleaved list)."""
        cfg, keys = self.config, jax.random.split(key, 4)
        query = engine.lists.draw_query(keys[0], lists.train, self.window)
        u = jax.random.normal(keys[1], w.shape)
        u = u / jnp.linalg.norm(u)
        rank = lambda v: engine.lists.by_score(self.score(v, query.features), query.valid)
        shown, from_b = team_draft(keys[2], rank(w), rank(w + cfg.delta * u), cfg.top_k)
        clicks, ndcg = engine.lists.display(keys[3], lists.train, lists.clicks, query, shown)
        wins = jnp.sum(clicks & from_b) > jnp.sum(clicks & ~from_b)
        return w + jnp.where(wins, cfg.alpha, 0.0) * u, ndcg


def run_dbgd(config: DbgdConfig, train, test, progress=None, checkpoint=None):
    """Federated DBGD on ``train``, evaluated on ``test``: an ``engine.RunResult``."""
    window = max(train.max_query_length, config.top_k)
    lists = engine.lists.on_device(train, test, window, config.top_k, config.click_model)
    return engine.run(Dbgd(config, window), lists, progress, checkpoint)


# A name for experiments.method and batch recipes (``--plugin=examples/federated_dbgd.py
# --method=dbgd``), with one flag per DbgdConfig field.
engine.register_method("dbgd", DbgdConfig, run_dbgd, "federated DBGD, team-draft interleaving")

if __name__ == "__main__":
    result = run_dbgd(DbgdConfig(n_runs=2, rounds=50), *data.synthetic_train_test(seed=0))
    print("offline nDCG@10:", result.initial_offline_ndcg, "->", result.offline_ndcg[:, -1])
