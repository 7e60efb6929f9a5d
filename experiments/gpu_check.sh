#!/usr/bin/env bash
# The GPU figure of the benchmark suite, as one bounded script for a lent accelerator.
# Usage: OUT=folder bash experiments/gpu_check.sh   (writes suite JSON and a log under $OUT)
set -uo pipefail
OUT=${OUT:-results/gpu_check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}
{
  nvidia-smi -L
  python3 -c "import jax; print('jax', jax.__version__, jax.devices())"
  echo "== suite (README's GPU command) =="
  timeout 420 python3 -m experiments.benchmark --suite --suite_clients=10000,1000000 \
    --window_scoring=vmap --suite_output="$OUT/suite.json"
  echo "== linear at 1,000,000 clients, one chunk (no client chunking) =="
  timeout 150 python3 -m experiments.benchmark --suite --suite_clients=1000000 \
    --suite_rankers=linear --suite_variants=plain,dp --suite_client_chunk=2000000 \
    --window_scoring=vmap --suite_output="$OUT/suite_unchunked.json"
} 2>&1 | tee "$OUT/log.txt"
