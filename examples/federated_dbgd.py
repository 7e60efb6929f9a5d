"""A method written outside the package: federated Dueling Bandit Gradient Descent.

DBGD (Yue & Joachims, ICML 2009) with team-draft interleaving (Radlinski et al., CIKM
2008), federated as in FPDGD's Algorithm 2: every client starts a round from the global
linear ranker w and, for each of its B interactions, draws a unit direction u, interleaves
the rankings of w and w + δu, and moves w ← w + αu when the candidate's team gets more
clicks; the server aggregates the clients' models (FedAvg, or any registered rule after
any registered attack).  Only the clients' side is DBGD's: keys, the round over client
chunks and devices, the server pipeline, evaluation cadence, checkpoints, the result and
the shared settings (``RunConfig``: runs, seed, attack, aggregator, ...) are
``foltr_jax.engine``'s.

    python examples/federated_dbgd.py        # a small run on synthetic data
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp

from foltr_jax import click_models, data, engine, metrics
from foltr_jax.engine.config import RunConfig, setting


@dataclasses.dataclass(frozen=True)
class DbgdConfig(RunConfig):
    n_clients: int = 100
    local_updates: int = 4  # B interactions per client and round
    rounds: int = 50
    delta: float = setting(1.0, "δ, the exploration step: the candidate ranker is w + δu.")
    alpha: float = setting(0.01, "α, the update step: w ← w + αu when the candidate wins.")
    click_model: str = "informational"
    top_k: int = 10


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
    """DBGD's clients as the engine runs them (``engine.Federated``): they send models."""

    config: DbgdConfig
    window: int

    def init_params(self, arrays, init_keys):
        return jnp.zeros((init_keys.shape[0], arrays[0].features.shape[1]), jnp.float32)

    def evaluate_params(self, arrays, w):
        cfg = self.config
        quality = functools.partial(engine.lists.ranking_quality, k=cfg.top_k)
        return engine.evaluate_slots(lambda w, x: x @ w, quality, arrays[1], w, cfg.n_devices)

    def interact(self, arrays, w, key):
        """One DBGD interaction of one client: (new w, nDCG of the interleaved list)."""
        (train, _, clicks_of), k, keys = arrays, self.config.top_k, jax.random.split(key, 4)
        query, start, length = engine.lists.sample_query(keys[0], train)
        u = jax.random.normal(keys[1], w.shape)
        u = u / jnp.linalg.norm(u)
        window = jax.lax.dynamic_slice_in_dim(train.features, start, self.window, axis=0)
        valid = jnp.arange(self.window) < length
        rank = lambda v: jnp.argsort(jnp.where(valid, -(window @ v), jnp.inf), stable=True)
        shown, from_b = team_draft(keys[2], rank(w), rank(w + self.config.delta * u), k)
        visible = jnp.arange(k) < jnp.minimum(length, k)
        labels = jnp.where(visible, train.labels[start + shown], 0)
        clicks = click_models.simulate_clicks(keys[3], clicks_of, labels, visible)
        wins = jnp.sum(clicks & from_b) > jnp.sum(clicks & ~from_b)
        ndcg = metrics.ndcg_of_list(labels, visible, train.ideal_dcg[query])
        return w + jnp.where(wins, self.config.alpha, 0.0) * u, ndcg

    def clients(self, inputs, start, size):
        """The clients ``start .. start + size − 1`` of every run: B interactions each."""
        arrays, w, round_keys = inputs
        keys = engine.client_keys(round_keys, start + jnp.arange(size))  # [R, size]

        def client(w, key):
            step = lambda w, b: self.interact(arrays, w, jax.random.fold_in(key, b))
            return jax.lax.scan(step, w, jnp.arange(self.config.local_updates))

        models, ndcg = jax.vmap(jax.vmap(client, in_axes=(None, 0)))(w, keys)
        online = {"online_ndcg": ndcg.sum(axis=(1, 2)), "count": jnp.full(w.shape[0], ndcg[0].size)}
        return engine.Sent(models, jnp.ones(models.shape[:2]), online)


def run_dbgd(config: DbgdConfig, train, test, progress=None, checkpoint=None):
    """Federated DBGD on ``train``, evaluated on ``test``: an ``engine.RunResult``."""
    method = Dbgd(config, max(train.max_query_length, config.top_k))
    on_device = functools.partial(engine.lists.to_device, window=method.window, k=config.top_k)
    clicks = click_models.by_name(config.click_model, 5)
    arrays = (on_device(train), on_device(test, ranked=True), clicks)
    return engine.run(method, arrays, progress, checkpoint)


# A name for experiments.method and batch recipes (``--plugin=examples/federated_dbgd.py
# --method=dbgd``), with one flag per DbgdConfig field.
engine.register_method("dbgd", DbgdConfig, run_dbgd, "federated DBGD, team-draft interleaving")

if __name__ == "__main__":
    train, test = data.synthetic_train_test(seed=0)
    result = run_dbgd(DbgdConfig(n_runs=2), train, test)
    print("offline nDCG@10:", result.initial_offline_ndcg, "->", result.offline_ndcg[:, -1])
