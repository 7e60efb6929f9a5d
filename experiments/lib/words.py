"""Settings in words, as figures, legends and tables show them: ``ε = 4.5, Δ = 5``,
``|C| = 10``, ``Krum``, ``LIE attack``, never ``epsilon=4.5, sensitivity=5.0``.

``field(name, value)`` is one setting in words ('' when there is nothing to say, e.g. Δ
without privacy); ``setting(fields, names)`` a list of them; ``shared(members)`` what every
line of a figure shares, in the order a reader wants it (method, clients, interactions,
attack, defence, privacy, ranker, ...).  Nothing here imports matplotlib or JAX.
"""

from __future__ import annotations

import json

METHODS = {
    "fpdgd": "FPDGD",
    "foltr_es": "FOLtR-ES",
    "fedips": "FedIPS",
    "centralised_pdgd/same_budget": "centralised PDGD (same budget)",
    "centralised_pdgd/same_updates": "centralised PDGD (same updates)",
    "centralised_pdgd/batch": "centralised PDGD (batch)",
}
AGGREGATORS = {
    "fedavg": "FedAvg",
    "krum": "Krum",
    "multi_krum": "Multi-Krum",
    "trimmed_mean": "Trimmed Mean",
    "median": "Median",
}
ATTACKS = {
    "none": "no attack",
    "data_poisoning": "data poisoning",
    "lie": "LIE attack",
    "fang_krum_full": "Fang's Krum attack (full knowledge)",
    "fang_krum_partial": "Fang's Krum attack (partial knowledge)",
    "fang_trimmed_mean_full": "Fang's Trimmed-Mean attack (full knowledge)",
    "fang_trimmed_mean_partial": "Fang's Trimmed-Mean attack (partial knowledge)",
    "scaled_negation": "scaled negation attack",
}
SYMBOLS = {  # field -> its symbol in the papers
    "n_clients": "|C|",
    "local_updates": "B",
    "rounds": "T",
    "epsilon": "ε",
    "sensitivity": "Δ",
    "n_malicious": "m",
    "m": "m",
    "learning_rate": "η",
    "server_learning_rate": "η_s",
    "prox_mu": "μ",
    "sigma": "σ",
    "gamma": "γ",
    "privacy_p": "p",
}
# What a figure's heading names when every line shares it, in this order.
SHARED_ORDER = (
    "method", "n_clients", "local_updates", "n_malicious", "m", "attack", "aggregator",
    "epsilon", "sensitivity", "ranker", "learning_rate", "server_optimizer",
    "server_learning_rate", "privacy_p", "sigma", "gamma", "prox_mu",
)  # fmt: skip


def _number(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    return json.dumps(value) if isinstance(value, (dict, list)) else str(value)


def field(name: str, value, fields: dict | None = None) -> str:
    """One setting in words; '' when it says nothing (Δ without privacy, the default
    server optimiser of none)."""
    fields = fields or {}
    if name == "method":  # 'fpdgd/poisoning/full': FPDGD (poisoning, full)
        head, _, rest = str(value).partition("/")
        if str(value) in METHODS or head not in METHODS:
            return METHODS.get(str(value), str(value))
        return f"{METHODS[head]} ({rest.replace('/', ', ')})"
    if name == "aggregator":
        return AGGREGATORS.get(str(value), str(value))
    if name == "attack":
        return ATTACKS.get(str(value), f"{value} attack")
    if name == "epsilon":
        return "no DP" if not value else f"ε = {_number(value)}"
    if name == "sensitivity":
        return "" if not value or not fields.get("epsilon", 1) else f"Δ = {_number(value)}"
    if name == "ranker":
        return f"{value} ranker"
    if name == "server_optimizer":
        return "" if value == "none" else f"server {value}"
    if name == "krum_squared_distances":
        return "Krum on squared distances" if value else "Krum on Euclidean distances"
    if name in SYMBOLS:
        return f"{SYMBOLS[name]} = {_number(value)}"
    return f"{name.replace('_', ' ')} {_number(value)}"


def setting(fields: dict, names) -> str:
    """The settings ``names`` of ``fields`` in words, joined by commas (empties left out)."""
    parts = [field(name, fields[name], fields) for name in names if name in fields]
    return ", ".join(part for part in parts if part)


def shared(field_dicts: list) -> str:
    """What every one of ``field_dicts`` (a figure's lines) has alike, in words: the
    SHARED_ORDER fields whose value is the same in all of them ('3 of the 10 clients
    malicious' when the number of clients is shared too)."""
    if not field_dicts:
        return ""
    alike = {}
    for name in SHARED_ORDER:
        values = {json.dumps(f.get(name), sort_keys=True) for f in field_dicts}
        if len(values) == 1 and name in field_dicts[0]:
            alike[name] = field_dicts[0][name]
    if alike.get("server_optimizer", "none") == "none":
        alike.pop("server_learning_rate", None)  # η_s means nothing without a server optimiser
    malicious = alike.get("n_malicious", alike.get("m"))
    if malicious == 0 and alike.get("attack") == "none":
        alike.pop("attack")  # 'no malicious clients' says it
    parts = []
    for name, value in alike.items():
        if name in ("n_malicious", "m"):
            clients = alike.get("n_clients")
            parts.append(
                "no malicious clients" if not value
                else f"{value} of the {clients} clients malicious" if clients
                else f"m = {_number(value)}"
            )  # fmt: skip
        else:
            parts.append(field(name, value, alike))
    if "epsilon" not in alike:  # DP in some lines: its setting when they all share it
        private = {(f.get("epsilon"), f.get("sensitivity")) for f in field_dicts
                   if f.get("epsilon")}  # fmt: skip
        if len(private) == 1:
            epsilon, sensitivity = private.pop()
            dp = {"epsilon": epsilon, "sensitivity": sensitivity}
            parts.append(f"DP where used: {setting(dp, ('epsilon', 'sensitivity'))}")
    return ", ".join(part for part in parts if part)
