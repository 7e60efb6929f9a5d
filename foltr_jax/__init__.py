"""foltr_jax: Federated Online Learning to Rank simulated in JAX.

The Python API: the config objects and one ``run_*`` per method (FPDGD and centralised
PDGD, with non-IID client plans through ``clients=``; FOLtR-ES; FedIPS; the unlearning
protocol; the thesis's non-IID experiment), every one on ``engine.run`` and returning
``RunResult``s::

    import foltr_jax

    train, test = foltr_jax.data.synthetic_train_test(seed=0)
    config = foltr_jax.FpdgdConfig(n_clients=100, local_updates=2, rounds=50)
    result = foltr_jax.run_fpdgd(config, train, test)
    result.offline_ndcg  # [runs, rounds]; [runs, len(result.offline_rounds)] with eval_every > 1

``foltr_jax.aggregators.register`` adds an aggregation rule that every method and
binary can then name (see the README's "Use from Python").

Compiled programs are remembered across processes in JAX's persistent compilation cache,
by default in ``~/.cache/foltr_jax/jax`` (``foltr_jax.core.compile_cache``:
``FOLTR_JAX_COMPILE_CACHE=DIR`` moves it, ``=none`` turns it off; a cache folder set in
JAX's own config before the import is kept).
"""

__version__ = "0.1.0"

# The layers, lowest first: core (numerics, registries, files), data, server (aggregators,
# attacks, the pipeline), engine (the shared round, run and config), methods (one folder
# each); the modules a user reaches as ``foltr_jax.<name>`` are bound here.
from foltr_jax import (
    data,
    engine,
)
from foltr_jax.core import click_models, compile_cache, metrics, rankers
from foltr_jax.data import noniid
from foltr_jax.engine import RunResult
from foltr_jax.engine.config import ConfigError, Setting
from foltr_jax.methods.fedips import FedIpsConfig
from foltr_jax.methods.foltr_es import FoltrEsConfig
from foltr_jax.methods.fpdgd.client_plan import ClientPlan
from foltr_jax.methods.fpdgd.config import FpdgdConfig
from foltr_jax.methods.fpdgd.noniid_experiment import NoniidConfig
from foltr_jax.methods.unlearning import UnlearningConfig
from foltr_jax.server import aggregators, attacks

compile_cache.configure()  # the default: compiled programs remembered (module doc)


def _check_splits(train: data.RankingDataset, test: data.RankingDataset) -> None:
    """A split without queries is refused in one ``DatasetError`` before JAX sees it
    (nothing to train on, or nothing to evaluate); a test split without a relevant
    document is warned about as the binaries warn (its offline nDCG is 0)."""
    for split, dataset in (("training", train), ("test", test)):
        if dataset.n_queries < 1:
            raise data.DatasetError(f"the {split} split has no query")
    data.warn_without_relevant(test, "the test split", stacklevel=4)  # the caller's line


def run_fpdgd(
    config: FpdgdConfig,
    train: data.RankingDataset,
    test: data.RankingDataset,
    settings: list[Setting] | None = None,
    *,
    clients: ClientPlan | None = None,
    progress=None,
    checkpoint: str | None = None,
) -> RunResult:
    """Runs FPDGD (Wang et al. 2021), or centralised PDGD (``methods.fpdgd.config.centralised``).

    Every cell of ``settings`` runs ``config.n_runs`` repetitions, all in one compiled
    program; repetition r of every cell shares its random keys (paired runs).

    Args:
        config: the federation's settings: clients, interactions per client (B), rounds,
            ranker, learning rate, privacy, attack and aggregator.
        train: the queries the clients interact with (``foltr_jax.data``).
        test: the queries the global model is evaluated on after each round.
        settings: the cells of a grid (what may vary within one program: click model,
            attack, m, aggregator, ε and Δ); default: the config's own, one cell.
        clients: a non-IID client plan (``foltr_jax.noniid``); default IID clients.
        progress: called as ``progress(rounds_done, rounds_total, seconds)`` after
            every chunk of ``config.chunk_rounds`` rounds.
        checkpoint: a file where the run saves its state after every chunk; a run
            started again with the same file resumes from it.

    Returns:
        A ``RunResult``: ``offline_ndcg``, ``offline_mrr``, ``online_ndcg`` and
        ``online_max_rr`` per run slot and round, ``cells`` (the settings),
        ``by_cell(name)`` as ``[cells, runs, rounds]``, the final models, timings.

    Example::

        train, test = foltr_jax.data.synthetic_train_test(seed=0, n_train_queries=40)
        config = foltr_jax.FpdgdConfig(n_clients=20, rounds=10, n_runs=2)
        cells = [foltr_jax.Setting(), foltr_jax.Setting(aggregator="median")]
        result = foltr_jax.run_fpdgd(config, train, test, cells)
        finals = result.by_cell("offline_ndcg")[:, :, -1]  # [2 cells, 2 runs]
    """
    _check_splits(train, test)
    from foltr_jax.methods.fpdgd import federation

    spec, arrays = federation.build(config, train, test, settings, clients=clients)
    result = federation.run(spec, arrays, progress, checkpoint=checkpoint)
    result.cells = list(settings) if settings else [config.as_setting()]
    return result


