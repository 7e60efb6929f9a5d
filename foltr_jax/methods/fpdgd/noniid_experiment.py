"""The non-IID experiment of FPDGD (Wang's thesis, UQ 2024, ch. 4): the four types of
non-IID data, their IID baselines and the remedies FedProx, FedPer and data sharing.

``NoniidConfig`` names the experiment (the type, the remedies and their settings, and the
federation's ``FpdgdConfig``, whose ``n_clients`` and ``local_updates`` 0 take the type's
defaults); ``plan_cells`` turns it and the data into the experiment's cells, each one
FPDGD run (``NoniidCell``), and ``run_cells`` runs them (``foltr_jax.run_noniid``: both);
``results_cell``, ``cell_labels`` and ``settings_record`` are what results.json records of
them (``engine.results_files``).  The cells, in order:

- ``iid``: the type's IID baseline (unless ``iid`` is False);
- ``noniid``: the non-IID data under FedAvg;
- ``fedprox_mu=<μ>``: FedProx, one cell per ``prox_mu`` (these and ``noniid``, run as
  FedProx at μ = 0, which is FedAvg bit for bit, are one compiled program);
- ``fedper``: FedPer (a neural ranker; the hidden-to-output weights w2 stay on the
  clients); ``fedper_eval`` picks its offline model (the thesis does not say): 'server',
  the server model whose w2 is the FedAvg of the clients' personal w2 (the public FedPer
  code), or 'clients', the mean over clients of each personalised model;
- ``sharing``: data sharing (Type 2): a random ``share_fraction`` of the training queries
  is shared, a warm-up model is trained on it by centralised PDGD for
  ``warmup_interactions`` updates, every client samples from its own plus the shared
  queries.

Defaults follow the thesis (T = 10,000, 5 runs; Type 1: a client per intent, B = 5;
Type 2: |C| = 5 (#R = 1) or 10 (#R = 2), B = 5; Type 3: B = 5, 3 CCM or 5 PBM clients;
Type 4: 5 clients doing 1, 3, 5, 7, 9 interactions, the IID baseline 5).  Type 1 (and
Type 4 mixed with it) reads a ``noniid.MultiIntentDataset``: there is no held-out test
set, offline nDCG@10 is measured on the training queries under every intent's labels,
online nDCG averaged over the intents, and run r reshuffles the intents per query.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from foltr_jax.core import click_models
from foltr_jax.core.registry import one_of
from foltr_jax.data import RankingDataset, noniid
from foltr_jax.engine import RunResult, loop, results_files
from foltr_jax.engine.config import ConfigError, described, resolved
from foltr_jax.engine.results_files import checkpoint_file
from foltr_jax.methods.fpdgd import federation
from foltr_jax.methods.fpdgd.client_plan import PERSONAL_EVALUATIONS, ClientPlan
from foltr_jax.methods.fpdgd.config import FpdgdConfig

__all__ = [
    "REMEDIES",
    "NoniidCell",
    "NoniidConfig",
    "NoniidPlan",
    "NoniidResult",
    "cell_labels",
    "plan_cells",
    "results_cell",
    "run_cell",
    "run_cells",
    "settings_record",
]

REMEDIES = ("none", "fedprox", "fedper", "sharing")
CLICKS = ("ccm", "pbm")  # Type 3's clients: 3 CCM or 5 PBM click models
MIXES = ("none", "1", "2")  # Type 4 alone or mixed with Type 1 or 2


def _thesis_federation() -> FpdgdConfig:
    """FPDGD's settings of the thesis (T = 10,000, 5 runs); |C| and B from the type."""
    return FpdgdConfig(n_clients=0, local_updates=0, rounds=10_000, n_runs=5, chunk_rounds=500)


