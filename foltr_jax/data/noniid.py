"""Non-IID data across FOLtR clients (thesis ch. 4): the data layer's part.

Every type is a data transformation feeding the same vectorised FPDGD round
(``client_plan.ClientPlan``): per-client datasets are concatenated into one flat
training set and each client samples from its own query list.

* Type 1, document preference (§4.3.1): one intent per client; the training set is
  the intents' label copies concatenated, client c in run r holds, for query q,
  intent π_r(q)[c] (a per-query reshuffle of intents, one per run).  IID baseline:
  one copy whose label is the largest over intents (relevant if relevant for any).
  No held-out test set: offline nDCG on the training queries under every intent
  (the mean over (query, intent) pairs with a relevant document), online nDCG of a
  shown list averaged over the intents.  Intents: read from files, or made by
  :func:`synthetic_multi_intent` / :func:`topical_intents` (intents splitting shared
  topical candidates, like the intent-change collection) or :func:`feature_group_intents`
  (each intent its own signal, a disjoint feature group; tried on the MSLR
  excerpt it narrows the IID gap rather than widening it).
* Type 2, label distribution (§4.4.1): k-combinations of the grades assigned to
  clients, each grade's query-document pairs split equally among its clients.
* Type 3, click preference (§4.5.1): a click model per client; IID: each interaction
  draws one of them.
* Type 4, data quantity (§4.5.2): per-client numbers of local interactions.

Remedies (§4.3.3, §4.4.3): FedProx and FedPer (``client_plan.ClientPlan``), data sharing
(:func:`share_queries` here, and FPDGD's ``federation.warm_up`` on the shared queries).
One concern, the non-IID data of the four types, in one module.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import pathlib
import re

import numpy as np

from foltr_jax import data
from foltr_jax.core.registry import one_of
from foltr_jax.data import DatasetError, LetorFormatError, RankingDataset, read_letor

CCM_CLIENTS = ("perfect", "navigational", "informational")  # §4.5.1, 3 clients
PBM_CLIENTS = ("pbm:0", "pbm:0.5", "pbm:1", "pbm:1.5", "pbm:2")  # §4.5.1, 5 clients
TYPE4_STEPS = (1, 3, 5, 7, 9)  # §4.5.2: queries per client per round, 5 clients


class PartitionError(ValueError):
    """A split that leaves a client without data; ``client`` names it."""

    def __init__(self, client: int, message: str):
        super().__init__(message)
        self.client = client


# ---------------------------------------------------------------------------
# Type 1: multi-intent data
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class MultiIntentDataset:
    """One set of queries and documents with a relevance label per intent.

    ``base`` holds the features (its labels are not used); ``intent_labels`` is
    int32 [n_intents, n_docs].
    """

    base: RankingDataset
    intent_labels: np.ndarray

    @property
    def n_intents(self) -> int:
        return int(self.intent_labels.shape[0])

    def with_labels(self, labels, name: str = "") -> RankingDataset:
        return dataclasses.replace(
            self.base, labels=np.asarray(labels, np.int32), name=name or self.base.name
        )

    def merged(self) -> RankingDataset:
        """The IID baseline's data (§4.3.1): a document's largest grade over intents."""
        return self.with_labels(self.intent_labels.max(axis=0), f"{self.base.name}-merged")

    def stacked(self) -> RankingDataset:
        """Every intent's copy of the data, intent-major (query i·n_queries + q)."""
        base = self.base
        return RankingDataset(
            features=np.tile(base.features, (self.n_intents, 1)),
            labels=self.intent_labels.reshape(-1),
            query_offsets=np.concatenate(
                [base.query_offsets + i * base.n_docs for i in range(self.n_intents)]
            ),
            query_lengths=np.tile(base.query_lengths, self.n_intents),
            query_ids=np.concatenate(
                [np.char.add(base.query_ids, f"#intent{i}") for i in range(self.n_intents)]
            ),
            name=f"{base.name}-intents",
        )


