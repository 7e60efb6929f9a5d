"""The poisoning paper's Figures 2-4."""

from __future__ import annotations

from experiments.lib.paper_figures.pool import _clicks
from experiments.lib.paper_figures.structure import (
    DEFENCES,
    POISON_NAMES,
    SHARE_COLOURS,
    PaperFigure,
    _click_title,
    _line,
    _panel,
    colour_for,
)


def _share(s) -> int:
    n = s.fields.get("n_clients") or 10
    return round(100 * s.fields.get("m", 0) / n)


def figs2_4(pool, recipe):
    clicks = _clicks(pool)
    counts = sorted({s.fields.get("m", 0) for s in pool.series} - {0})

    def honest(click):
        s = pool.one(panel=click, attack="none", aggregator="fedavg")
        return _line(s, "honest", "#000000", "-")

    def attacked(click, attack, aggregator, style, suffix=""):
        out = []
        for m in counts:
            s = pool.one(panel=click, attack=attack, aggregator=aggregator, m=m)
            if s is not None:
                share = _share(s)
                marker = None if style == "-" else "x"
                label = f"{share}%{suffix}"
                out.append(_line(s, label, SHARE_COLOURS.get(share, "#7f7f7f"), style, marker))
        return out

    columns = [_click_title(c) for c in clicks]
    fig2 = _figure2(clicks, columns, honest, attacked)
    fig3 = _figure3(clicks, columns, honest, attacked)
    assumed = counts[0] if counts else 0
    return [fig2, fig3, _figure4(pool, clicks, columns, assumed)], []


def _figure2(clicks, columns, honest, attacked) -> PaperFigure:
    """Figure 2: data poisoning without and with each defence, one row per defence."""
    return PaperFigure(
        "Figure 2",
        "Offline performance under data poisoning and the defences, attackers "
        "{10%, 20%, 30%, 40%}; solid: no defence, dashed: with the defence.",
        [POISON_NAMES[d] for d in DEFENCES],
        columns,
        [
            [
                _panel(
                    f"{POISON_NAMES[d]}, {_click_title(c)}",
                    [honest(c)]
                    + attacked(c, "data_poisoning", "fedavg", "-", ", no defence")
                    + attacked(c, "data_poisoning", d, "--", ", with the defence"),
                )
                for c in clicks
            ]
            for d in DEFENCES
        ],
    )


def _figure3(clicks, columns, honest, attacked) -> PaperFigure:
    """Figure 3: the model poisoning attacks against each other and data poisoning."""
    fig3_rows = [
        (
            "(a) LIE vs data poisoning",
            lambda c: (
                [honest(c)]
                + attacked(c, "lie", "fedavg", "-", ", LIE")
                + attacked(c, "data_poisoning", "fedavg", "--", ", data poisoning")
            ),
        ),
        (
            "(b) Fang: full vs partial (Krum)",
            lambda c: (
                [honest(c)]
                + attacked(c, "fang_krum_full", "krum", "-", ", full knowledge")
                + attacked(c, "fang_krum_partial", "krum", "--", ", partial knowledge")
            ),
        ),
        (
            "(c) Fang vs data poisoning (Krum)",
            lambda c: (
                [honest(c)]
                + attacked(c, "fang_krum_full", "krum", "-", ", Fang")
                + attacked(c, "data_poisoning", "krum", "--", ", data poisoning")
            ),
        ),
    ]
    return PaperFigure(
        "Figure 3",
        "Offline performance under model poisoning attacks, attackers {10%, 20%, 30%, 40%}.",
        [t for t, _ in fig3_rows],
        columns,
        [
            [_panel(f"{t.split(')')[0]}) {_click_title(c)}", make(c)) for c in clicks]
            for t, make in fig3_rows
        ],
    )


def _figure4(pool, clicks, columns, assumed) -> PaperFigure:
    """Figure 4: the defences deployed without an attack."""

    def fig4(click):
        out = [
            _line(pool.one(panel=click, attack="none", aggregator="fedavg"), "FedAvg", "#000000")
        ]
        for i, d in enumerate(DEFENCES):
            s = pool.one(panel=click, attack="none", aggregator=d, m=assumed)
            out.append(
                _line(
                    s,
                    POISON_NAMES[d],
                    colour_for(POISON_NAMES[d]),
                    ("--", "-.", ":", "--")[i],
                    ("o", "s", "^", "D")[i],
                )
            )
        return _panel(_click_title(click), out)

    return PaperFigure(
        "Figure 4",
        "Offline performance when no attack is present but the defences are deployed "
        f"(each assuming {assumed} of the clients malicious).",
        [""],
        columns,
        [[fig4(c) for c in clicks]],
    )
