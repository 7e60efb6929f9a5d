"""FOLtR-ES: federated OLTR with evolution strategies (Kharitonov 2019; thesis §3.1).

The method in one module (its config, build, clients' side and run), as FedIPS's; the
privatised rewards and the gradient estimate are ``es_rewards``.

A round (thesis §3.1.1, "Federated Learning Optimization Setting" and "Gradient
Estimation"; public code for the details marked so):

1. Every client c draws a seeded perturbation ε_c ~ N(0, σ²I) of the global
   weights φ.  With antithetic variates (public code) the first B/2 of its B
   interactions are served by φ + ε_c, the last B/2 by φ − ε_c.
2. An interaction samples a query uniformly from the training queries, ranks its
   documents deterministically by score (ties keep the file order), shows the
   top k = 10 and simulates clicks (the click models of ``click_models``).
3. Its reward is the MaxRR of the clicks, one of n = k + 1 values
   (0, 1, 1/2, ..., 1/k), privatised: the true value with probability p, else a
   uniformly chosen *different* one (thesis §3.1.1, "Privatization Procedure"),
   which is ε-locally differentially private with ε ≤ log(p(n−1)/(1−p)) (eq. 3.6).
4. The client sends its seed and the means f⁺_c, f⁻_c of its privatised rewards
   under φ + ε_c and φ − ε_c.  The server estimates eq. 3.5 as

       ĝ = 1/(N σ²) Σ_c ½ (f⁺_c − f⁻_c) ε_c   (antithetic; public code)
       ĝ = 1/(N σ²) Σ_c f̄_c ε_c             (without antithetic pairs)

   i.e. ĝ = 1/(N σ²) Σ_c ε_c · mean_i(s_i f_ci) with signs s_i = ±1, and takes an
   Adam step of gradient *ascent* (optax minimises, so it is given −ĝ).

Shapes: a *lane* is one interaction of one client of one repetition; a round
handles all ``n_runs · n_clients · B`` lanes at once (the B interactions of a
client are independent given its perturbation, so no scan over them is needed).
Rounds run under ``lax.scan`` in jit-compiled chunks like ``federation.run``;
every key is derived from (seed, run, round, client, interaction) by ``fold_in``,
so results do not depend on the chunking or on how many runs share a program.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from foltr_jax import engine
from foltr_jax.core import click_models, metrics, rankers, threefry
from foltr_jax.core.registry import one_of
from foltr_jax.data import RankingDataset
from foltr_jax.engine import lists
from foltr_jax.engine.config import (
    ConfigError,
    RunConfig,
    Setting,
    described,
    resolved,
    static_part,
)
from foltr_jax.methods.foltr_es import query_blocks
from foltr_jax.methods.foltr_es.es_rewards import (
    client_gradient,
    epsilon_bound,
    interaction_signs,
    privatise_reward,
    reward_index,
    reward_values,
)

WINDOW_SCORING = ("auto", "map", "vmap")
BLOCK = 16  # lanes of one query scored together (query_blocks) by a ranker with apply_lanes


@dataclasses.dataclass(frozen=True)
class FoltrEsConfig(RunConfig):
    """Settings of one FOLtR-ES experiment (thesis §3.1.2; FPDGD paper §4 comparison); the
    run's and the server's shared settings are ``RunConfig``'s (poisoning paper §4 on
    FOLtR-ES: the first n_malicious clients are malicious; data_poisoning clicks with
    'poison', the model attacks craft gradient estimates).

    ``privacy_p`` must lie in (1/n, 1] with n = top_k + 1 reward values: at
    p = 1/n the privatised reward is uniform whatever the truth (no signal,
    ε = 0) and below it the signal is inverted; the thesis assumes p > 1/n.
    p = 1 is no privatisation (ε = ∞).  With ``antithetic`` pairs B must be even.
    """

    n_clients: int = 2000  # N
    local_updates: int = 4  # B, interactions per client per round
    learning_rate: float = 0.001  # Adam step size (optax defaults otherwise)
    sigma: float = described(0.01, "Standard deviation σ of the ES perturbations (public code).")
    privacy_p: float = described(
        1.0, "Probability p of reporting the true MaxRR, in (1/11, 1]; 1 = no privatisation."
    )
    antithetic: bool = described(True, "Antithetic pairs: half the interactions use −noise.")
    ranker: str = "linear"  # rankers.names(); neural: 10 ReLU hidden units, zero init (relu)
    click_model: str = "informational"
    n_grades: int = 0  # 2, 3 or 5; 0 infers it from the labels
    top_k: int = 10
    window_scoring: str = "auto"  # lanes scored in turn (map, CPU) or batched (vmap, GPU)

    @property
    def n_reward_values(self) -> int:
        """MaxRR takes top_k + 1 values: 0 (no click) and 1/r for r = 1..top_k."""
        return self.top_k + 1

    @property
    def epsilon(self) -> float:
        """The ε-LDP bound of thesis eq. 3.6 for this config (math.inf at p = 1)."""
        return epsilon_bound(self.privacy_p, self.n_reward_values)

    def validate(self) -> FoltrEsConfig:
        """Raises ConfigError naming the setting when a value is out of range."""
        self.check_run(positive=("local_updates", "top_k"))
        if self.antithetic and self.local_updates % 2:
            raise ConfigError(
                "local_updates",
                f"must be even with antithetic pairs (B/2 interactions with +noise, B/2 with "
                f"-noise), got {self.local_updates}",
            )
        for name in ("learning_rate", "sigma"):
            value = getattr(self, name)
            if not (value > 0 and math.isfinite(value)):
                raise ConfigError(name, f"must be positive and finite, got {value}")
        n = self.n_reward_values
        if not 1.0 / n < self.privacy_p <= 1.0:
            raise ConfigError(
                "privacy_p",
                f"must be in (1/{n}, 1], got {self.privacy_p}: at p <= 1/{n} the privatised "
                f"reward carries no signal and the bound log(p({n}-1)/(1-p)) is not positive",
            )
        choices = {
            "ranker": tuple(rankers.names()),
            "window_scoring": WINDOW_SCORING,
            "n_grades": (0,) + click_models.N_GRADES,
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ConfigError(name, one_of(allowed, getattr(self, name)))
        Setting(
            click_model=self.click_model,
            n_malicious=self.n_malicious,
            attack=self.attack,
            aggregator=self.aggregator,
        ).validate(self.n_clients)
        return self


# The config's values a run traces (``Values``), not compiled into its program: runs differing
# only in these share one program (``engine.config.static_part``).
TRACED_FIELDS = ("learning_rate", "sigma", "privacy_p", "click_model")


class Values(NamedTuple):
    """The run's traced values (float32 [] each), each computed in double precision from
    the config where the program used to compute it from a constant, so results are
    those of a program compiled with the values."""

    learning_rate: jax.Array  # Adam's step size
    sigma: jax.Array  # σ of the perturbations
    sigma_squared: jax.Array  # σ²
    privacy_p: jax.Array  # p of reporting the true MaxRR
    one_minus_p: jax.Array  # 1 − p


def traced_values(config: FoltrEsConfig) -> Values:
    """``config``'s traced values as arrays (``Values``)."""
    numbers = (
        config.learning_rate,
        config.sigma,
        config.sigma**2,
        config.privacy_p,
        1.0 - config.privacy_p,
    )
    return Values(*(jnp.float32(x) for x in numbers))