def read_multi_intent(letor_path, intent_paths, **letor_options) -> MultiIntentDataset:
    """Reads a LETOR file and one relevance file per intent.

    Intent file format: one judgement per line, ``<qid> <doc> <label>`` separated by
    spaces or tabs, where ``qid`` is a query id of the LETOR file (compared as bytes, as
    the LETOR reader keeps them), ``doc`` the 0-based position of the document within
    that query's block, ``label`` an integer grade ≥ 0; ``doc`` and ``label`` are ASCII
    digits only, as the LETOR reader reads labels (no sign, ``_``, or other scripts'
    digits); blank lines and lines starting with ``#`` are skipped; documents without a
    line get label 0.

    Raises LetorFormatError ``"<path>:<line>: <problem>"`` for a wrong number of
    fields, a value that is not such an integer or is negative, an unknown query id, a
    document position out of range, a label above ``data.MAX_LABEL``, or a pair judged
    twice; DatasetError for a missing, unreadable or binary file (gzip is read), a file
    without any judgement, or no intent files.
    """
    base = read_letor(letor_path, **letor_options)
    paths = [pathlib.Path(p) for p in intent_paths]
    if not paths:
        raise DatasetError("no intent files given")
    query_of = {qid: i for i, qid in enumerate(base.query_ids.tolist())}
    labels = np.zeros((len(paths), base.n_docs), np.int32)
    for i, path in enumerate(paths):
        seen: dict[tuple, int] = {}  # (query, document): the line that labelled it
        stream = data.open_text(path)  # DatasetError for a missing, binary, ... file
        with stream, _reading(path):
            for line_no, line in enumerate(stream, 1):
                text = line.strip(_ASCII_SPACE)
                if not text or text.startswith("#"):
                    continue
                where = f"{path}:{line_no}"
                fields = _FIELD_SPLIT.split(text)
                if len(fields) != 3:
                    raise LetorFormatError(
                        f"{where}: expected '<qid> <doc> <label>', got {len(fields)} field(s)"
                    )
                qid, doc, label = fields
                if qid not in query_of:
                    raise LetorFormatError(f"{where}: unknown query id {qid!r}")
                if _NEGATIVE.fullmatch(label) and _DIGITS.fullmatch(doc):
                    raise LetorFormatError(f"{where}: label must be >= 0, got {label}")
                if not (_DIGITS.fullmatch(doc) and _DIGITS.fullmatch(label)):
                    raise LetorFormatError(
                        f"{where}: document position and label must be integers (ASCII "
                        f"digits), got {doc!r} and {label!r}"
                    )
                doc, label = int(doc), int(label)
                q = query_of[qid]
                if not 0 <= doc < base.query_lengths[q]:
                    raise LetorFormatError(
                        f"{where}: document {doc} out of range for query {qid!r} "
                        f"({base.query_lengths[q]} documents)"
                    )
                if label > data.MAX_LABEL:
                    raise LetorFormatError(
                        f"{where}: label {label} is above {data.MAX_LABEL}, the largest grade read"
                    )
                if (q, doc) in seen:
                    raise LetorFormatError(
                        f"{where}: query {qid!r} document {doc} already judged on line "
                        f"{seen[(q, doc)]}"
                    )
                seen[(q, doc)] = line_no
                labels[i, base.query_offsets[q] + doc] = label
        if not seen:
            raise DatasetError(
                f"{path}: no judgement ('<qid> <doc> <label>' lines); an intent file lists "
                "the relevant documents of its intent"
            )
    return MultiIntentDataset(base, labels)


# What an intent file's line is made of: the LETOR reader's separators and digits.
_ASCII_SPACE = " \t\r\n\f\v"
_FIELD_SPLIT = re.compile(r"[ \t\r\f\v]+", re.ASCII)
_DIGITS = re.compile(r"[0-9]+", re.ASCII)
_NEGATIVE = re.compile(r"-[0-9]+", re.ASCII)


@contextlib.contextmanager
def _reading(path):
    """Turns a read error of ``path`` (unreadable, a broken gzip stream) into one
    DatasetError line."""
    try:
        yield
    except data.READ_ERRORS as error:
        raise data.read_error(path, error) from None