@dataclasses.dataclass(frozen=True)
class NoniidConfig:
    """A non-IID experiment (thesis ch. 4; the module's doc lists its cells)."""

    federation: FpdgdConfig = dataclasses.field(default_factory=_thesis_federation)
    type: int = described(2, "Non-IID type: 1 (intents) | 2 (labels) | 3 (clicks) | 4 (quantity).")
    remedies: tuple = described(
        ("none",), "Cells beyond the IID baseline: none,fedprox,fedper,sharing."
    )
    iid: bool = described(True, "Also run the type's IID baseline (--noiid to skip).")
    grades_per_client: int = described(1, "Type 2: #R, grades per client (1 or 2).")
    clicks: str = described("ccm", "Type 3: ccm (3 clients) | pbm (5 clients, η 0..2).")
    mix: str = described("none", "Type 4 mixed with: none | 1 (intents) | 2 (labels, #R).")
    steps: tuple = described(
        (), "Type 4: interactions per client (default 1,3,5,7,9; mix=1: 1,3,7,9)."
    )
    prox_mu: tuple = described((0.001, 0.01, 0.1, 1.0, 10.0), "FedProx μ values (one cell each).")
    fedper_eval: str = described(
        "server",
        "FedPer's offline model: server (the server model: FedAvg of every layer, personal w2 "
        "included; public code) | clients (mean nDCG of the clients' personalised models).",
    )
    share_fraction: float = described(0.1, "Data sharing: fraction of training queries shared.")
    warmup_interactions: int = described(1000, "Data sharing: centralised warm-up updates.")
    type1_iid_measure: str = described(
        "intents",
        "Type 1's IID baseline measured under every intent's labels, as the non-IID cell "
        "(intents: the thesis's text) or on the merged labels it trains on (merged: the public "
        "code, whose IID test set is the merged judgements).",
    )

    @property
    def intents(self) -> bool:
        """Whether the data are multi-intent (Type 1, or Type 4 mixed with it)."""
        return self.type == 1 or (self.type == 4 and self.mix == "1")

    def validate(self) -> NoniidConfig:
        """Raises ConfigError naming the field (= the binary's flag) that is out of range;
        what depends on the data (the clients a type allows) is checked by ``plan_cells``."""
        if self.type not in (1, 2, 3, 4):
            raise ConfigError("type", f"must be 1, 2, 3 or 4, got {self.type!r}")
        for remedy in self.remedies:
            if remedy not in REMEDIES:
                raise ConfigError("remedies", f"must be among {REMEDIES}, got {remedy!r}")
        if self.grades_per_client not in (1, 2):
            raise ConfigError("grades_per_client", f"must be 1 or 2, got {self.grades_per_client}")
        if self.clicks not in CLICKS:
            raise ConfigError("clicks", f"must be ccm or pbm, got {self.clicks!r}")
        if self.mix not in MIXES:
            raise ConfigError("mix", f"must be none, 1 or 2, got {self.mix!r}")
        mus, steps = self.prox_mu, self.steps
        if any(not 0 <= m < math.inf for m in mus) or ("fedprox" in self.remedies and not mus):
            raise ConfigError("prox_mu", f"values must be finite and at least 0, got {list(mus)}")
        if any(s < 1 for s in steps):
            raise ConfigError("steps", f"must be at least 1, got {list(steps)}")
        for name in ("remedies", "prox_mu", "steps"):
            values = getattr(self, name)
            repeated = [v for i, v in enumerate(values) if v in values[:i]]
            if repeated:
                raise ConfigError(name, f"{repeated[0]} is asked for twice; name each value once")
        if self.fedper_eval not in PERSONAL_EVALUATIONS:
            raise ConfigError("fedper_eval", one_of(PERSONAL_EVALUATIONS, self.fedper_eval))
        if "fedper" in self.remedies and self.federation.ranker != "neural":
            raise ConfigError(
                "remedies", "fedper keeps the last layer personal: it needs the neural ranker"
            )
        if "sharing" in self.remedies and not (
            self.type == 2 or (self.type == 4 and self.mix == "2")
        ):
            raise ConfigError(
                "remedies", "sharing applies to Type 2 data (type 2, or type 4 with mix 2)"
            )
        if not 0 < self.share_fraction < 1:
            raise ConfigError("share_fraction", f"must be in (0, 1), got {self.share_fraction}")
        if self.warmup_interactions < 1:
            raise ConfigError(
                "warmup_interactions", f"must be at least 1, got {self.warmup_interactions}"
            )
        fed = self.federation
        for name in ("rounds", "n_runs", "chunk_rounds"):
            if getattr(fed, name) < 1:
                raise ConfigError(name, f"must be at least 1, got {getattr(fed, name)}")
        for name in ("n_clients", "local_updates"):
            if getattr(fed, name) < 0:
                raise ConfigError(name, f"must be at least 0, got {getattr(fed, name)}")
        try:
            click_models.by_name(fed.click_model, 5)
        except ValueError as error:
            raise ConfigError("click_model", str(error)) from None
        return self


