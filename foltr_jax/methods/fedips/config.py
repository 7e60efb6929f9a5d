"""FedIPS's config: ``FedIpsConfig`` (on the shared ``RunConfig``), every field a flag of
``python -m experiments.fedips``, and its checks."""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

from foltr_jax.core import rankers
from foltr_jax.core.registry import one_of
from foltr_jax.engine.config import ConfigError, RunConfig, Setting, described, fits_float32

PROPENSITIES = ("known", "estimated", "none")


EM_SCOPES = ("user", "global")


@dataclasses.dataclass(frozen=True)
class FedIpsConfig(RunConfig):
    """Settings of one FedIPS experiment (defaults: FedIPS paper §4); the run's and the
    server's shared settings are ``RunConfig``'s (poisoning paper §4 on FedIPS: the first
    n_malicious users send crafted updates)."""

    clients_field: ClassVar[str] = "n_users"

    n_users: int = described(2000, "|U|: users (clients), all take part every round.")
    queries_per_user: int = described(5, "Queries a user issues per round.")
    top_k: int = described(5, "K: documents shown per query.")
    clicks_per_user: int = described(
        10,
        "m: clicks a user leaves per round (its queries are shown in turn until the m-th "
        "click); 0 shows each query once and keeps every click.",
    )
    max_sessions: int = described(50, "Most lists shown to a user per round while collecting m.")
    gamma: float = described(1.0, "γ: mean position bias, p(e) = (1/rank)^γ_s.")
    gamma_sd: float = described(
        0.1, "Standard deviation of the per-user γ_s (left-truncated at 0)."
    )
    noise_click_prob: float = described(0.1, "Click factor of non-relevant documents (eq. 11).")
    relevant_from: int = described(
        0, "Smallest relevant grade for clicks; 0: 3 on 5-grade labels, the top grade otherwise."
    )
    local_lr: float = described(0.01, "η_l: clients' SGD step.")
    global_lr: float = described(1.0, "η_g: server step on the mean update.")
    rounds: int = 300  # T
    propensity: str = described(
        "known", "known | estimated (federated regression-EM) | none (FedAvg)."
    )
    logging_fraction: float = described(
        0.01, "Share of training queries f₀ is trained on (at least one query)."
    )
    validation_fraction: float = described(
        0.0,
        "Share of training queries held out (not f₀'s, at least one) for choosing learning "
        "rates: the users never issue them and the offline metrics are on them, not on the "
        "test split; 0: none held out.",
    )
    logging_learning_rate: float = described(0.1, "f₀: LambdaRank gradient-descent step.")
    logging_steps: int = described(100, "f₀: LambdaRank gradient-descent steps.")
    em_scope: str = described(
        "user", "Estimated propensities: user (per user; paper: personalized) | global."
    )
    em_learning_rate: float = described(1.0, "Step of the regression-EM relevance model F.")
    em_prior_count: float = described(
        1.0, "Pseudo-impressions of the initial propensity 0.5 per position."
    )
    propensity_floor: float = described(
        0.01, "Lower bound of estimated propensities (relative to rank 1)."
    )
    ranker: str = "linear"  # the users' ranker (rankers.names()); eq. 4's hinge is taken through it

    def validate(self) -> FedIpsConfig:
        """Raises federation.ConfigError naming the offending field."""
        self.check_run(positive=("queries_per_user", "top_k"))
        for name in ("clicks_per_user", "logging_steps", "relevant_from"):
            if getattr(self, name) < 0:
                raise ConfigError(name, f"must be at least 0, got {getattr(self, name)}")
        if self.clicks_per_user > 0 and self.max_sessions < 1:
            raise ConfigError("max_sessions", f"must be at least 1, got {self.max_sessions}")
        positive = ("local_lr", "global_lr", "logging_learning_rate", "em_learning_rate")
        for name in positive:  # finite in float32, as the programs compute
            if not (getattr(self, name) > 0 and fits_float32(getattr(self, name))):
                raise ConfigError(
                    name, f"must be positive and finite in float32, got {getattr(self, name)}"
                )
        for name in ("gamma", "gamma_sd"):
            if not (getattr(self, name) >= 0 and fits_float32(getattr(self, name))):
                raise ConfigError(
                    name, f"must be at least 0 and finite in float32, got {getattr(self, name)}"
                )
        if not 0 <= self.noise_click_prob <= 1:
            raise ConfigError("noise_click_prob", f"must be in [0, 1], got {self.noise_click_prob}")
        if not 0 < self.logging_fraction <= 1:
            raise ConfigError("logging_fraction", f"must be in (0, 1], got {self.logging_fraction}")
        if not 0 <= self.validation_fraction < 1:
            raise ConfigError(
                "validation_fraction", f"must be in [0, 1), got {self.validation_fraction}"
            )
        if not 0 < self.propensity_floor <= 1:
            raise ConfigError("propensity_floor", f"must be in (0, 1], got {self.propensity_floor}")
        if not 0 < self.em_prior_count < math.inf:
            raise ConfigError(
                "em_prior_count", f"must be positive and finite, got {self.em_prior_count}"
            )
        if self.propensity not in PROPENSITIES:
            raise ConfigError("propensity", one_of(PROPENSITIES, self.propensity))
        if self.ranker not in rankers.names():
            raise ConfigError("ranker", one_of(rankers.names(), self.ranker))
        if self.em_scope not in EM_SCOPES:
            raise ConfigError("em_scope", one_of(EM_SCOPES, self.em_scope))
        if self.attack == "data_poisoning":
            raise ConfigError(
                "attack",
                "data_poisoning is not defined for FedIPS (its clicks come from the logging "
                "policy's lists and eq. 11, with no poison click model); use a model attack",
            )
        Setting(
            n_malicious=self.n_malicious, attack=self.attack, aggregator=self.aggregator
        ).validate(self.n_users)
        return self

    @property
    def sessions(self) -> int:
        """Lists simulated per user and round (static)."""
        return self.max_sessions if self.clicks_per_user > 0 else self.queries_per_user

    @property
    def records(self) -> int:
        """Click records per user and round (static): m, or every shown slot when m = 0."""
        return self.clicks_per_user if self.clicks_per_user > 0 else self.sessions * self.top_k