def synthetic_multi_intent(
    seed=0,
    *,
    n_queries: int = 100,
    n_features: int = 32,
    mean_docs_per_query: float = 40,
    n_intents: int = 4,
    n_grades: int = 2,
    relevant_fraction: float = 0.05,
) -> MultiIntentDataset:
    """Synthetic data like the intent-change collection (thesis §4.3.1; Zhuang and
    Zuccon, SIGIR 2021): one set of query-document features, a sparse label per intent.

    The features and a shared topical grade g come from ``data.synthetic_dataset``
    (5 grades).  In a query of n documents the best ``max(n_intents, round(n_intents ·
    relevant_fraction · n))`` by g (plus noise) are the topical candidates; every
    candidate is relevant to exactly one intent, the one whose direction ``v_qk`` it
    matches best (``argmax_k z(x · v_qk) + 0.3 ε``, z standardised within the query);
    ``v_qk`` is drawn for every (query, intent) pair, as the collection's intents are
    independent across queries (the thesis reshuffles their numbers per query).  So
    each intent holds about ``relevant_fraction`` of the documents, the intents'
    relevant sets are disjoint (they agree that relevant documents are topical and
    disagree about which ones), and the IID baseline's merged labels (relevant for any
    intent) are n_intents times denser.  Binary by default, as in the collection; with
    more grades an intent's best matches get the higher grades.
    """
    from foltr_jax import data

    if not 0.0 < relevant_fraction < 1.0:
        raise ValueError(f"relevant_fraction must be in (0, 1), got {relevant_fraction!r}")
    base = data.synthetic_dataset(
        seed,
        n_queries=n_queries,
        n_features=n_features,
        mean_docs_per_query=mean_docs_per_query,
        n_grades=5,
        name="synthetic-intents",
    )
    return topical_intents(
        base, seed, n_intents=n_intents, n_grades=n_grades, relevant_fraction=relevant_fraction
    )


def topical_intents(
    base: RankingDataset,
    seed=0,
    *,
    n_intents: int = 4,
    n_grades: int = 2,
    relevant_fraction: float = 0.05,
) -> MultiIntentDataset:
    """Intents that split one set of topical candidates (:func:`synthetic_multi_intent`'s
    construction on any dataset whose labels are the shared topical grade g, e.g. an
    MSLR fold): the candidates are a query's best documents by g (plus noise), each
    relevant to the intent whose per-(query, intent) random direction it matches best."""
    if not 0.0 < relevant_fraction < 1.0:
        raise ValueError(f"relevant_fraction must be in (0, 1), got {relevant_fraction!r}")
    n_features = int(base.features.shape[1])
    rng = np.random.default_rng([seed, 1])
    x = base.features.astype(np.float64)
    q_of_doc = np.repeat(np.arange(base.n_queries), base.query_lengths)
    grade = base.labels.astype(np.float64)
    topical = (grade - grade.mean()) / (grade.std() or 1.0)
    lengths = base.query_lengths.astype(np.int64)
    start = np.repeat(base.query_offsets.astype(np.int64), lengths)

    def rank_in_query(score):  # 0 = the query's best document
        order = np.lexsort((-score, q_of_doc))
        rank = np.empty(base.n_docs, np.int64)
        rank[order] = np.arange(base.n_docs) - start[order]
        return rank

    # Topical candidates: the query's best documents by its shared grade (plus noise).
    n_candidates = np.maximum(n_intents, np.rint(n_intents * relevant_fraction * lengths))
    candidate = (
        rank_in_query(topical + 0.3 * rng.standard_normal(base.n_docs)) < (n_candidates[q_of_doc])
    )
    # Every candidate serves the intent whose own direction v_qk it matches best.
    directions = rng.normal(size=(n_intents, base.n_queries, n_features))
    own = np.einsum("df,kdf->kd", x, directions[:, q_of_doc])
    # standardised within every query, so that every intent gets its share of a query
    mean = (np.add.reduceat(own, base.query_offsets, axis=1) / lengths)[:, q_of_doc]
    own = own - mean
    sd = np.sqrt(np.add.reduceat(own**2, base.query_offsets, axis=1) / lengths)[:, q_of_doc]
    own = own / np.where(sd > 0, sd, 1.0)
    own = own + 0.3 * rng.standard_normal(own.shape)
    serves = own.argmax(axis=0)
    labels = []
    for k in range(n_intents):
        relevant = candidate & (serves == k)
        # the best of an intent's relevant documents (by own score) get the higher grades
        rank = rank_in_query(np.where(relevant, own[k], -np.inf))
        n_rel = np.bincount(q_of_doc, relevant, minlength=base.n_queries)[q_of_doc]
        grade_of = n_grades - 1 - (rank * (n_grades - 1)) // np.maximum(n_rel, 1)
        labels.append(np.where(relevant, grade_of, 0))
    return MultiIntentDataset(base, np.asarray(labels, np.int32))