# FOLtR-ES's reading of a ranker name: the thesis's neural ranker for ES is the zero-start
# ReLU network (§3.1.2; public code), registered as 'relu'; every other registered ranker
# (the one registry, ``rankers``) is itself.
RANKER_ALIASES = {"neural": "relu"}


def make_ranker(name: str, n_features: int):
    """A registered ranker for FOLtR-ES: 'linear' (zero init), 'neural' = 'relu' (10 ReLU
    units, zero init), or any other name of ``rankers.names()``."""
    return rankers.make_ranker(RANKER_ALIASES.get(name, name), n_features)


@dataclasses.dataclass(frozen=True)
class FoltrEsMethod(engine.Federated):
    """The static part of an experiment (hashable: one compilation per FoltrEsMethod), and the
    method as the engine runs it (``engine.Federated``): the clients send gradient
    estimates (updates), the server takes Adam's step, the models are flat [R, P].
    ``config`` is the run's ``static_part`` (σ, p, the learning rate and the click model
    are ``FoltrEsArrays.values`` and ``FoltrEsArrays.click_model``); ``epsilon``, the run's ε bound
    for its result, is not part of the key."""

    config: FoltrEsConfig
    ranker: rankers.Ranker
    window: int  # candidate slice width: the longest training query, at least top_k
    widths: tuple  # scoring widths, narrowest first (lists.window_widths)
    epsilon: float = dataclasses.field(default=math.inf, compare=False)

    sends_updates = True
    online = ("online_ndcg", "online_max_rr")

    @functools.cached_property
    def scoring(self) -> lists.Scoring:
        """How the lanes' lists are scored (``lists.Scoring``), built once."""
        cfg = self.config
        return lists.Scoring(self.ranker, self.window, self.widths, cfg.top_k, cfg.window_scoring)

    def unravel(self, flat: jax.Array):
        """A flat parameter vector [P] as the ranker's pytree."""
        return engine.unraveller(self.ranker)(flat)

    def optimizer(self, settings=None) -> optax.GradientTransformation:
        """Adam with default β1, β2, ε (thesis §3.1.2; public code) and the run's step size
        (``slot_settings``; Adam's state before round 1 does not depend on it)."""
        return optax.adam(1.0 if settings is None else settings)

    def slot_settings(self, arrays: FoltrEsArrays):
        """Every run's Adam step size [R]."""
        return jnp.broadcast_to(arrays.values.learning_rate, (self.config.n_runs,))

    def init_params(self, arrays: FoltrEsArrays, init_keys):
        """The runs' flat models [R, P] (the rankers' zero start)."""
        return engine.flatten(jax.vmap(self.ranker.init)(init_keys)).astype(jnp.float32)

    def evaluate_params(self, arrays: FoltrEsArrays, flat_params):
        return evaluate_runs(self, arrays, flat_params)

    def clients(self, inputs, start, size):
        return train_clients(self, *inputs, start, size)

    def extras(self, arrays: FoltrEsArrays, state) -> dict:
        return {"epsilon": self.epsilon}

    def finish(self, arrays: FoltrEsArrays, state, curves):
        _, extras, interactions = super().finish(arrays, state, curves)
        return jax.device_get(jax.vmap(self.unravel)(state[0])), extras, interactions


