"""The FedIPS paper's Figures 1-2."""

from __future__ import annotations

from experiments.lib.paper_figures.structure import (
    COLOURS,
    PURPLES,
    PaperFigure,
    _line,
    _number,
    _panel,
    colour_for,
)


def fig1(pool, recipe):
    gammas = sorted({float(s.run.split("_")[0][5:]) for s in pool.find(prefix="gamma")})
    full_information = pool.one(run="lambda_linear")
    dataset = pool.datasets[0] if pool.datasets else ""

    def panel(g):
        out = []
        for run, name, style in (
            (f"gamma{g}_known", "FedIPS", "-"),
            (f"gamma{g}_none", "FedAvg", "--"),
        ):
            for s in pool.find(run=run):
                out.append(_line(s, name, COLOURS[name], style))
        out.append(_line(full_information, "λLinear", "#000000", ":", constant=True))
        return _panel(f"γ = {_number(g)}", out)

    return [
        PaperFigure(
            "Figure 1",
            "NDCG@5 of FedIPS, FedAvg and λLinear (its final NDCG@5) by position bias γ "
            "(shaded: standard deviation; the paper shades the standard error).",
            [dataset],
            [f"γ = {_number(g)}" for g in gammas],
            [[panel(g) for g in gammas]],
            ylabel="NDCG@5",
            xlabel="rounds",
        )
    ], []


def fig2(pool, recipe):
    users = sorted(int(s.run[5:]) for s in pool.series if s.run.startswith("users"))
    left = [
        _line(pool.one(run=f"users{u}"), f"|U| = {u}", PURPLES[i % 5], "-", "os^vD"[i % 5])
        for i, u in enumerate(users)
    ]
    right = []
    for p, style in (("estimated", "-"), ("known", "--"), ("none", ":")):
        s = pool.one(run=f"estimated_{p}")
        right.append(_line(s, s and s.run_label, s and colour_for(s.run_label), style))
    return [
        PaperFigure(
            "Figure 2",
            "Left: impact of the number of clients |U| on FedIPS. Right: estimated IPS.",
            [pool.datasets[0] if pool.datasets else ""],
            ["number of clients |U|", "estimated IPS"],
            [[_panel("FedIPS, |U|", left), _panel("estimated IPS", right)]],
            ylabel="NDCG@5",
            xlabel="rounds",
        )
    ], []