# MSLR-WEB10K's 136 features: 25 kinds (covered query terms, TF, IDF, TF-IDF, BM25, LMIR,
# ...) each on 5 streams, feature 5·i + s + 1 (1-based) being kind i on stream s, then 11
# document-level features (PageRank, URL length, ...).  0-based column indices per stream.
MSLR_STREAM_NAMES = ("body", "anchor", "title", "url", "whole document")
MSLR_STREAMS = tuple(tuple(range(s, 125, 5)) for s in range(5))


def feature_group_intents(
    base: RankingDataset,
    seed=0,
    *,
    n_intents: int | None = None,
    groups=None,
    relevant_fraction: float = 0.05,
    n_grades: int = 2,
    noise: float = 0.3,
) -> MultiIntentDataset:
    """Intents whose relevant documents come from distinct signals: intent k's relevance
    is its own ranking function over its own feature group.

    ``groups`` are disjoint lists of feature columns, one per intent (e.g. MSLR's streams,
    :data:`MSLR_STREAMS`); by default the features are split at random (seeded) into
    ``n_intents`` (4) groups of equal size.  Intent k scores every document by ``z(x[G_k]
    · u_k) + noise · ε`` (``u_k`` ~ N(0, I), one direction for all queries; ``z``
    standardised within the query) and its best ``max(1, round(relevant_fraction · n))``
    documents of a query of n are relevant, the best of them with the higher grades when
    ``n_grades`` > 2.  The base labels are not used.  Unlike
    :func:`synthetic_multi_intent`, whose intents split one shared set of topical
    candidates, an intent's relevant documents here say nothing about another's: the
    intents share no signal (their relevant sets overlap only by chance).
    """
    n_features = int(base.features.shape[1])
    rng = np.random.default_rng([seed, 6])
    if groups is None:
        n_intents = 4 if n_intents is None else int(n_intents)
        if not 2 <= n_intents <= n_features:
            raise ValueError(f"n_intents must be in [2, {n_features}], got {n_intents}")
        groups = np.array_split(rng.permutation(n_features), n_intents)
    groups = [np.asarray(g, np.int64).reshape(-1) for g in groups]
    if n_intents is not None and len(groups) != n_intents:
        raise ValueError(f"{len(groups)} feature groups for n_intents = {n_intents}")
    if len(groups) < 2:
        raise ValueError(f"need at least 2 intents (feature groups), got {len(groups)}")
    every = np.concatenate(groups)
    if any(g.size == 0 for g in groups):
        raise ValueError("every intent needs a non-empty feature group")
    if every.min() < 0 or every.max() >= n_features:
        raise ValueError(f"feature groups must hold columns in [0, {n_features})")
    if np.unique(every).size != every.size:
        raise ValueError("feature groups must be disjoint")
    if not 0.0 < relevant_fraction < 1.0:
        raise ValueError(f"relevant_fraction must be in (0, 1), got {relevant_fraction!r}")
    if n_grades < 2:
        raise ValueError(f"n_grades must be at least 2, got {n_grades}")
    x = base.features.astype(np.float64)
    lengths = base.query_lengths.astype(np.int64)
    q_of_doc = np.repeat(np.arange(base.n_queries), lengths)
    start = np.repeat(base.query_offsets.astype(np.int64), lengths)
    directions = [rng.normal(size=g.size) for g in groups]
    score = np.stack([x[:, g] @ u for g, u in zip(groups, directions)])  # [intents, docs]
    score = _standardise_within_queries(score, base.query_offsets, lengths, q_of_doc)
    score = score + noise * rng.standard_normal(score.shape)
    n_rel = np.maximum(1, np.rint(relevant_fraction * lengths)).astype(np.int64)[q_of_doc]
    labels = []
    for k in range(len(groups)):
        order = np.lexsort((-score[k], q_of_doc))
        rank = np.empty(base.n_docs, np.int64)  # 0 = the query's best document for intent k
        rank[order] = np.arange(base.n_docs) - start[order]
        grade = n_grades - 1 - (rank * (n_grades - 1)) // n_rel
        labels.append(np.where(rank < n_rel, grade, 0))
    return MultiIntentDataset(base, np.asarray(labels, np.int32))


