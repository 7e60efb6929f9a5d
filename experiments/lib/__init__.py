"""The library half of experiments/: what the binaries (``python -m experiments.<name>``)
share and what reads their results back.

shared_flags (the flags every binary shares, and the configs and datasets built from
them), distributed (--distributed: joining the processes, who writes), output (the claimed
--output_dir as the flags decide it), results and provenance (results.json as a binary writes
it: foltr_jax.engine.results_files with the binary's command line and flags), series (results.json files -> labelled Series), tables,
statistics and figures (summaries, t-tests, Markdown/LaTeX tables, curves; matplotlib and
scipy: the report extra), paper_figures (the papers' figures panel for panel), recipes (the
run catalogue, one module per paper: the batch recipes and the claims' runs), runs (running
them), claims (the papers' claims and their checks), cli (one-line errors, progress),
config_flags (absl flags from config dataclasses), program (every binary's main) and
plugins (--plugin).
"""
