"""Ranking models as pure functions ``(params, features) -> scores`` over pytrees.

Linear ranker: zero initialisation (poisoning paper §6).  The public FPDGD code's
LinearRanker starts from a random vector of norm 0.01 instead; we keep zeros (the
effect is negligible: the fidelity check against that start holds, README).
Neural ranker: one hidden layer of 64 sigmoid units (poisoning paper §6) with
hidden-layer biases; the weights and the hidden biases are drawn from
N(0, (1/fan_in)^2), the biases with the hidden layer's fan-in (the number of
features), as the public code's PDGDNeuralRanker draws them (the papers are silent
on biases).  Scores are shift invariant under Plackett-Luce, so an output bias
would be inert and there is none.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp

from foltr_jax.core.registry import Registry


class Ranker(Protocol):
    """What a ranker is: ``init(key) -> params`` (a pytree) and ``apply(params, features
    [..., n_features]) -> scores [...]``."""

    def init(self, key: jax.Array) -> Any: ...

    def apply(self, params: Any, features: jax.Array) -> jax.Array: ...

    def __hash__(self) -> int: ...  # a static argument of compiled programs


@dataclasses.dataclass(frozen=True)
class LinearRanker:
    """f(x) = x · w."""

    n_features: int

    def init(self, key: jax.Array | None):
        del key  # zero initialisation (poisoning paper §6; public code: norm 0.01)
        return {"w": jnp.zeros((self.n_features,), jnp.float32)}

    def apply(self, params, features: jax.Array) -> jax.Array:
        return features @ params["w"]


@dataclasses.dataclass(frozen=True)
class NeuralRanker:
    """f(x) = sigmoid(x W1 + b1) · w2, one hidden layer; W1 and b1 start from
    N(0, (1/n_features)^2), w2 from N(0, (1/hidden_units)^2) (public code)."""

    n_features: int
    hidden_units: int = 64

    def init(self, key: jax.Array):
        k1, kb, k2 = jax.random.split(key, 3)
        return {
            "w1": jax.random.normal(k1, (self.n_features, self.hidden_units), jnp.float32)
            / self.n_features,
            "b1": jax.random.normal(kb, (self.hidden_units,), jnp.float32) / self.n_features,
            "w2": jax.random.normal(k2, (self.hidden_units,), jnp.float32) / self.hidden_units,
        }

    def apply(self, params, features: jax.Array) -> jax.Array:
        return jax.nn.sigmoid(features @ params["w1"] + params["b1"]) @ params["w2"]


@dataclasses.dataclass(frozen=True)
class ReluRanker:
    """f(x) = relu(x W1 + b1) · w2, all zero at initialisation.

    FOLtR-ES's neural ranker (thesis §3.1.2: one hidden layer of 10 units; public
    code: ReLU units, a hidden bias, no output bias, zero initialisation).  Zero
    weights give zero gradients under backpropagation, so this ranker suits
    evolution strategies (which only evaluate perturbed models), not PDGD.
    """

    n_features: int
    hidden_units: int = 10

    def init(self, key: jax.Array):
        del key  # zero initialisation
        return {
            "w1": jnp.zeros((self.n_features, self.hidden_units), jnp.float32),
            "b1": jnp.zeros((self.hidden_units,), jnp.float32),
            "w2": jnp.zeros((self.hidden_units,), jnp.float32),
        }

    def apply(self, params, features: jax.Array) -> jax.Array:
        return jax.nn.relu(features @ params["w1"] + params["b1"]) @ params["w2"]

    def apply_lanes(self, params, features: jax.Array) -> jax.Array:
        """float [L, width]: ``apply`` of L models (leaves with a leading axis L) to the
        same ``features`` [width, n_features], each model's scores those ``apply`` gives
        it alone, bit for bit on XLA:CPU: the L hidden layers are one [width, n_features]
        × [n_features, L·hidden] product, whose every column XLA:CPU's kernel sums over
        the features in the one-model product's order (for L = 8, 16 or 24 at every
        width: tests/core/test_rankers.py), and each model's output layer is its own
        product, batched."""
        w1 = params["w1"]  # [L, n_features, hidden]
        lanes, n_features, hidden = w1.shape
        joined = jnp.transpose(w1, (1, 0, 2)).reshape(n_features, lanes * hidden)
        hidden_in = (features @ joined).reshape(features.shape[0], lanes, hidden)
        hidden_in = jnp.transpose(hidden_in, (1, 0, 2)) + params["b1"][:, None, :]
        return jax.vmap(jnp.matmul)(jax.nn.relu(hidden_in), params["w2"])


class Entry(NamedTuple):
    """A registered ranker: ``make(n_features)`` returns an object with ``init(key) ->
    params`` and ``apply(params, features [..., n_features]) -> scores [...]``."""

    make: Callable[[int], Ranker]
    summary: str  # one line for --help


_REGISTRY: Registry[Entry] = Registry("ranker")


def register(name: str, summary: str, make) -> None:
    """Registers a ranker for FPDGD (see :class:`Entry`); it can then be named in a config
    and the binaries' ``--ranker``.  PDGD differentiates ``apply`` with ``jax.grad``."""
    _REGISTRY.add(name, Entry(make, summary))


names = _REGISTRY.names  # every registered ranker, the built-in ones first
help_text = _REGISTRY.help_text


def make_ranker(name: str, n_features: int) -> Ranker:
    """The registered ranker called ``name`` ('linear', 'neural', ...) for ``n_features``."""
    return _REGISTRY.get(name).make(n_features)


register("linear", "x · w, zero start", LinearRanker)
register("neural", "one hidden layer of 64 sigmoid units with biases", NeuralRanker)
register(
    "relu",
    "one hidden layer of 10 ReLU units with biases, zero start (FOLtR-ES's neural ranker)",
    ReluRanker,
)
RANKERS = names()  # the built-in rankers