class FoltrEsArrays(NamedTuple):
    """The array part of an experiment."""

    train: lists.DeviceData
    test: lists.DeviceData
    click_model: click_models.ClickModel
    poison_model: click_models.ClickModel  # the malicious clients' clicks (data poisoning)
    values: Values  # the run's traced values


def build(config: FoltrEsConfig, train: RankingDataset, test: RankingDataset):
    """Validates ``config`` and puts the data on the device: returns (FoltrEsMethod, FoltrEsArrays)."""
    config.validate()
    config = resolved(config)
    if train.n_features != test.n_features:
        raise ValueError(f"train has {train.n_features} features but test has {test.n_features}")
    n_grades = click_models.table_grades(config.n_grades, max(train.max_label, test.max_label))
    widths = lists.window_widths(train.max_query_length, config.top_k)
    ranker = make_ranker(config.ranker, train.n_features)
    spec = FoltrEsMethod(
        static_part(config, TRACED_FIELDS), ranker, widths[-1], widths, epsilon=config.epsilon
    )
    arrays = FoltrEsArrays(
        lists.to_device(train, spec.window, config.top_k),
        lists.to_device(test, spec.window, config.top_k, ranked=True),
        click_models.by_name(config.click_model, n_grades),
        click_models.by_name("poison", n_grades),
        traced_values(config),
    )
    return spec, arrays