def _standardise_within_queries(values, offsets, lengths, q_of_doc):
    """values [..., n_docs] centred and scaled to unit sd within every query (a constant
    query stays at 0)."""
    mean = (np.add.reduceat(values, offsets, axis=-1) / lengths)[..., q_of_doc]
    values = values - mean
    sd = np.sqrt(np.add.reduceat(values**2, offsets, axis=-1) / lengths)[..., q_of_doc]
    return values / np.where(sd > 1e-12, sd, 1.0)


def write_intent_files(mi: MultiIntentDataset, directory) -> list[pathlib.Path]:
    """Writes one file per intent (``<directory>/intent<k>.txt``, the format
    :func:`read_multi_intent` reads: ``<qid> <doc> <label>`` for every document with a
    label above 0) and returns their paths, e.g. for ``experiments.noniid
    --train_path=... --intent_files=...``."""
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    base = mi.base
    q_of_doc = np.repeat(np.arange(base.n_queries), base.query_lengths)
    position = np.arange(base.n_docs) - np.repeat(base.query_offsets, base.query_lengths)
    paths = []
    for k in range(mi.n_intents):
        rows = np.flatnonzero(mi.intent_labels[k] > 0)
        lines = [
            f"{base.query_ids[q_of_doc[r]]} {position[r]} {mi.intent_labels[k, r]}\n" for r in rows
        ]
        path = directory / f"intent{k}.txt"
        path.write_text(f"# intent {k}: <qid> <doc> <label>\n" + "".join(lines))
        paths.append(path)
    return paths


def intent_queries(mi: MultiIntentDataset, n_runs: int, seed: int) -> np.ndarray:
    """int [n_runs, n_intents, n_queries]: client c's queries in ``mi.stacked()`` per
    run: for query q the copy of intent π_r(q)[c], π_r a per-query random permutation
    (the thesis's 5 intent reshuffles, §4.3.1)."""
    rng = np.random.default_rng([seed, 2])
    nq, n = mi.base.n_queries, mi.n_intents
    perms = np.argsort(rng.random((n_runs, nq, n)), axis=2)  # [runs, q, client] -> intent
    return (perms * nq + np.arange(nq)[None, :, None]).transpose(0, 2, 1)


IID_MEASURES = ("intents", "merged")


def type1_setup(
    mi: MultiIntentDataset, n_runs: int, seed: int, iid: bool, iid_measure: str = "intents"
):
    """(train, test, ClientPlan kwargs) of Type 1 (non-IID) or its IID baseline.

    ``iid_measure`` (the IID baseline only): "intents" (default, §4.3.1's text) measures
    it as the non-IID cell is measured, offline and online under every intent's labels;
    "merged" measures it on the merged labels it is trained on, as the public code does
    (its IID clients and test set read the merged judgements, intents/0.txt, while each
    non-IID client is measured under its own intent), which rewards the IID ranker for a
    document relevant to any intent."""
    if iid_measure not in IID_MEASURES:
        raise ValueError(f"iid_measure {one_of(IID_MEASURES, iid_measure)}")
    test = mi.stacked()
    if iid and iid_measure == "merged":
        return mi.merged(), mi.merged(), {}
    if iid:
        return mi.merged(), test, {"online_labels": mi.intent_labels}
    views = np.tile(mi.intent_labels, (1, mi.n_intents))  # every intent on every copy
    return test, test, {"queries": intent_queries(mi, n_runs, seed), "online_labels": views}


# ---------------------------------------------------------------------------
# Type 2: label distribution skew
# ---------------------------------------------------------------------------


def grade_combinations(n_grades: int, grades_per_client: int, n_clients: int, seed: int):
    """The grades each client holds (§4.4.1): all k-combinations of the grades in a
    random order, client c taking combination c mod C(R, k).  ``n_clients`` must be
    a multiple of C(R, k) so every grade's pairs are held."""
    combos = list(itertools.combinations(range(n_grades), grades_per_client))
    if n_clients % len(combos):
        raise ValueError(
            f"n_clients = {n_clients} must be a multiple of C({n_grades}, {grades_per_client}) "
            f"= {len(combos)} (every combination of grades held equally often)"
        )
    order = np.random.default_rng([seed, 3]).permutation(len(combos))
    return [combos[order[c % len(combos)]] for c in range(n_clients)]