@dataclasses.dataclass
class NoniidCell:
    """One cell of the experiment: one FPDGD run (``config.n_runs`` repetitions) of
    ``config`` on ``train``/``test`` with the clients ``plan``; ``describe`` says what sets
    it apart (the results record it); ``warmup``: data sharing's shared queries."""

    name: str
    config: FpdgdConfig
    train: RankingDataset
    test: RankingDataset
    plan: ClientPlan | None
    describe: dict
    warmup: RankingDataset | None = None
    warmup_interactions: int = 0

    def build(self):
        """(spec, arrays) of the cell's run (``federation.build``; ConfigError if it does
        not fit)."""
        return federation.build(self.config, self.train, self.test, clients=self.plan)

    def fingerprint(self, spec, arrays) -> str:
        """Everything the cell's results follow from: its name, settings and data (the
        built ``spec`` and ``arrays``) and the warm-up's shared queries."""
        warmup = None
        if self.warmup is not None:
            w = self.warmup
            warmup = (w.features, w.labels, w.query_offsets, w.query_lengths)
        static = (
            self.name,
            spec,
            self.describe,
            self.warmup is not None,
            self.warmup_interactions,
        )
        return loop.fingerprint(static, arrays, warmup)

    def warm_up(self, checkpoint: str | None = None):
        """Data sharing's warm-up models (``federation.warm_up``), None without sharing."""
        if self.warmup is None:
            return None
        initial, _ = federation.warm_up(
            self.config, self.warmup, self.test, self.warmup_interactions, checkpoint=checkpoint
        )
        return initial


@dataclasses.dataclass
class NoniidPlan:
    """The cells of an experiment, and the data they were planned from: ``train`` and
    ``test`` the full splits (Type 1: the merged and the stacked intents), ``n_grades``
    the relevance grades of the clicks."""

    cells: list
    train: RankingDataset
    test: RankingDataset
    n_grades: int


@dataclasses.dataclass
class NoniidResult:
    """``results[name]``: the ``RunResult`` of each cell of ``plan``, in its order."""

    plan: NoniidPlan
    results: dict

    @property
    def cells(self) -> list:
        return self.plan.cells


def _partition(config: NoniidConfig, dataset, n_clients, shared=None):
    try:
        return noniid.type2_setup(
            dataset, n_clients, config.grades_per_client, config.federation.seed, shared=shared
        )
    except noniid.PartitionError as error:
        raise ConfigError(
            "n_clients",
            f"{error} (with grades_per_client = {config.grades_per_client}); "
            "use fewer clients or more data",
        ) from None
    except ValueError as error:
        raise ConfigError("n_clients", str(error)) from None


def _clients(config: NoniidConfig, mix, mi, steps):
    """(n_clients, the clients' click models of Type 3 or None), checked against the data."""
    kind = config.type
    type3 = noniid.CCM_CLIENTS if config.clicks == "ccm" else noniid.PBM_CLIENTS
    if mi is not None:
        default_clients = mi.n_intents
    elif kind == 3:
        default_clients = len(type3)
    elif kind == 4 and mix == "none":
        default_clients = len(steps)
    else:
        default_clients = 5 if config.grades_per_client == 1 else 10
    n_clients = config.federation.n_clients or default_clients
    if mi is not None and n_clients != mi.n_intents:
        raise ConfigError("n_clients", f"Type 1 has one client per intent ({mi.n_intents})")
    if kind == 4 and len(steps) != n_clients:
        raise ConfigError("steps", f"needs one value per client ({n_clients}), got {list(steps)}")
    clicks = None
    if kind == 3:
        clicks = type3
        if n_clients != len(clicks):
            raise ConfigError(
                "n_clients",
                f"clicks = {config.clicks} has one client per click model ({len(clicks)})",
            )
    return n_clients, clicks


