"""The settings every method shares: ``RunConfig`` (how a run executes and the server's
side), a grid's cell (``Setting``), the shared checks, the flags' help, and the
backend's choices (window scoring, display groups).  A method's config builds on
``RunConfig`` (FPDGD's: ``methods.fpdgd.config``).

``ConfigError`` names the offending field, which is also the binaries' flag name,
so a binary can say ``--field: message`` without a traceback.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable
from typing import ClassVar

import jax
import numpy as np

from foltr_jax.core import click_models, rankers
from foltr_jax.core.registry import one_of
from foltr_jax.server import aggregators, attacks, pipeline

WINDOW_SCORING = ("auto", "map", "vmap")
FLOAT32_MAX = 3.4028234663852886e38  # what a model's numbers (float32) can hold
# The smallest magnitude that rounds to infinity in float32 (halfway between FLOAT32_MAX and
# 2^128): 3.4028235e38, as numpy prints FLOAT32_MAX, lies below it and rounds to FLOAT32_MAX.
FLOAT32_OVERFLOW = 2.0**128 - 2.0**103


def fits_float32(value: float) -> bool:
    """Whether ``value`` becomes a finite float32 (NaN and infinities do not)."""
    return math.isfinite(value) and abs(value) < FLOAT32_OVERFLOW


INT32_MAX = 2**31 - 1  # counts, sizes and round indices are int32 in the programs
# PRNGKey keeps 32 bits of a seed without x64: seeds s and s + 2^32 would share their keys.
SEED_MAX = 2**32 - 1


def check_fields(config) -> None:
    """Checks every field of a config dataclass against its annotation (int, float, str,
    bool), raising ConfigError naming the field: a float, string or bool where an integer
    belongs never reaches JAX.  Integers lie within int32 (the seed within 0..2^32 - 1)."""
    for field in dataclasses.fields(config):
        value, kind = getattr(config, field.name), field.type
        kind = kind if isinstance(kind, str) else getattr(kind, "__name__", "")
        is_bool = isinstance(value, (bool, np.bool_))
        if kind == "bool":
            fits = is_bool
        elif kind == "int":
            fits = isinstance(value, numbers.Integral) and not is_bool
        elif kind == "float":
            fits = isinstance(value, numbers.Real) and not is_bool
        elif kind == "str":
            fits = isinstance(value, str)
        else:
            continue
        if not fits:
            raise ConfigError(
                field.name, f"must be {'an' if kind == 'int' else 'a'} {kind}, got {value!r}"
            )
        if kind == "int":
            low, high = (0, SEED_MAX) if field.name == "seed" else (-INT32_MAX, INT32_MAX)
            if not low <= value <= high:
                raise ConfigError(field.name, f"must lie in {low}..{high}, got {value}")


def check_derived(field: str, what: str, value: float) -> None:
    """Raises ConfigError naming ``field`` when a quantity derived from it (a noise
    scale, a clipping norm) is not a finite float32: it would break every model."""
    if not fits_float32(value):
        raise ConfigError(field, f"gives {what} = {value}, beyond float32's finite range")


def check_schedule(
    rounds: int, eval_every, n_clients: int, client_chunk: int, clients_field: str = "n_clients"
) -> None:
    """The settings every method shares for how a run executes: ``eval_every`` K in
    1..rounds (offline metrics after rounds K, 2K, ... and T) and ``client_chunk`` 0 (all
    clients at once) or a divisor of ``n_clients``.  Raises ConfigError naming the field."""
    if not isinstance(eval_every, numbers.Integral) or isinstance(eval_every, bool):
        raise ConfigError("eval_every", f"must be an integer, got {eval_every!r}")
    every = int(eval_every)  # any Integral (numpy's too) as a Python int
    if every < 1:
        raise ConfigError("eval_every", f"must be at least 1, got {eval_every}")
    if every > rounds:
        raise ConfigError(
            "eval_every",
            f"must be at most rounds = {rounds} (rounds K, 2K, ... and the last are "
            f"evaluated; K = rounds evaluates only the last), got {eval_every}",
        )
    if client_chunk < 0:
        raise ConfigError("client_chunk", f"must be at least 0, got {client_chunk}")
    if 0 < client_chunk < n_clients and n_clients % client_chunk:
        raise ConfigError(
            "client_chunk",
            f"must divide {clients_field} = {n_clients} (chunks are equal), got {client_chunk}",
        )


def described(default, help: str):
    """A config field with the help its flag shows (``experiments.lib.config_flags`` defines
    the binaries' flags from the fields); for a setting several methods share, the help
    is ``SETTING_HELP``'s and the field needs no metadata."""
    return dataclasses.field(default=default, metadata={"help": help})


def _attack_help() -> str:
    models = attacks.help_text().split(" | ", 1)[1]
    return (
        "The first n_malicious clients attack: none | data_poisoning (they click with the "
        f"poison model; FPDGD and FOLtR-ES) | {models}."
    )


# The help of every setting several methods share: one text, so the same flag says the
# same in every binary.  A callable is read when the flags are defined (a registry's names,
# those of user code loaded with --plugin included).
SETTING_HELP: dict[str, str | Callable[[], str]] = {
    "n_clients": "Clients per round |C| (FOLtR-ES: N).",
    "local_updates": "Local interactions per client per round B.",
    "rounds": "Global updates T.",
    "learning_rate": "Clients' learning rate η (FPDGD: the PDGD step; FOLtR-ES: Adam's step).",
    "ranker": lambda: f"Ranker (FOLtR-ES reads neural as relu): {rankers.help_text()}.",
    "click_model": lambda: f"Click model: {click_models.help_text()}.",
    "n_grades": "Relevance grades of the click tables (2, 3 or 5); 0 infers from the labels.",
    "n_runs": "Independent repetitions, run together in one program.",
    "seed": "Seed of the simulation (rankings, clicks, queries, initial models).",
    "chunk_rounds": "Rounds per compiled chunk (progress is reported between chunks).",
    "eval_every": (
        "Offline metrics (the test split) after rounds K, 2K, ... and the last round only; "
        "results.json's offline curves then list those rounds in offline_rounds. 1: every "
        "round. Online metrics are every round's."
    ),
    "window_scoring": (
        "auto: map on a CPU, vmap on an accelerator; map: score each list's candidates in "
        "turn (fast on CPU); vmap: batched (for GPU)."
    ),
    "client_chunk": (
        "Train a round's clients this many at a time (memory follows the chunk; the server "
        "pipeline must stream: FedAvg, privacy noise, a server optimiser, a streaming "
        "aggregator); 0: all at once."
    ),
    "n_devices": (
        "Shard the clients of a round over this many devices. On a CPU the binaries give JAX "
        "this many CPU devices, one per core: --n_devices=2 on two cores runs about 1.7x as "
        "many interactions a second (float32 sums then add in another order)."
    ),
    "epsilon": "ε of FPDGD's differential privacy (needs --sensitivity).",
    "sensitivity": "Δ of FPDGD's differential privacy; 0 turns it off.",
    "clip_factor": (
        "Clip models to clip_factor·Δ after every local update (paper 0.5; public code 1.0)."
    ),
    "privacy_noise": (
        "auto: with FedAvg of equal weights and no model attack, draw the average's noise "
        "once per round (the same distribution as the clients' Gamma shares, much cheaper); "
        "per_client: every client always draws its own share (FPDGD Algorithm 3 as written)."
    ),
    "aggregator": lambda: f"Server aggregation rule: {aggregators.help_text()}.",
    "attack": _attack_help,
    "n_malicious": "m: the first m clients are malicious.",
    "krum_squared_distances": (
        "Krum and Fang's Krum attack score with squared Euclidean distances (Blanchard et "
        "al.); --nokrum_squared_distances: Euclidean, as the poisoning paper says."
    ),
    "server_optimizer": lambda: (
        "Server optimiser on the aggregate (FedOpt): none (the aggregate is the new model, "
        "FPDGD's Algorithm 2) | "
        + " | ".join(
            f"{name} ({pipeline.SERVER_OPTIMIZER_SUMMARIES[name]})"
            for name in pipeline.SERVER_OPTIMIZERS
        )
        + "."
    ),
    "server_learning_rate": "η_s of --server_optimizer.",
}


def setting_help(config_class, name: str) -> str:
    """The help of ``config_class``'s field ``name``: its metadata's, else SETTING_HELP's."""
    field = {f.name: f for f in dataclasses.fields(config_class)}[name]
    text = field.metadata.get("help") or SETTING_HELP.get(name)
    if text is None:
        raise KeyError(f"{config_class.__name__}.{name}: no help (config.described, SETTING_HELP)")
    return text() if callable(text) else text


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """The settings every method's config builds on: how a run executes (rounds, repetitions,
    seed, compiled chunks, evaluation cadence, client chunks, devices) and the server's
    side (attack, aggregator, malicious clients).  A method's config subclasses it, adds
    its own fields (its client count among them: ``clients_field`` names it) and may give
    a field another default; ``check_run`` validates the shared fields."""

    clients_field: ClassVar[str] = "n_clients"  # the field holding the clients of a round

    rounds: int = 200  # T, global updates
    n_runs: int = 1
    seed: int = 0
    chunk_rounds: int = 50  # rounds per compiled scan chunk
    # Offline metrics (test split) after rounds K, 2K, ... and the last round T only;
    # 1: every round.  Online metrics are every round's regardless.
    eval_every: int = 1
    # Scale: clients of a round in chunks of this many (0: all at once), FedAvg as a running sum.
    client_chunk: int = 0
    n_devices: int = 1  # the clients of a round (or chunk) split over this many devices
    # The first n_malicious clients attack (poisoning paper §4); the server aggregates with
    # ``aggregator`` (aggregators.names()).
    attack: str = "none"  # ATTACKS: data_poisoning clicks with 'poison', the others craft models
    aggregator: str = "fedavg"
    n_malicious: int = 0
    krum_squared_distances: bool = True  # Blanchard et al.; the poisoning paper says Euclidean

    @property
    def n_round_clients(self) -> int:
        """The clients of a round (the field ``clients_field`` names)."""
        return getattr(self, self.clients_field)

    @property
    def chunked(self) -> bool:
        return 0 < self.client_chunk < self.n_round_clients

    @property
    def model_attack(self) -> str | None:
        """The attack on models (attacks.names()), None for no attack or data poisoning."""
        return None if self.attack in ("none", "data_poisoning") else self.attack

    def check_run(self, positive: tuple = ()) -> None:
        """Raises ConfigError naming the field when a field has another type, when the
        clients, rounds, runs, chunk rounds or the fields ``positive`` are below 1, or when
        the evaluation cadence or client chunk does not fit (``check_schedule``)."""
        check_fields(self)
        names = (self.clients_field,) + tuple(positive) + ("rounds", "n_runs", "chunk_rounds")
        for name in names:
            if getattr(self, name) < 1:
                raise ConfigError(name, f"must be at least 1, got {getattr(self, name)}")
        check_schedule(
            self.rounds,
            self.eval_every,
            self.n_round_clients,
            self.client_chunk,
            self.clients_field,
        )
        if self.n_devices < 1:
            raise ConfigError("n_devices", f"must be at least 1, got {self.n_devices}")


@dataclasses.dataclass(frozen=True)
class ListsConfig(RunConfig):
    """``RunConfig`` with what a method whose users interact with LETOR lists shares
    (``lists.Lists``): the clients of a round, B interactions each, the users' click model
    and the length k of a displayed list (and of the offline metrics)."""

    n_clients: int = 100
    local_updates: int = 4  # B interactions per client and round
    click_model: str = "informational"
    top_k: int = described(10, "k: the length of a displayed list and of nDCG@k and MRR@k.")


def attack_names() -> tuple:
    """'none', 'data_poisoning' (a click model, not a model attack) and every registered
    model attack (``attacks.register``)."""
    return ("none", "data_poisoning") + attacks.names()[1:]


ATTACKS = attack_names()  # the built-in attacks


@dataclasses.dataclass(frozen=True)
class Setting:
    """One cell of an experiment grid: what varies between runs of one compiled program."""

    click_model: str = "informational"  # the benign clients' click model
    n_malicious: int = 0
    attack: str = "none"  # ATTACKS; data_poisoning makes malicious clients click 'poison'
    aggregator: str = "fedavg"
    epsilon: float = 0.0
    sensitivity: float = 0.0
    n_absent: int = 0  # the first n_absent clients take no part (FedAvg weight 0): a retrain

    @property
    def model_attack(self) -> str | None:
        """The attack on models (attacks.names()), None for no attack or data poisoning."""
        return None if self.attack in ("none", "data_poisoning") else self.attack

    def validate(self, n_clients: int) -> Setting:
        """Raises ConfigError naming the offending field (= flag name)."""
        check_fields(self)
        try:
            click_models.by_name(self.click_model, 5)
        except ValueError as error:
            raise ConfigError("click_model", str(error)) from None
        if self.attack not in attack_names():
            raise ConfigError("attack", one_of(attack_names(), self.attack))
        if self.aggregator not in aggregators.names():
            raise ConfigError("aggregator", one_of(aggregators.names(), self.aggregator))
        if self.n_malicious < 0:
            raise ConfigError("n_malicious", f"must be at least 0, got {self.n_malicious}")
        if not 0 <= self.n_absent < n_clients:
            raise ConfigError(
                "n_absent", f"must be in [0, n_clients = {n_clients}), got {self.n_absent}"
            )
        if self.n_absent and (self.n_malicious or self.aggregator != "fedavg"):
            raise ConfigError(
                "n_absent", "absent clients need FedAvg and no malicious clients (both come first)"
            )
        try:
            aggregators.check_settings(self.aggregator, n_clients, self.n_malicious)
        except ValueError as error:
            raise ConfigError("n_malicious", str(error)) from None
        if self.attack != "none" and self.n_malicious == 0:
            raise ConfigError("n_malicious", f"attack {self.attack!r} needs n_malicious >= 1")
        for name in ("epsilon", "sensitivity"):
            if not math.isfinite(getattr(self, name)):
                raise ConfigError(name, f"must be finite, got {getattr(self, name)}")
        if self.sensitivity < 0:
            raise ConfigError("sensitivity", f"must be positive, got {self.sensitivity}")
        if self.sensitivity > 0 and not self.epsilon > 0:
            raise ConfigError(
                "epsilon", f"must be positive with sensitivity > 0, got {self.epsilon}"
            )
        if self.epsilon < 0:
            raise ConfigError("epsilon", f"must be positive, got {self.epsilon}")
        if self.epsilon > 0 and not self.sensitivity > 0:
            raise ConfigError("sensitivity", "must be positive when epsilon is set")
        if self.sensitivity > 0:
            try:
                scale = self.sensitivity / self.epsilon
            except OverflowError:
                scale = math.inf
            check_derived("epsilon", "a noise scale Δ/ε", scale)
        return self


def resolve_window_scoring(value: str) -> str:
    """'auto' becomes what suits the default backend: 'map' on a CPU (XLA:CPU's vmapped
    gather is slow), 'vmap' on an accelerator (``lax.map`` walks the lanes one by one)."""
    if value != "auto":
        return value
    return "map" if jax.default_backend() == "cpu" else "vmap"


# Display groups by window scoring (``resolve_display_groups``).  'map' (a CPU), at 1,000
# lanes on the MSLR excerpt: 4 groups cost about what they save, more only compile longer.
# 'vmap' (an accelerator) scores and samples a group's lanes at the group's width: 16 groups
# cut the mean width from 392 rows (4 groups) to 197 on the synthetic lengths, and the
# batched round at 20,000 linear lanes on a CPU from 819 to 502 ms (docs/performance.md;
# not yet measured on a GPU).
DISPLAY_GROUPS = {"map": 4, "vmap": 16}


def resolve_display_groups(value: int, window_scoring: str) -> int:
    """0 becomes the display groups that suit ``window_scoring`` (resolved: 'map' or
    'vmap'; ``DISPLAY_GROUPS``; 0 stays 0 for an unknown scoring, which validation
    names); any other value is kept."""
    return value or DISPLAY_GROUPS.get(window_scoring, 0)


def static_part(config, traced_fields: tuple[str, ...]):
    """``config`` with the values a run traces (``traced_fields``) set to None: what a
    compiled program's key holds, so runs differing only in those values share one program
    (the values travel as arrays).  None, not a default: code reading a traced value from
    the static config fails when it is traced instead of baking in one run's value."""
    return dataclasses.replace(config, **dict.fromkeys(traced_fields))


def resolved(config):
    """``config`` (a config dataclass) with what it leaves to the backend made what runs
    here: ``window_scoring`` 'auto' (``resolve_window_scoring``) and ``display_groups`` 0
    (``resolve_display_groups``), where it has those fields; results record this."""
    fields = {field.name for field in dataclasses.fields(config)}
    changes = {}
    if "window_scoring" in fields:
        changes["window_scoring"] = resolve_window_scoring(config.window_scoring)
        if "display_groups" in fields:
            changes["display_groups"] = resolve_display_groups(
                config.display_groups, changes["window_scoring"]
            )
    return dataclasses.replace(config, **changes)


class ConfigError(ValueError):
    """A setting out of range; ``field`` is the config's field (and flag) name."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field} {message}")
        self.field = field
        self.message = message