def rank_lanes(spec: FoltrEsMethod, arrays: FoltrEsArrays, lane_params, queries) -> jax.Array:
    """int32 [lanes, k]: each lane's top-k candidate positions, by descending score.

    ``lane_params`` = (flat_global [R, P], noise [R·N, P], run [L], client [L],
    sign [L]): lane models are not materialised; each lane builds
    φ_run + sign·ε_client when it is scored.  Scoring is the lane layer's
    (``lists.Scoring.score_lanes``, as FPDGD's lanes are scored), or, on a CPU (``map``)
    with a ranker that scores many models' windows at once (``apply_lanes``: the relu
    ranker), a query's lanes ``BLOCK`` at a time (``query_blocks``): the same scores bit
    for bit, in one [width × 136] × [136 × 160] product a block instead of sixteen
    [width × 136] × [136 × 10] ones (MSLR's 136 features, the 10-unit ranker).
    """
    flat_global, noise, run, client, sign = lane_params
    k = spec.config.top_k

    def top_k(width, scores, length):
        scores = jnp.where(jnp.arange(width) < length, scores, -jnp.inf)
        return jax.lax.top_k(scores, k)[1].astype(jnp.int32)  # ties: lower index first

    def params_of(args):
        r, c, s = args
        return spec.unravel(flat_global[r] + s * noise[c])

    scoring = spec.scoring
    if scoring.window_scoring != "map" or not hasattr(spec.ranker, "apply_lanes"):
        return scoring.score_lanes(arrays.train, (run, client, sign), queries, top_k, params_of)
    # One query's lanes scored together, BLOCK at a time (query_blocks): the same scores.
    blocks = query_blocks.query_blocks(queries, arrays.train.query_offsets.shape[0], BLOCK)

    def block_params(lanes):
        flat = flat_global[run[lanes]] + sign[lanes][:, None] * noise[client[lanes]]
        return jax.vmap(spec.unravel)(flat)

    def block_top_k(width, scores, length):
        return jax.vmap(top_k, in_axes=(None, 0, None))(width, scores, length)

    ranked = query_blocks.score_blocks(scoring, arrays.train, blocks, block_params, block_top_k)
    return ranked.reshape(-1, k)[blocks.position]


def lane_clicks(
    spec: FoltrEsMethod, arrays: FoltrEsArrays, lane_positions, keys, labels, shown
) -> jax.Array:
    """bool [lanes, k]: the clicks on each lane's displayed list; with data poisoning the
    malicious clients (positions below n_malicious) click with the 'poison' model."""
    cfg = spec.config
    if cfg.attack != "data_poisoning":
        return jax.vmap(click_models.simulate_clicks, in_axes=(0, None, 0, 0))(
            keys, arrays.click_model, labels, shown
        )
    poisoned = lane_positions < cfg.n_malicious
    lane_model = jax.tree_util.tree_map(
        lambda good, bad: jnp.where(poisoned.reshape((-1,) + (1,) * good.ndim), bad, good),
        arrays.click_model,
        arrays.poison_model,
    )
    return jax.vmap(click_models.simulate_clicks)(keys, lane_model, labels, shown)


class RoundDetails(NamedTuple):
    """What happened in one round, per run (leading axis R), before the server's step."""

    noise: jax.Array  # float [R, N, P] ε_c
    queries: jax.Array  # int [R, N, B]
    rankings: jax.Array  # int [R, N, B, k] candidate positions within the query
    true_reward: jax.Array  # int [R, N, B] MaxRR index (0: no click, r: top click at rank r)
    private_reward: jax.Array  # int [R, N, B] after the privatisation procedure
    ndcg: jax.Array  # float [R, N, B] nDCG@k of the displayed list (relevance labels)
    client_gradients: jax.Array  # float [R, N, P] each client's estimate (before any attack)

    @property
    def gradient(self) -> jax.Array:
        """float [R, P] ĝ of the honest clients' messages: their mean (eq. 3.5)."""
        return jnp.mean(self.client_gradients, axis=1)