def run_foltr_es(
    config: FoltrEsConfig,
    train: data.RankingDataset,
    test: data.RankingDataset,
    *,
    progress=None,
    checkpoint: str | None = None,
) -> RunResult:
    """Runs FOLtR-ES (Kharitonov 2019; Wang's thesis §3.1): evolution strategies on
    privatised rewards.

    Args:
        config: clients, interactions per client, rounds, the ES noise and the reward
            privatisation ``privacy_p`` (1 is none).
        train: the queries the clients interact with.
        test: the queries the global model is evaluated on.
        progress: ``progress(rounds_done, rounds_total, seconds)`` after every chunk.
        checkpoint: a file to save the state to after every chunk and resume from.

    Returns:
        A ``RunResult`` with ``offline_ndcg``, ``offline_mrr``, ``online_ndcg``,
        ``online_max_rr`` ``[runs, rounds]`` and ``epsilon`` (the privacy ε of
        ``privacy_p``; infinite without privatisation).

    Example::

        config = foltr_jax.FoltrEsConfig(n_clients=20, rounds=10)
        result = foltr_jax.run_foltr_es(config, train, test)
        result.epsilon, result.offline_ndcg[:, -1]
    """
    _check_splits(train, test)
    from foltr_jax.methods import foltr_es

    spec, arrays = foltr_es.build(config, train, test)
    return foltr_es.run(spec, arrays, progress, checkpoint)


def run_fedips(
    config: FedIpsConfig,
    train: data.RankingDataset,
    test: data.RankingDataset,
    *,
    progress=None,
    checkpoint: str | None = None,
) -> RunResult:
    """Runs FedIPS (Li & Ouyang): federated unbiased learning to rank with inverse
    propensity scoring, the users estimating their position bias by EM.

    Args:
        config: users, queries and clicks per user, documents shown (K), rounds, the
            propensity estimation.
        train: the queries the users issue.
        test: the queries the global model is evaluated on (NDCG@5 and NDCG@10).
        progress: ``progress(rounds_done, rounds_total, seconds)`` after every chunk.
        checkpoint: a file to save the state to after every chunk and resume from.

    Returns:
        A ``RunResult`` with ``offline_ndcg5`` and ``offline_ndcg10`` ``[runs, rounds]``
        and, in ``extras``, the users' estimated propensities.

    Example::

        config = foltr_jax.FedIpsConfig(n_users=20, rounds=10)
        result = foltr_jax.run_fedips(config, train, test)
        result.offline_ndcg5[:, -1]
    """
    _check_splits(train, test)
    from foltr_jax.methods import fedips

    spec, arrays, _ = fedips.build(config, train, test)
    return fedips.run(spec, arrays, progress, checkpoint)