def _iid_cell(config: NoniidConfig, fed, mi, full_train, full_test, clicks) -> NoniidCell:
    """The IID baseline."""
    if mi is not None:
        train, test, extra = noniid.type1_setup(
            mi, fed.n_runs, fed.seed, iid=True, iid_measure=config.type1_iid_measure
        )
        plan = ClientPlan(**extra)
    elif config.type == 3:
        train, test, plan = full_train, full_test, ClientPlan(random_click_models=clicks)
    else:
        train, test, plan = full_train, full_test, None
    return NoniidCell("iid", fed, train, test, plan, {"data": "iid"})


def _noniid_data(config: NoniidConfig, mix, mi, full_train, full_test, n_clients, clicks, steps):
    """(train, test, the ClientPlan's fields, description) of the non-IID data."""
    kind, fed = config.type, config.federation
    describe: dict = {"data": f"type{kind}"}
    extra: dict = {}
    if mi is not None:
        train, test, extra = noniid.type1_setup(mi, fed.n_runs, fed.seed, iid=False)
    elif kind == 2 or mix == "2":
        train, extra, holders = _partition(config, full_train, n_clients)
        test = full_test
        describe["grades"] = [list(h) for h in holders]
    else:
        train, test = full_train, full_test
    if kind == 3:
        extra["click_models"] = tuple(clicks)
        describe["click_models"] = list(clicks)
    if kind == 4:
        extra["steps"] = tuple(steps)
        describe["steps"] = list(steps)
        describe["mix"] = mix
    return train, test, extra, describe


def _fedprox_names(mus) -> list:
    """A name per μ: printed with ``:g`` where that tells the cells apart, else ``repr``."""
    short, full = [f"fedprox_mu={mu:g}" for mu in mus], [f"fedprox_mu={mu!r}" for mu in mus]
    names = [s if short.count(s) == 1 else f for s, f in zip(short, full)]
    return names if len(set(names)) == len(names) else full


def _remedy_cells(config, remedy, fed, train, test, extra, describe) -> list:
    """The non-IID data's cells of one remedy: none, fedprox (a cell per μ) or fedper."""
    if remedy == "none":
        return [NoniidCell("noniid", fed, train, test, ClientPlan(**extra), describe)]
    if remedy == "fedprox":
        cells = []
        for name, mu in zip(_fedprox_names(config.prox_mu), config.prox_mu):
            plan = ClientPlan(**extra, prox_mu=mu)
            cells.append(NoniidCell(name, fed, train, test, plan, {**describe, "mu": mu}))
        return cells
    if remedy == "fedper":
        plan = ClientPlan(**extra, personal=("w2",), personal_eval=config.fedper_eval)
        info = {**describe, "personal": ["w2"], "evaluation": config.fedper_eval}
        return [NoniidCell("fedper", fed, train, test, plan, info)]
    return []


def _sharing_cell(config, fed, full_train, full_test, n_clients, steps, describe) -> NoniidCell:
    """Data sharing: a share of the queries for everyone, the rest split as Type 2;
    ``steps``: Type 4's local steps per client, None otherwise."""
    shared, rest = noniid.share_queries(full_train, config.share_fraction, fed.seed)
    s_train, s_extra, s_holders = _partition(config, rest, n_clients, shared=shared)
    if steps is not None:
        s_extra["steps"] = tuple(steps)
    info = {
        **describe,
        "grades": [list(h) for h in s_holders],
        "shared_queries": shared.n_queries,
        "warmup_interactions": config.warmup_interactions,
    }
    return NoniidCell(
        "sharing", fed, s_train, full_test, ClientPlan(**s_extra), info, warmup=shared
    )


