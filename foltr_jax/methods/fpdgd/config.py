"""FPDGD's config: ``FpdgdConfig`` (on the shared ``RunConfig``), its grid cells as
arrays (``TracedSettings``) and the centralised PDGD baselines (``centralised``).

``ConfigError`` names the offending field, which is also the binaries' flag name.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import jax

from foltr_jax.core import click_models, rankers
from foltr_jax.core.registry import one_of
from foltr_jax.engine.config import (
    WINDOW_SCORING,
    ConfigError,
    RunConfig,
    Setting,
    check_derived,
)
from foltr_jax.server import pipeline

AGGREGATIONS = ("fedavg", "sum_of_updates")
CENTRALISED_FORMS = ("same_updates", "same_budget", "batch")
# 'auto': FedAvg of equal weights draws the average's Laplace-exact noise once per round
# (pipeline.gamma_noise_once); 'per_client': every client draws its own share, always.
PRIVACY_NOISE = ("auto", "per_client")
SERVER_OPTIMIZER_NAMES = ("none",) + tuple(pipeline.SERVER_OPTIMIZERS)


@dataclasses.dataclass(frozen=True)
class FpdgdConfig(RunConfig):
    """Settings of one FPDGD experiment (defaults: FPDGD paper §4, MSLR-WEB10K); the run's
    and the server's shared settings are ``RunConfig``'s."""

    n_clients: int = 1000
    local_updates: int = 2  # B, interactions per client per round
    learning_rate: float = 0.1
    ranker: str = "linear"
    click_model: str = "informational"
    n_grades: int = 0  # 2, 3 or 5; 0 infers it from the training labels
    top_k: int = 10
    aggregation: str = "fedavg"  # 'sum_of_updates' accumulates client updates (centralised batch)
    # Differential privacy of the clients' models (a grid overrides these per Setting).
    epsilon: float = 0.0  # ε of FPDGD's differential privacy (with sensitivity > 0)
    sensitivity: float = 0.0  # Δ; 0 turns differential privacy off
    clip_factor: float = 0.5  # clip to factor·Δ after every local update (paper Δ/2; public code Δ)
    privacy_noise: str = "auto"  # PRIVACY_NOISE: where the Gamma noise is drawn
    # Server optimiser on the aggregate (FedOpt, Reddi et al. 2021); 'none': the aggregate is
    # the new global model, as FPDGD's Algorithm 2.
    server_optimizer: str = "none"  # none | pipeline.SERVER_OPTIMIZERS
    server_learning_rate: float = 1.0
    # Lanes score and sample their lists in this many groups of similar query length;
    # 0: by the window scoring (resolve_display_groups).
    display_groups: int = 0
    window_scoring: str = "auto"  # lanes scored in turn (map, CPU) or batched (vmap, GPU)

    def validate(self) -> FpdgdConfig:
        """Raises ConfigError naming the setting when a value is out of range or of another
        type."""
        self.check_run(positive=("local_updates", "top_k"))
        if self.display_groups < 0:
            raise ConfigError(
                "display_groups",
                f"must be at least 0 (0: by the scoring), got {self.display_groups}",
            )
        if not 0 < self.learning_rate < math.inf:
            raise ConfigError(
                "learning_rate", f"must be positive and finite, got {self.learning_rate}"
            )
        choices = {
            "ranker": rankers.names(),
            "aggregation": AGGREGATIONS,
            "window_scoring": WINDOW_SCORING,
            "privacy_noise": PRIVACY_NOISE,
            "n_grades": (0,) + click_models.N_GRADES,
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ConfigError(name, one_of(allowed, getattr(self, name)))
        if self.server_optimizer not in SERVER_OPTIMIZER_NAMES:
            raise ConfigError(
                "server_optimizer",
                one_of(SERVER_OPTIMIZER_NAMES, self.server_optimizer),
            )
        if not (self.server_learning_rate > 0 and math.isfinite(self.server_learning_rate)):
            raise ConfigError(
                "server_learning_rate",
                f"must be positive and finite, got {self.server_learning_rate}",
            )
        if self.server_optimizer != "none" and self.aggregation == "sum_of_updates":
            raise ConfigError(
                "server_optimizer",
                "does not apply to the centralised batch baseline (sum of updates)",
            )
        if not 0 < self.clip_factor < math.inf:
            raise ConfigError("clip_factor", f"must be positive and finite, got {self.clip_factor}")
        self.as_setting().validate(self.n_clients)
        clipping = self.clip_factor * self.sensitivity
        check_derived("clip_factor", "a clipping norm clip_factor·Δ", clipping)
        return self

    def as_setting(self) -> Setting:
        """The single pipeline setting this config describes."""
        return Setting(
            click_model=self.click_model,
            n_malicious=self.n_malicious,
            attack=self.attack,
            aggregator=self.aggregator,
            epsilon=self.epsilon,
            sensitivity=self.sensitivity,
        )


class TracedSettings(NamedTuple):
    """Settings as arrays, one entry per setting of the grid (see Setting)."""

    click_model: jax.Array  # int, index into the click table
    n_malicious: jax.Array  # int
    data_poisoning: jax.Array  # bool: malicious clients click with the 'poison' model
    model_attack: jax.Array  # int, index into FpdgdMethod.attack_names
    aggregator: jax.Array  # int, index into FpdgdMethod.aggregator_names
    epsilon: jax.Array  # float
    sensitivity: jax.Array  # float, 0 = no differential privacy
    n_absent: jax.Array  # int, the first n_absent clients take no part
    learning_rate: jax.Array  # float: the clients' PDGD step η (the config's, every cell)
    server_learning_rate: jax.Array  # float: the server optimiser's η_s (the config's)


# The config's values a run traces (``TracedSettings``, one entry per cell), not compiled into its
# program: runs differing only in these share one program (``engine.config.static_part``;
# whether privacy, an attack or an aggregator exists at all is ``rounds.FpdgdMethod``'s own).
TRACED_FIELDS = (
    "learning_rate",
    "server_learning_rate",
    "click_model",
    "epsilon",
    "sensitivity",
    "n_malicious",
    "attack",
    "aggregator",
)


def centralised(config: FpdgdConfig, form: str) -> FpdgdConfig:
    """The centralised PDGD baseline matching an FPDGD config (FPDGD paper §4).

    same_updates: one interaction per update, as many updates as FPDGD rounds.

    same_budget: one update per interaction, FPDGD's whole interaction budget
        (n_clients · B interactions between two evaluations).

    batch: gradients of n_clients · B interactions accumulated (summed) into one
        update per round.
    """
    budget = config.n_clients * config.local_updates
    if form == "same_updates":
        return dataclasses.replace(config, n_clients=1, local_updates=1)
    if form == "same_budget":
        return dataclasses.replace(config, n_clients=1, local_updates=budget)
    if form == "batch":
        return dataclasses.replace(
            config, n_clients=budget, local_updates=1, aggregation="sum_of_updates"
        )
    raise ValueError(f"centralised form {one_of(CENTRALISED_FORMS, form)}")
