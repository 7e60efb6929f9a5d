"""foltr_jax: Federated Online Learning to Rank simulated in JAX.

The Python API: the config objects and one ``run_*`` per method (FPDGD and centralised
PDGD, with non-IID client plans through ``clients=``; FOLtR-ES; FedIPS; the unlearning
protocol), every one on ``engine.run`` and returning its ``RunResult``.

    import foltr_jax
    train, test = foltr_jax.data.synthetic_train_test(seed=0)
    config = foltr_jax.FederationConfig(n_clients=100, local_updates=2, rounds=50)
    result = foltr_jax.run_fpdgd(config, train, test)
    result.offline_ndcg  # [runs, rounds]; [runs, len(result.offline_rounds)] with eval_every > 1

``foltr_jax.aggregators.register`` adds an aggregation rule that every method and
binary can then name (see the README's "Use from Python").
"""

__version__ = "0.1.0"

from foltr_jax import aggregators, attacks, click_models, data, engine, noniid, rankers  # noqa: E402
from foltr_jax.client_plan import ClientPlan  # noqa: E402
from foltr_jax.config import ConfigError, FederationConfig, Setting  # noqa: E402
from foltr_jax.engine import RunResult  # noqa: E402
from foltr_jax.fedips import FedIpsConfig  # noqa: E402
from foltr_jax.foltr_es import FoltrEsConfig  # noqa: E402
from foltr_jax.unlearning import UnlearningConfig  # noqa: E402


def run_fpdgd(
    config: FederationConfig,
    train: data.RankingDataset,
    test: data.RankingDataset,
    settings: list[Setting] | None = None,
    *,
    clients: ClientPlan | None = None,
    progress=None,
    checkpoint: str | None = None,
):
    """FPDGD (or centralised PDGD, see ``config.centralised``): a ``federation.RunResult``.

    ``settings`` are the cells of a grid run in one program (default: the config's
    own); ``clients`` makes the clients differ (non-IID plans and remedies).
    """
    from foltr_jax import federation

    spec, arrays = federation.build(config, train, test, settings, clients=clients)
    result = federation.run(spec, arrays, progress, checkpoint=checkpoint)
    result.cells = tuple(settings) if settings else (config.setting(),)
    return result


def run_foltr_es(
    config: FoltrEsConfig,
    train: data.RankingDataset,
    test: data.RankingDataset,
    *,
    progress=None,
    checkpoint: str | None = None,
):
    """FOLtR-ES (thesis §3.1): a ``foltr_es.RunResult``."""
    from foltr_jax import foltr_es

    spec, arrays = foltr_es.build(config, train, test)
    return foltr_es.run(spec, arrays, progress, checkpoint)


def run_fedips(
    config: FedIpsConfig,
    train: data.RankingDataset,
    test: data.RankingDataset,
    *,
    progress=None,
    checkpoint: str | None = None,
):
    """FedIPS (Li & Ouyang): a ``fedips.FedIpsResult``."""
    from foltr_jax import fedips

    spec, arrays, _ = fedips.build(config, train, test)
    return fedips.run(spec, arrays, progress, checkpoint)


def run_unlearning(
    config: UnlearningConfig,
    train: data.RankingDataset,
    test: data.RankingDataset,
    *,
    progress=None,
):
    """The unlearning paper's protocol (§3-4): trains 10H-0M, 9H-1M (storing the update
    history) and 9H-0M, then replays U(9H-1M) in every cell n′ × Δt × click model: an
    ``unlearning.ProtocolResult`` (the trainings' RunResults by kind, the replay)."""
    from foltr_jax import unlearning

    return unlearning.run_protocol(config, train, test, progress)


def _run_fpdgd(config, train, test, *, progress=None, checkpoint=None):
    return run_fpdgd(config, train, test, progress=progress, checkpoint=checkpoint)


engine.register_method(
    "fpdgd",
    FederationConfig,
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
    "FederationConfig",
    "FoltrEsConfig",
    "RunResult",
    "Setting",
    "UnlearningConfig",
    "aggregators",
    "attacks",
    "click_models",
    "data",
    "engine",
    "noniid",
    "rankers",
    "run_fedips",
    "run_foltr_es",
    "run_fpdgd",
    "run_unlearning",
]
