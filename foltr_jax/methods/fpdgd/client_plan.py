"""How the clients of a run differ: non-IID data and its remedies (thesis ch. 4).

A ``ClientPlan`` is the host-side description; ``client_arrays`` checks it
against the config and puts it on the device as ``ClientArrays``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from foltr_jax.core import click_models, metrics
from foltr_jax.core.registry import one_of
from foltr_jax.data import RankingDataset
from foltr_jax.engine.config import ConfigError
from foltr_jax.methods.fpdgd.config import FpdgdConfig

PERSONAL_EVALUATIONS = ("server", "clients")  # FedPer offline model: server, mean of personalised


@dataclasses.dataclass(frozen=True, eq=False)
class ClientPlan:
    """How the clients differ (thesis ch. 4, non-IID types and remedies); None = IID FPDGD.

    queries: int [n_clients, L] or [n_runs, n_clients, L] training-query indices each
        client samples from uniformly (-1 pads); Types 1-2 and data sharing (§4.3-4.4).

    click_models: one click-model name per client (Type 3, §4.5.1).

    random_click_models: every interaction draws one of these uniformly (Type 3's IID).

    steps: local interactions per client, each ≤ B (Type 4, §4.5.2); FedAvg weights
        n_c = steps[c].

    prox_mu: FedProx μ (§4.3.3): local ascent θ ← θ + η(∇ − μ(θ − θ_global)), i.e. the
        proximal term (μ/2)‖θ − θ_global‖² of Li et al.; None turns it off.

    personal: FedPer (§4.3.3): names of the parameters every client keeps across rounds.

    personal_eval: FedPer's offline metrics (PERSONAL_EVALUATIONS): 'server' (default)
        the server model, i.e. the FedAvg of all layers, personal ones included (the
        public FedPer code); 'clients' the average over clients of each client's
        personalised model (global base layers with its own personal layers).  The
        thesis does not say which; training and online metrics are the same under both.

    online_labels: int [V, n_docs]: online nDCG of a shown list averaged over these
        label views (Type 1: every intent, §4.3.1) instead of the training labels.
    """

    queries: object = None
    click_models: tuple | None = None
    random_click_models: tuple | None = None
    steps: tuple | None = None
    prox_mu: float | None = None
    personal: tuple = ()
    personal_eval: str = "server"
    online_labels: object = None


class ClientArrays(NamedTuple):
    """ClientPlan on the device (None fields keep the IID behaviour)."""

    queries: jax.Array | None  # int32 [n_slots, n_clients, L]
    query_count: jax.Array | None  # int32 [n_slots, n_clients]
    click_index: jax.Array | None  # int32 [n_clients] rows of the click table
    click_pool: jax.Array | None  # int32 [P] rows of the click table, drawn per interaction
    steps: jax.Array | None  # int32 [n_clients]
    prox_mu: jax.Array | None  # float32 []
    online_labels: jax.Array | None  # int32 [V, n_docs + window]
    online_ideal: jax.Array | None  # float32 [V, n_queries]


def client_arrays(
    cfg: FpdgdConfig,
    ranker,
    plan: ClientPlan,
    train: RankingDataset,
    names,
    n_settings: int,
    window: int,
) -> ClientArrays:
    """Checks a ClientPlan against the config and the ranker (FedPer's layers) and puts it
    on the device."""
    _check_plan(cfg, ranker, plan)
    queries = count = None
    if plan.queries is not None:
        queries, count = _query_lists(plan.queries, cfg, train, n_settings)
    online_labels = online_ideal = None
    if plan.online_labels is not None:
        online_labels, online_ideal = _online_views(plan.online_labels, cfg, train, window)
    return ClientArrays(
        queries=queries,
        query_count=count,
        click_index=None
        if plan.click_models is None
        else jnp.asarray([names.index(n) for n in plan.click_models], jnp.int32),
        click_pool=None
        if plan.random_click_models is None
        else jnp.asarray([names.index(n) for n in plan.random_click_models], jnp.int32),
        steps=None if plan.steps is None else jnp.asarray(plan.steps, jnp.int32),
        prox_mu=None if plan.prox_mu is None else jnp.float32(plan.prox_mu),
        online_labels=online_labels,
        online_ideal=online_ideal,
    )


def _check_plan(cfg: FpdgdConfig, ranker, plan: ClientPlan) -> None:
    """Raises ConfigError naming the ClientPlan field that does not fit the config."""
    n_clients = cfg.n_clients
    for name in ("click_models", "steps"):
        value = getattr(plan, name)
        if value is not None and len(value) != n_clients:
            raise ConfigError(name, f"needs one entry per client ({n_clients}), got {len(value)}")
    for name in set(plan.click_models or ()) | set(plan.random_click_models or ()):
        try:
            click_models.by_name(name, 5)
        except ValueError as error:
            raise ConfigError("click_model", str(error)) from None
    if plan.random_click_models is not None and not plan.random_click_models:
        raise ConfigError("random_click_models", "must name at least one click model")
    if plan.steps is not None:
        for c, n in enumerate(plan.steps):
            if not 1 <= n <= cfg.local_updates:
                raise ConfigError(
                    "steps", f"client {c}: must be in [1, B = {cfg.local_updates}], got {n}"
                )
    if plan.prox_mu is not None and not 0 <= plan.prox_mu < math.inf:
        raise ConfigError("prox_mu", f"must be finite and at least 0, got {plan.prox_mu}")
    if plan.personal:
        keys = set(ranker.init(jax.random.PRNGKey(0)))
        if not set(plan.personal) < keys:
            raise ConfigError("personal", f"must be a proper subset of the ranker's {sorted(keys)}")
    if plan.personal_eval not in PERSONAL_EVALUATIONS:
        raise ConfigError("personal_eval", one_of(PERSONAL_EVALUATIONS, plan.personal_eval))
    if plan.personal_eval != "server" and not plan.personal:
        raise ConfigError("personal_eval", "applies to FedPer only (set personal)")


def _query_lists(lists, cfg, train: RankingDataset, n_settings: int):
    """Each client's query list, packed (valid entries first) and tiled over the slots:
    (queries [slots, clients, L], count [slots, clients]); a client draws u < count and
    plays query list[u]."""
    table = np.asarray(lists)
    if table.ndim == 2:
        table = table[None]
    if table.ndim != 3 or table.shape[1] != cfg.n_clients or table.shape[0] not in (1, cfg.n_runs):
        raise ConfigError(
            "queries", f"must be [n_clients] or [n_runs, n_clients] lists, got {table.shape}"
        )
    if table.size and table.max() >= train.n_queries:
        raise ConfigError("queries", f"index {table.max()} beyond {train.n_queries} queries")
    valid = table >= 0
    n = valid.sum(axis=2)
    for run, client in zip(*np.nonzero(n == 0)):
        raise ConfigError("queries", f"client {client} (run {run}) has no queries")
    # Pack each list's valid entries first; a client draws u < count, query = list[u].
    order = np.argsort(~valid, axis=2, kind="stable")
    table = np.take_along_axis(np.where(valid, table, 0), order, axis=2)
    table = np.broadcast_to(table, (cfg.n_runs,) + table.shape[1:])
    n = np.broadcast_to(n, (cfg.n_runs, cfg.n_clients))
    queries = jnp.asarray(np.tile(table, (n_settings, 1, 1)), jnp.int32)
    count = jnp.asarray(np.tile(n, (n_settings, 1)), jnp.int32)
    return queries, count


def _online_views(labels, cfg, train: RankingDataset, window: int):
    """Type 1's per-client label views for online nDCG: (labels padded by the window,
    ideal DCG per view and query)."""
    views = np.asarray(labels)
    if views.ndim != 2 or views.shape[1] != train.n_docs:
        raise ConfigError("online_labels", f"must be [views, {train.n_docs}], got {views.shape}")
    online_labels = jnp.asarray(np.pad(views, ((0, 0), (0, window))), jnp.int32)
    online_ideal = jnp.asarray(
        np.stack(
            [
                metrics.ideal_dcg(v, train.query_offsets, train.query_lengths, cfg.top_k)
                for v in views
            ]
        )
    )
    return online_labels, online_ideal