def plan_cells(
    config: NoniidConfig,
    train: RankingDataset | noniid.MultiIntentDataset,
    test: RankingDataset | None = None,
) -> NoniidPlan:
    """The experiment's cells (the module's doc), every one checked by building it.

    ``train``: a ``noniid.MultiIntentDataset`` for Type 1 (and Type 4 mixed with it;
    ``test`` unused), else the training split, which Type 2 partitions among the clients
    by grade; ``test``: the test split.  Raises ConfigError naming the field that does not
    fit the data or the type (e.g. ``n_clients`` for a partition without pairs)."""
    config.validate()
    kind = config.type
    mix = config.mix if kind == 4 else "none"
    if config.intents:
        if not isinstance(train, noniid.MultiIntentDataset):
            raise ConfigError("type", "Type 1 data: needs a noniid.MultiIntentDataset")
        mi = train
        full_train, full_test = mi.merged(), mi.stacked()
    else:
        if isinstance(train, noniid.MultiIntentDataset) or test is None:
            raise ConfigError("type", f"Type {kind} data: needs a training and a test split")
        mi, full_train, full_test = None, train, test
    fed = config.federation
    n_grades = fed.n_grades or click_models.n_grades_for(
        max(full_train.max_label, full_test.max_label)
    )
    B = fed.local_updates or 5
    steps = list(config.steps)
    B_iid = B
    if kind == 4:
        steps = steps or ([1, 3, 7, 9] if mix == "1" else list(noniid.TYPE4_STEPS))
        B_iid = fed.local_updates or round(np.mean(steps))
    n_clients, clicks = _clients(config, mix, mi, steps)

    noniid_b = max(steps) if kind == 4 else B
    base = resolved(
        dataclasses.replace(fed, n_clients=n_clients, local_updates=noniid_b, n_grades=n_grades)
    ).validate()
    iid_config = dataclasses.replace(base, local_updates=B_iid) if kind == 4 else base
    cells = []
    if config.iid:
        cells.append(_iid_cell(config, iid_config, mi, full_train, full_test, clicks))
    # The non-IID data and its remedies.
    train_, test_, extra, describe = _noniid_data(
        config, mix, mi, full_train, full_test, n_clients, clicks, steps
    )
    remedies = config.remedies
    for remedy in ["none"] + [r for r in remedies if r != "none"]:
        if remedy == "sharing":
            type4_steps = steps if kind == 4 else None
            cells.append(
                _sharing_cell(config, base, full_train, full_test, n_clients, type4_steps, describe)
            )
        else:
            cell_extra = extra
            if remedy == "none" and "fedprox" in remedies:
                # FedProx at mu = 0 is FedAvg, bit for bit (the pull mu(theta - theta_global)
                # is 0): the non-IID cell and the FedProx cells are one compiled program,
                # mu a traced value.
                cell_extra = {**extra, "prox_mu": 0.0}
            cells += _remedy_cells(config, remedy, base, train_, test_, cell_extra, describe)
    for cell in cells:
        cell.warmup_interactions = config.warmup_interactions
        cell.build()  # refuses a bad plan before any run
    return NoniidPlan(cells, full_train, full_test, n_grades)


def run_cell(
    cell: NoniidCell,
    *,
    progress=None,
    checkpoint: str | None = None,
    warmup_checkpoint: str | None = None,
) -> RunResult:
    """The cell's run: its warm-up when it has one (resuming from ``warmup_checkpoint``),
    then FPDGD (resuming from ``checkpoint``)."""
    initial = cell.warm_up(warmup_checkpoint)
    spec, arrays = cell.build()
    return federation.run(
        spec, arrays, progress=progress, initial_params=initial, checkpoint=checkpoint
    )