def run_unlearning(
    config: UnlearningConfig,
    train: data.RankingDataset,
    test: data.RankingDataset,
    *,
    progress=None,
):
    """Runs the unlearning paper's protocol (Wang et al. 2024, §3-4): trains 10H-0M,
    9H-1M (storing the update history) and 9H-0M, then replays U(9H-1M) without the
    forgotten clients in every cell n′ × Δt × click model.

    Args:
        config: the federation's settings and the replay's grid (click models,
            ``forget_clients``, Δt, n′).
        train: the queries the clients interact with.
        test: the queries the models are evaluated on.
        progress: ``progress(rounds_done, rounds_total, seconds)`` after every chunk.

    Returns:
        An ``unlearning.ProtocolResult``: ``trained`` (a ``RunResult`` per kind:
        ``"honest"``, ``"malicious"``, ``"retrained"``) and ``replayed`` (a
        ``RunResult`` whose ``cells`` are (click model, n′, Δt)).

    Example::

        config = foltr_jax.UnlearningConfig(
            federation=foltr_jax.FpdgdConfig(n_clients=4, rounds=4),
            click_models=("perfect",), delta_t=(2,), unlearn_local_updates=(1,))
        protocol = foltr_jax.run_unlearning(config, train, test)
        protocol.replayed.final_offline_ndcg()  # [cells, runs]
    """
    _check_splits(train, test)
    from foltr_jax.methods import unlearning

    return unlearning.run_protocol(config, train, test, progress)


def run_noniid(
    config: NoniidConfig,
    train: data.RankingDataset | noniid.MultiIntentDataset,
    test: data.RankingDataset | None = None,
    *,
    progress=None,
    checkpoint_dir: str | None = None,
):
    """Runs the non-IID experiment of FPDGD (Wang's thesis, UQ 2024, ch. 4): a type of
    non-IID data, its IID baseline and the remedies, one FPDGD run per cell
    (``methods.fpdgd.noniid_experiment``).

    Args:
        config: the type (1 intents, 2 labels, 3 clicks, 4 quantity), the remedies
            (fedprox, fedper, sharing) and their settings, and the federation's
            ``FpdgdConfig`` (``n_clients``, ``local_updates`` 0: the type's defaults).
        train: the training split (Types 2-4), or a ``noniid.MultiIntentDataset``
            (Type 1 and Type 4 mixed with it; ``test`` is then not used).
        test: the test split.
        progress: called as ``progress(cell_name, rounds_done, rounds_total, seconds)``
            after every chunk of every cell.
        checkpoint_dir: a folder where every cell saves its state after every chunk; a
            run started again with the same folder resumes from it (the files stay).

    Returns:
        A ``noniid_experiment.NoniidResult``: ``cells`` (each cell's name, FPDGD config,
        data, client plan and description) and ``results[name]``, each cell's
        ``RunResult``.

    Example::

        config = foltr_jax.NoniidConfig(
            federation=foltr_jax.FpdgdConfig(n_clients=3, rounds=4, n_runs=2),
            type=3, remedies=("fedprox",), prox_mu=(0.1,))  # 3 CCM clients
        outcome = foltr_jax.run_noniid(config, train, test)
        {name: r.offline_ndcg[:, -1] for name, r in outcome.results.items()}
    """
    from foltr_jax.methods.fpdgd import noniid_experiment

    if not isinstance(train, noniid.MultiIntentDataset):
        _check_splits(train, test if test is not None else train)
    plan = noniid_experiment.plan_cells(config, train, test)
    return noniid_experiment.run_cells(plan, progress=progress, checkpoint_dir=checkpoint_dir)


def _run_fpdgd(config, train, test, *, progress=None, checkpoint=None):
    return run_fpdgd(config, train, test, progress=progress, checkpoint=checkpoint)


engine.register_method(
    "fpdgd",
    FpdgdConfig,
    _run_fpdgd,
    "FPDGD (Wang et al. 2021)",
    internal=("top_k", "aggregation", "display_groups"),
)
engine.register_method(
    "foltr_es", FoltrEsConfig, run_foltr_es, "FOLtR-ES (Kharitonov 2019)", internal=("top_k",)
)
engine.register_method("fedips", FedIpsConfig, run_fedips, "FedIPS (Li & Ouyang)")

__all__ = [
    "ClientPlan",
    "ConfigError",
    "FedIpsConfig",
    "FoltrEsConfig",
    "FpdgdConfig",
    "NoniidConfig",
    "RunResult",
    "Setting",
    "UnlearningConfig",
    "aggregators",
    "attacks",
    "click_models",
    "data",
    "engine",
    "metrics",
    "noniid",
    "rankers",
    "run_fedips",
    "run_foltr_es",
    "run_fpdgd",
    "run_noniid",
    "run_unlearning",
]