def label_partition(
    dataset: RankingDataset, n_clients: int, grades_per_client: int, seed: int, n_grades=None
):
    """Row indices (sorted) of each client's query-document pairs (§4.4.1).

    Each grade's pairs are shuffled and split into equal parts (sizes differing by
    at most one) among the clients holding that grade.  Raises PartitionError
    naming a client left without pairs.
    """
    n_grades = n_grades or int(dataset.max_label) + 1
    holders = grade_combinations(n_grades, grades_per_client, n_clients, seed)
    rng = np.random.default_rng([seed, 4])
    rows: list[list[np.ndarray]] = [[] for _ in range(n_clients)]
    for grade in range(n_grades):
        owners = [c for c in range(n_clients) if grade in holders[c]]
        pairs = rng.permutation(np.flatnonzero(dataset.labels == grade))
        for c, part in zip(owners, np.array_split(pairs, len(owners))):
            rows[c].append(part)
    out = []
    for c in range(n_clients):
        mine = np.sort(np.concatenate(rows[c])) if rows[c] else np.zeros(0, np.int64)
        if mine.size == 0:
            raise PartitionError(
                c, f"client {c} (grades {holders[c]}) gets no query-document pairs"
            )
        out.append(mine)
    return out, holders


def rows_dataset(dataset: RankingDataset, rows: np.ndarray, name: str) -> RankingDataset:
    """The pairs ``rows`` (sorted) grouped by query; queries without pairs are dropped."""
    query_of_row = np.repeat(np.arange(dataset.n_queries), dataset.query_lengths)[rows]
    queries, lengths = np.unique(query_of_row, return_counts=True)
    return RankingDataset(
        features=dataset.features[rows],
        labels=dataset.labels[rows],
        query_offsets=np.cumsum(lengths) - lengths,
        query_lengths=lengths,
        query_ids=dataset.query_ids[queries],
        name=name,
    )


def concatenate(datasets, name: str = "clients"):
    """(one flat dataset, [per dataset: its query indices in the flat one])."""
    flat = RankingDataset(
        features=np.concatenate([d.features for d in datasets]),
        labels=np.concatenate([d.labels for d in datasets]),
        query_offsets=np.cumsum(np.concatenate([d.query_lengths for d in datasets]))
        - np.concatenate([d.query_lengths for d in datasets]),
        query_lengths=np.concatenate([d.query_lengths for d in datasets]),
        query_ids=np.concatenate([d.query_ids for d in datasets]),
        name=name,
    )
    starts = np.cumsum([0] + [d.n_queries for d in datasets])
    return flat, [np.arange(starts[i], starts[i + 1]) for i in range(len(datasets))]


def pad_lists(lists) -> np.ndarray:
    """Query lists as an int [n, max length] array padded with -1."""
    width = max(len(q) for q in lists)
    return np.stack([np.pad(q, (0, width - len(q)), constant_values=-1) for q in lists])


def share_queries(dataset: RankingDataset, fraction: float, seed: int):
    """(shared G, the rest): a random ``fraction`` of the queries (at least one)."""
    n = dataset.n_queries
    count = max(1, round(fraction * n))
    chosen = np.zeros(n, bool)
    chosen[np.random.default_rng([seed, 5]).choice(n, count, replace=False)] = True
    return dataset.subset(chosen), dataset.subset(~chosen)


def type2_setup(
    dataset: RankingDataset,
    n_clients: int,
    grades_per_client: int,
    seed: int,
    shared: RankingDataset | None = None,
):
    """(train, ClientPlan kwargs, grades per client) of Type 2; with ``shared``
    (data sharing) every client also samples from the shared queries."""
    rows, holders = label_partition(dataset, n_clients, grades_per_client, seed)
    parts = [rows_dataset(dataset, r, f"client{c}") for c, r in enumerate(rows)]
    if shared is not None:
        parts.append(shared)
    train, lists = concatenate(parts, f"{dataset.name}-type2")
    if shared is not None:
        lists = [np.concatenate([q, lists[-1]]) for q in lists[:-1]]
    return train, {"queries": pad_lists(lists)}, holders