def run_cells(
    plan: NoniidPlan,
    *,
    progress: Callable | None = None,
    checkpoint_dir: str | None = None,
) -> NoniidResult:
    """Runs the cells of ``plan`` one after the other (``run_cell``);
    ``progress(cell_name, rounds_done, rounds_total, seconds)`` after every chunk;
    ``checkpoint_dir``: a folder holding each cell's checkpoints
    (``.checkpoint-<cell>.npz``), from which a run started again resumes; they stay when
    the run is done (a run started again reads each cell's last round from them)."""
    results, enabled = {}, checkpoint_dir is not None
    for cell in plan.cells:
        cell_progress = None
        if progress is not None:

            def cell_progress(done, total, seconds, _name=cell.name):
                progress(_name, done, total, seconds)

        results[cell.name] = run_cell(
            cell,
            progress=cell_progress,
            checkpoint=checkpoint_file(checkpoint_dir, cell.name, enabled),
            warmup_checkpoint=checkpoint_file(checkpoint_dir, f"{cell.name}-warmup", enabled),
        )
    return NoniidResult(plan, results)


def cell_labels(config: NoniidConfig, name: str, first: FpdgdConfig) -> dict:
    """How reports place a cell (``results_files.labels``): a group per dataset, non-IID
    type and what sets its figure apart in the thesis (ch. 4): #R and |C| (Type 2), the mix
    (Type 4), the ranker and B (``first``: the first cell's FPDGD config), so every group
    has its own IID baseline and non-IID cell, as in Figures 4.3-4.9; panels are the click
    model (Type 3: the clients' CCM or PBM)."""
    kind = config.type
    parts = [f"non-IID type {kind}"]
    if kind == 2:
        parts.append(f"#R={config.grades_per_client}, |C|={first.n_clients}")
    if kind == 4 and config.mix not in (None, "none"):
        parts.append(f"mixed with type {config.mix}")
    parts.append(f"{first.ranker} ranker")
    if kind != 4:
        parts.append(f"B={first.local_updates}")
    panel = f"{str(config.clicks).upper()} clients" if kind == 3 else first.click_model
    return results_files.labels(name, panel, group=", ".join(parts), config=False)


def _sd(values) -> float:
    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def results_cell(cell: NoniidCell, result: RunResult, labels: dict, **extra) -> dict:
    """The cell of results.json (``results_files.cell``) of ``cell``'s run ``result``:
    the offline and online nDCG curves, per run the initial and final offline nDCG@10
    and the online performance, their means and sds, the cell's clients, B, interactions
    and seconds; ``extra``: further fields (the binary's wall seconds and timings)."""
    final = result.offline_ndcg[:, -1]
    performance = result.online_performance
    return results_files.cell(
        cell.name,
        setting=cell.describe,
        labels=labels,
        evaluated_rounds=results_files.evaluated_rounds(cell.config, result),
        curves={
            "offline_ndcg": result.offline_ndcg.tolist(),
            "online_ndcg": result.online_ndcg.tolist(),
        },
        per_run={
            "initial_offline_ndcg": result.initial_offline_ndcg.tolist(),
            "final_offline_ndcg": final.tolist(),
            "online_performance": performance.tolist(),
        },
        summary={
            "final_offline_ndcg_mean": float(final.mean()),
            "final_offline_ndcg_sd": _sd(final),
            "online_performance_mean": float(performance.mean()),
            "online_performance_sd": _sd(performance),
        },
        n_clients=cell.config.n_clients,
        local_updates=cell.config.local_updates,
        interactions=result.interactions,
        seconds=result.run_seconds,
        compile_seconds=result.compile_seconds,
        **extra,
    )


def settings_record(config: NoniidConfig) -> dict:
    """The experiment's own settings as results.json records them (its "noniid" field)."""
    return {
        "type": config.type,
        "remedies": list(config.remedies),
        "grades_per_client": config.grades_per_client,
        "clicks": config.clicks,
        "mix": config.mix,
        "steps": list(config.steps),
        "prox_mu": list(config.prox_mu),
        "fedper_eval": config.fedper_eval,
        "type1_iid_measure": config.type1_iid_measure,
        "share_fraction": config.share_fraction,
        "warmup_interactions": config.warmup_interactions,
    }
