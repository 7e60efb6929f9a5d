"""``--help`` a person can read: a binary's flags grouped by what they are about (its own
first, then data, clicks and rankers, federation, privacy, attacks, defences, output, your
code, scale), and the names the ``--plugin`` files on the command line registered.

``program.parse_flags`` prints it for ``--help`` (``-?``, ``--helpshort``); ``--helpfull``
stays absl's full alphabetical list.  The docs' binaries pages group the flags the same way
(``concern``).  Nothing here imports JAX.
"""

from __future__ import annotations

import textwrap

# (title, what it is about, the flags) in the order --help shows them; a flag that is in
# none of them is the binary's own (shown first).
CONCERNS = (
    (
        "Data",
        "the queries and documents",
        (
            "data", "fold_dir", "train_path", "test_path", "data_root", "normalise",
            "cache_dir", "n_grades", "synthetic_queries", "synthetic_test_queries",
            "synthetic_features", "synthetic_docs_per_query", "synthetic_seed",
            "synthetic_intents", "intent_files",
        ),
    ),
    (
        "Clicks and rankers",
        "who clicks what, and the model the clients learn",
        ("click_model", "click_models", "ranker", "learning_rate"),
    ),
    (
        "Federation",
        "clients, rounds, repetitions and the server's update",
        (
            "n_clients", "local_updates", "rounds", "n_runs", "seed", "eval_every",
            "server_optimizer", "server_learning_rate", "centralised", "centralised_form",
        ),
    ),
    (
        "Privacy",
        "differential privacy of the clients' updates",
        ("epsilon", "sensitivity", "privacy_grid", "privacy_noise", "clip_factor", "privacy_p"),
    ),
    (
        "Attacks",
        "malicious clients",
        ("attack", "n_malicious", "malicious_counts"),
    ),
    (
        "Defences",
        "the server's aggregation rule",
        ("aggregator", "aggregators", "krum_squared_distances"),
    ),
    (
        "Output",
        "where results go, and resuming",
        ("output_dir", "results_dir", "checkpoint"),
    ),
    (
        "Your code",
        "aggregators, attacks, click models, rankers, methods and recipes of your own",
        ("plugin",),
    ),
    (
        "Scale and speed",
        (
            "devices, processes, memory and compilation; the results do not depend on them "
            "(beyond the order of float32 sums)"
        ),
        (
            "n_devices", "distributed", "distributed_timeout", "chunk_rounds", "client_chunk",
            "window_scoring", "display_groups", "jobs", "compile_cache",
        ),
    ),
)  # fmt: skip

OWN = "Its own"
_CONCERN_OF = {name: title for title, _, names in CONCERNS for name in names}


def concern(flag_name: str) -> str:
    """The title of the concern ``flag_name`` belongs to (``OWN`` for a binary's own)."""
    return _CONCERN_OF.get(flag_name, OWN)


def grouped(flag_list) -> list:
    """[(title, about, [flags])] of ``flag_list`` (absl Flag objects), the binary's own
    first, then CONCERNS in order, each in the order CONCERNS names them (its own: by name);
    empty groups left out."""
    flag_list = list({flag.name: flag for flag in flag_list}.values())
    own = sorted((f for f in flag_list if concern(f.name) == OWN), key=lambda f: f.name)
    groups = [(OWN, "what this binary alone takes", own)] if own else []
    for title, about, names in CONCERNS:
        found = [f for name in names for f in flag_list if f.name == name]
        if found:
            groups.append((title, about, found))
    return groups


def _flag_text(flag, width: int = 80) -> list:
    """absl's layout of one flag: '  --name: help' wrapped, then '(default: ...)'."""
    name = f"--[no]{flag.name}" if flag.boolean else f"--{flag.name}"
    help_text = " ".join((flag.help or "").split())
    lines = textwrap.wrap(
        f"{name}: {help_text}", width, initial_indent="  ", subsequent_indent="    "
    )
    lines.append(f"    (default: {flag.default_as_str})")
    return lines


def render(doc: str, flag_list, plugin_names: list | None = None) -> str:
    """The --help text: ``doc`` (the binary's docstring), the names ``plugin_names``
    registered ([(plugin, {kind: [(name, summary)]})]), then the flags by concern."""
    lines = [doc.strip("\n"), ""] if doc.strip() else []
    for plugin, kinds in plugin_names or ():
        lines.append(f"Registered by --plugin={plugin} (names like the built-in ones):")
        if not kinds:
            lines.append("  nothing")
        for kind, entries in kinds.items():
            for name, summary in entries:
                lines += textwrap.wrap(
                    f"{kind} {name}: {summary}", 80, initial_indent="  ",
                    subsequent_indent="    ",
                )  # fmt: skip
        lines.append("")
    lines.append("Flags by concern (--helpfull: every flag, absl's own too, in one list):")
    for title, about, found in grouped(flag_list):
        lines += ["", *textwrap.wrap(f"{title}: {about}", 80, subsequent_indent="  ")]
        for flag in found:
            lines += _flag_text(flag)
    return "\n".join(lines) + "\n"


HELP_FLAGS = ("help", "helpshort", "?")


def asked(argv) -> bool:
    """Whether ``argv`` asks for --help (``--help``, ``-help``, ``-?``, ``--helpshort``; a
    ``--help=false`` does not), before a lone ``--``."""
    for arg in argv[1:]:
        if arg == "--":
            return False
        name, _, value = arg.lstrip("-").partition("=")
        if arg.startswith("-") and name in HELP_FLAGS and value.lower() not in ("false", "0"):
            return True
    return False
