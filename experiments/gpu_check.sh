#!/usr/bin/env bash
# The GPU figures of the benchmark suite, as one bounded script for a lent accelerator.
# Usage: OUT=folder [SECTIONS=million,profile] bash experiments/gpu_check.sh
# The default sections (million, profile) take about 10 minutes on one H100:
#   million:    10^6 linear clients in one chunk and 10^6 neural clients in chunks of 20,000,
#               10 rounds each, evaluation every 10th round (issue 28's 20M / 5M targets)
#   profile:    experiments/profile_round per stage (best wall, XLA's bytes, bandwidth against
#               the H100's 3,350 GB/s) at 10^6 linear lanes and 10^5 neural lanes (a neural
#               lane holds 8,832 parameters: 10^6 of them in one step would be 35 GB), with a
#               jax.profiler trace of whole rounds under $OUT/trace_*
# Longer, on request:
#   suite:      the README's GPU command (10,000 and 1,000,000 clients, every variant)
#   unchunked:  linear at 1,000,000 clients in one chunk, plain and DP
#   eval_every: linear at 1,000,000 clients in one chunk and neural in chunks of 20,000,
#               10 rounds, offline evaluation every round against every 10th (--eval_every)
# Writes suite JSON files and a log under $OUT.
set -uo pipefail
OUT=${OUT:-results/gpu_check}
SECTIONS=${SECTIONS:-million,profile}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}
DATA="--synthetic_queries=1000 --synthetic_features=136 --synthetic_docs_per_query=120"
wants() { [[ ",$SECTIONS," == *",$1,"* ]]; }
{
  nvidia-smi -L
  python3 -c "import jax; print('jax', jax.__version__, jax.devices())"
  if wants million; then
    for case in "linear 0" "neural 20000"; do
      set -- $case
      echo "== $1, 1,000,000 clients, client_chunk=$2, 10 rounds, eval_every=10 =="
      # shellcheck disable=SC2086
      timeout 150 python3 -m experiments.benchmark $DATA --n_clients=1000000 --client_chunk="$2" \
        --local_updates=2 --rounds=10 --chunk_rounds=10 --ranker="$1" --window_scoring=vmap \
        --eval_every=10 --repeats=2 | tail -n 2 | cut -c1-400
    done
  fi
  if wants profile; then
    for case in "linear 1000000" "neural 100000"; do
      set -- $case
      echo "== profile: $1, $2 clients (one step's lanes at once), B = 2 =="
      # shellcheck disable=SC2086
      timeout 150 python3 -m experiments.profile_round $DATA --n_clients="$2" --local_updates=2 \
        --rounds=5 --ranker="$1" --window_scoring=vmap --reps=10 --round_reps=3 \
        --cost_analysis --trace_dir="$OUT/trace_$1"
    done
  fi
  if wants suite; then
    echo "== suite (README's GPU command) =="
    timeout 420 python3 -m experiments.benchmark --suite --suite_clients=10000,1000000 \
      --window_scoring=vmap --suite_output="$OUT/suite.json"
  fi
  if wants unchunked; then
    echo "== linear at 1,000,000 clients, one chunk (no client chunking) =="
    timeout 150 python3 -m experiments.benchmark --suite --suite_clients=1000000 \
      --suite_rankers=linear --suite_variants=plain,dp --suite_client_chunk=2000000 \
      --window_scoring=vmap --suite_output="$OUT/suite_unchunked.json"
  fi
  if wants eval_every; then
    for case in "linear 0 1" "linear 0 10" "linear 0 10 dp" "neural 20000 1" "neural 20000 10"; do
      set -- $case
      extra=""; [ "${4:-}" = dp ] && extra="--epsilon=4.5 --sensitivity=5"
      echo "== $1, 1,000,000 clients, client_chunk=$2, 10 rounds, eval_every=$3 ${4:-plain} =="
      # shellcheck disable=SC2086
      timeout 120 python3 -m experiments.benchmark $DATA --n_clients=1000000 --client_chunk="$2" \
        --local_updates=2 --rounds=10 --chunk_rounds=10 --ranker="$1" --window_scoring=vmap \
        --eval_every="$3" --repeats=2 $extra | tail -n 2 | cut -c1-400
    done
  fi
} 2>&1 | tee "$OUT/log.txt"
