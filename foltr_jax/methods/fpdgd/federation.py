"""Federated PDGD (FPDGD paper §3.2, Algorithm 2) and centralised PDGD on one data path.

Shapes: a *lane* is one client of one repetition.  A round maps every lane's
client update (B sequential PDGD interactions, ``lax.scan``) over the stacked
lane axis ``[n_runs * n_clients]``, then each run's server aggregates its clients:
θ ← Σ_c n_c/n θ_c with n_c the client's number of local interactions (FedAvg).
Rounds run under ``lax.scan`` in jit-compiled chunks (one compilation per chunk
length), so progress can be reported between chunks without changing results:
every key is derived from (seed, run, round, client, interaction) by ``fold_in``.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np

from foltr_jax import engine
from foltr_jax.core import click_models, rankers
from foltr_jax.data import DatasetError, RankingDataset
from foltr_jax.engine.config import ConfigError, Setting, resolved, static_part
from foltr_jax.engine.lists import to_device, window_widths
from foltr_jax.engine.loop import ProgressFn
from foltr_jax.methods.fpdgd.client_plan import ClientPlan, client_arrays
from foltr_jax.methods.fpdgd.config import TRACED_FIELDS, FpdgdConfig, TracedSettings
from foltr_jax.methods.fpdgd.rounds import (
    FpdgdArrays,
    FpdgdMethod,
    noise_once,
    server_stages,
)
from foltr_jax.server import aggregators


def build(
    config: FpdgdConfig,
    train: RankingDataset,
    test: RankingDataset,
    settings: list[Setting] | None = None,
    *,
    history_every: int = 0,
    client_ids=None,
    clients: ClientPlan | None = None,
):
    """Validates ``config`` and puts the data on the device: returns (FpdgdMethod, FpdgdArrays).

    ``settings`` (default: the config's own) are the cells of a grid; every cell
    runs ``config.n_runs`` repetitions, all in one compiled program.
    ``history_every`` = Δt > 0 stores every client's update ΔM_{i,t} at rounds
    1, 1 + Δt, ... (unlearning paper §3.2) in ``RunResult.history``.
    ``client_ids`` (a permutation of range(n_clients)) says which client sits at
    each position: malicious and absent clients are the first positions, so
    putting client 7 first makes client 7 the malicious one with its own randomness.
    ``clients`` (ClientPlan) makes the clients differ: non-IID data and its remedies.
    """
    config.validate()
    config = resolved(config)
    for split, dataset in (("training", train), ("test", test)):
        if dataset.n_queries < 1:  # nothing to train on or to evaluate: say so, not JAX
            raise DatasetError(f"the {split} split has no query")
    if history_every < 0:
        raise ConfigError("history_every", f"must be at least 0, got {history_every}")
    # before anything of the run's size is made: a run that cannot fit is refused
    check_memory(config, train, len(settings) if settings else 1)
    client_ids = np.arange(config.n_clients) if client_ids is None else np.asarray(client_ids)
    if sorted(client_ids.tolist()) != list(range(config.n_clients)):
        raise ConfigError(
            "client_ids", f"must be a permutation of 0..{config.n_clients - 1}, got {client_ids}"
        )
    settings = list(settings) if settings else [config.as_setting()]
    for setting in settings:
        setting.validate(config.n_clients)
    refuse_repeated(settings)
    _check_scale(config, settings, history_every, clients)
    if train.n_features != test.n_features:
        raise ValueError(f"train has {train.n_features} features but test has {test.n_features}")
    n_grades = click_models.table_grades(config.n_grades, max(train.max_label, test.max_label))
    plan_names = set()
    if clients is not None:
        plan_names = set(clients.click_models or ()) | set(clients.random_click_models or ())
    names = click_table_names({s.click_model for s in settings} | plan_names)
    spec = _spec(config, train, settings, history_every, clients)
    table = [click_models.by_name(name, n_grades) for name in names]
    cells = run_settings(spec, settings, names, config)
    if config.chunked:  # the stages depend on the spec, not on a setting's values
        slot = jax.tree_util.tree_map(lambda x: x[0], cells)
        engine.check_streams(server_stages(spec, slot))
    arrays = FpdgdArrays(
        to_device(train, spec.window, config.top_k),
        to_device(test, spec.window, config.top_k, ranked=True),
        jax.tree_util.tree_map(lambda *x: jnp.stack(x), *table),
        cells,
        jnp.asarray(client_ids, jnp.int32),
    )
    if clients is not None:
        arrays = arrays._replace(
            clients=client_arrays(
                config, spec.ranker, clients, train, names, len(settings), spec.window
            )
        )
    return spec, arrays


def check_memory(config: FpdgdConfig, train: RankingDataset, n_settings: int) -> None:
    """ConfigError naming n_clients, n_runs or local_updates when a lower bound of the run's
    memory, from its shapes alone, exceeds the devices' (``engine.check_memory``): every lane
    of a round (clients, or a chunk of them, × runs × cells) holds its own copy of the model
    and its interactions' keys (8 bytes each), and every client its id."""
    ranker = rankers.make_ranker(config.ranker, train.n_features)
    shapes = jax.eval_shape(ranker.init, jax.random.PRNGKey(0))
    n_params = sum(int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(shapes))
    per_round = config.client_chunk if config.chunked else config.n_clients
    lanes = per_round * config.n_runs * n_settings
    needed = lanes * (config.local_updates * 8 + n_params * 4) + config.n_clients * 8
    sizes = {"n_clients": config.n_clients, "n_runs": config.n_runs,
             "local_updates": config.local_updates}  # fmt: skip
    engine.check_memory(
        needed, sizes, f"{lanes:,} lanes of clients x runs x {n_settings} cell(s), each with "
        f"its interactions and a {n_params:,}-parameter model", config.n_devices,
    )  # fmt: skip


def refuse_repeated(settings) -> None:
    """ConfigError('settings') when two cells are the same cell, however spelled (their
    values compared, a click model by what it is: 'pbm:1' and 'pbm:1.0' are one): the same
    numbers computed twice and reported as two cells."""
    seen: dict = {}
    for i, setting in enumerate(settings):
        key = dataclasses.replace(setting, click_model=click_models.identity(setting.click_model))
        if key in seen:
            raise ConfigError(
                "settings", f"cells {seen[key]} and {i} are the same cell ({setting}); give "
                "each cell once"
            )  # fmt: skip
        seen[key] = i


def _spec(config, train: RankingDataset, settings, history_every: int, clients) -> FpdgdMethod:
    """The static part of a run (one compilation per FpdgdMethod): the config's ``static_part``,
    ranker, widths, which server stages the grid needs, and the client plan's static
    facts."""
    widths = window_widths(train.max_query_length, config.top_k)
    # Each slot scores its own global model: once over the whole training set, or each of
    # its clients over its own query; which is less work does not depend on the slot count.
    per_slot = config.n_clients * float(np.mean(train.query_lengths))
    personal = tuple(clients.personal) if clients is not None else ()
    aggregator_names = tuple(sorted({s.aggregator for s in settings}))
    attack_names = _attack_names(settings)
    return FpdgdMethod(
        static_part(config, TRACED_FIELDS),
        rankers.make_ranker(config.ranker, train.n_features),
        widths[-1],
        widths,
        shared_first_scores=per_slot >= train.n_docs and not personal,
        n_settings=len(settings),
        aggregator_names=aggregator_names,
        attack_names=attack_names,
        uses_privacy=any(s.sensitivity > 0 for s in settings),
        noise_once=noise_once(
            config,
            aggregator_names,
            attack_names,
            equal_weights=clients is None or clients.steps is None,
        ),
        max_malicious=_malicious_bound(settings, aggregator_names),
        history_every=history_every,
        personal_keys=personal,
        personal_eval=clients.personal_eval if clients is not None else "server",
    )


def _malicious_bound(settings, aggregator_names) -> int:
    """The static bound on m the grid's distance-based aggregators (Krum) select with: the
    grid's largest m; 0 when no aggregator of the grid takes one (``aggregators.call``
    gives it to distance-based rules only), so a run's m alone, a traced value, makes no
    other program."""
    if not any(aggregators.get(name).distances for name in aggregator_names):
        return 0
    return max(s.n_malicious for s in settings)


def run_settings(spec: FpdgdMethod, settings, click_names, config: FpdgdConfig) -> TracedSettings:
    """The grid's cells as arrays (one row per cell), indexing the click table
    ``click_names`` and the FpdgdMethod's aggregator and attack names, with ``config``'s learning
    rates in every cell: the values the run traces."""
    n = len(settings)
    return TracedSettings(
        click_model=jnp.array([click_names.index(s.click_model) for s in settings], jnp.int32),
        n_malicious=jnp.array([s.n_malicious for s in settings], jnp.int32),
        data_poisoning=jnp.array([s.attack == "data_poisoning" for s in settings]),
        model_attack=jnp.array(
            [spec.attack_names.index(s.model_attack or "none") for s in settings]
            if spec.attack_names
            else [0] * len(settings),
            jnp.int32,
        ),
        aggregator=jnp.array(
            [spec.aggregator_names.index(s.aggregator) for s in settings], jnp.int32
        ),
        epsilon=jnp.array([s.epsilon for s in settings], jnp.float32),
        sensitivity=jnp.array([s.sensitivity for s in settings], jnp.float32),
        n_absent=jnp.array([s.n_absent for s in settings], jnp.int32),
        learning_rate=jnp.full(n, config.learning_rate, jnp.float32),
        server_learning_rate=jnp.full(n, config.server_learning_rate, jnp.float32),
    )


def click_table_names(names) -> list:
    """The rows of a run's click table: the click models named, sorted, then 'poison' last
    (data poisoning picks the last row)."""
    return sorted(set(names) - {"poison"}) + ["poison"]


def _check_scale(config: FpdgdConfig, settings, history_every, clients) -> None:
    """Client chunking keeps only running sums; device sharding needs equal shards."""
    if config.chunked and (history_every or (clients is not None and clients.personal)):
        raise ConfigError(
            "client_chunk", "does not combine with update histories or FedPer's personal layers"
        )
    per_round = config.client_chunk if config.chunked else config.n_clients
    per_chunk = ", per chunk" if config.chunked else ""
    engine.check_devices(
        config.n_devices,
        per_round * config.n_runs * len(settings),
        f"lanes of a round (clients x runs x settings{per_chunk})",
    )


def _attack_names(settings) -> tuple:
    """The model attacks a grid uses, with 'none' first when some cells have none."""
    used = sorted({s.model_attack for s in settings} - {None})
    if used and any(s.model_attack is None for s in settings):
        used = ["none"] + used
    return tuple(used)


RunResult = engine.RunResult


def run(
    spec: FpdgdMethod,
    arrays: FpdgdArrays,
    progress: ProgressFn | None = None,
    initial_params=None,
    checkpoint: str | None = None,
) -> RunResult:
    """Runs ``config.rounds`` rounds of every run slot (``engine.run``).

    Slot s * n_runs + r is repetition r of setting s (``RunResult.per_setting``).
    ``initial_params`` (leaves [n_slots, ...]) replace the rankers' initialisation,
    e.g. a warm-up model (data sharing, thesis §4.4.3).  With FedPer ``final_params``
    is (global params, personal params [n_slots, n_clients, ...]); with
    ``history_every`` the result's ``history`` holds the stored client updates.
    ``checkpoint``: a file where the run saves its state after every chunk of rounds
    and from which an interrupted run resumes (see ``loop.scan_in_chunks``).
    """
    if initial_params is not None:
        arrays = arrays._replace(initial_params=initial_params)
    return engine.run(spec, arrays, progress, checkpoint)


def warm_up(
    config: FpdgdConfig,
    shared: RankingDataset,
    test: RankingDataset,
    interactions: int,
    checkpoint: str | None = None,
):
    """Data sharing's warm-up (thesis §4.4.3): a model per run from centralised PDGD (one
    client, one interaction per update) for ``interactions`` updates on the shared data
    G (``noniid.share_queries``), from the runs' usual initial models.  Returns (final
    params [n_runs, ...], its RunResult).
    ``checkpoint``: a file to save and resume the warm-up from (``run``)."""
    central = dataclasses.replace(
        config,
        n_clients=1,
        local_updates=1,
        rounds=interactions,
        chunk_rounds=min(config.chunk_rounds * config.local_updates, interactions),
        eval_every=min(config.eval_every, interactions),
    )
    spec, arrays = build(central, shared, test)
    result = run(spec, arrays, checkpoint=checkpoint)
    return result.final_params, result