def es_clients(
    spec: FoltrEsMethod, arrays: FoltrEsArrays, flat_global, round_keys, start=0, size=None
):
    """Clients' side of a round for every run: FOLtR-ES's client update (``train_clients``
    sends its gradient estimates).

    Args:
        flat_global: float [R, P] each run's global weights φ.
        round_keys: [R] the runs' keys of the round (``engine.round_keys``).
        start, size: the clients at positions start .. start + size − 1 (default: all
            N); client c's keys are fold_in(round key, c) wherever it is computed.
    """
    cfg = spec.config
    n_runs, b = flat_global.shape[0], cfg.local_updates
    n_clients = cfg.n_clients if size is None else size
    positions = start + jnp.arange(n_clients)
    n_params = flat_global.shape[1]
    client_keys = engine.client_keys(round_keys, positions)  # [R, N]
    # Per client: key 0 draws its perturbation, keys 1..B its interactions.
    keys = jax.vmap(jax.vmap(lambda key: jax.random.split(key, b + 1)))(client_keys)
    # jax.random.normal(key, (P,)) of every client's key 0, bit for bit (``threefry``)
    traced = arrays.values
    noise = traced.sigma * threefry.normal(keys[:, :, 0], n_params)  # [R, N, P]
    lane_keys = keys[:, :, 1:].reshape((n_runs * n_clients * b,) + keys.shape[3:])
    query_keys, click_keys, privacy_keys = jnp.moveaxis(
        jax.vmap(lambda key: jax.random.split(key, 3))(lane_keys), 1, 0
    )

    train, k = arrays.train, cfg.top_k
    signs = jnp.asarray(interaction_signs(b, cfg.antithetic))
    queries = jax.vmap(lambda key: lists.sample_query(key, train)[0])(query_keys)
    lane_run = jnp.repeat(jnp.arange(n_runs), n_clients * b)
    lane_client = jnp.repeat(jnp.arange(n_runs * n_clients), b)
    lane_sign = jnp.tile(signs, n_runs * n_clients)
    rankings = rank_lanes(
        spec,
        arrays,
        (
            flat_global,
            noise.reshape(n_runs * n_clients, n_params),
            lane_run,
            lane_client,
            lane_sign,
        ),
        queries,
    )
    lengths = train.query_lengths[queries]
    shown = jnp.arange(k)[None, :] < jnp.minimum(lengths, k)[:, None]
    rows = train.query_offsets[queries][:, None] + rankings
    labels = jnp.where(shown, train.labels[rows], 0)
    lane_positions = jnp.tile(jnp.repeat(positions, b), n_runs)
    clicks = lane_clicks(spec, arrays, lane_positions, click_keys, labels, shown)
    true_reward = reward_index(clicks)
    private_reward = jax.vmap(privatise_reward, in_axes=(0, 0, None, None, None))(
        privacy_keys, true_reward, traced.privacy_p, cfg.n_reward_values, traced.one_minus_p
    )
    ndcg = metrics.ndcg_of_list(labels, shown, train.ideal_dcg[queries])

    per_run = lambda x: x.reshape((n_runs, n_clients, b) + x.shape[1:])
    values = reward_values(cfg.n_reward_values)[per_run(private_reward)]
    client_gradients = jax.vmap(client_gradient, in_axes=(0, 0, None, None, None))(
        noise, values, signs, traced.sigma, traced.sigma_squared
    )
    return RoundDetails(
        noise,
        per_run(queries),
        per_run(rankings),
        per_run(true_reward),
        per_run(private_reward),
        per_run(ndcg),
        client_gradients,
    )


def evaluate_runs(spec: FoltrEsMethod, arrays: FoltrEsArrays, flat_params):
    """Offline nDCG@k and MRR@k of every run's model [R, P] on the test split, averaged
    over queries with a relevant document (``engine.evaluate_slots``)."""
    return engine.evaluate_slots(
        lambda flat, features: spec.ranker.apply(spec.unravel(flat), features),
        functools.partial(lists.ranking_quality, k=spec.config.top_k),
        arrays.test,
        flat_params,
        spec.config.n_devices,
    )


def train_clients(spec: FoltrEsMethod, arrays: FoltrEsArrays, flat_global, round_keys, start, size):
    """FOLtR-ES's client update as the engine takes it: the clients at ``start .. start +
    size − 1`` send their gradient estimates (weight 1 each), with the online sums
    (displayed lists' nDCG, true MaxRR, interactions) [R] each."""
    details = es_clients(spec, arrays, flat_global, round_keys, start, size)
    values = reward_values(spec.config.n_reward_values)

    def total(x):
        return x.reshape(x.shape[0], -1).sum(axis=1)

    n_runs, n = details.ndcg.shape[0], details.ndcg[0].size
    online = {
        "online_ndcg": total(details.ndcg),
        "online_max_rr": total(values[details.true_reward]),
        "count": jnp.full(n_runs, n),
    }
    weights = jnp.ones(details.client_gradients.shape[:2], details.client_gradients.dtype)
    return engine.Sent(details.client_gradients, weights, online)


# run(spec, arrays, progress=None, checkpoint=None): every round of every run
# (``engine.run``; the result adds ``epsilon``).
run = engine.run


RunResult = engine.RunResult
