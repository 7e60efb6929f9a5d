#!/usr/bin/env bash
# The GPU figures of the benchmark suite, as one bounded script for a lent accelerator.
# Usage: OUT=folder [SECTIONS=million,groups,profile] bash experiments/gpu_check.sh
# Sections run in the order named. The defaults are meant to fit 10 minutes on one H200
# (groups, million and profile took 405 s there on 2026-11-28: 160, 65 and 176 s):
#   million:    10^6 linear clients in one chunk and 10^6 neural clients in chunks of 100,000,
#               10 rounds each, evaluation every 10th round (the 20M / 5M interactions/s goals)
#   groups:     the whole round (profile_round --nostages) at 10^6 linear lanes with 4, 8,
#               16 and 32 display groups and at 10^5 neural lanes with 4 and 16, with each
#               chunk's first call (compile): 16 is the accelerators' default
#               (foltr_jax.engine.config.DISPLAY_GROUPS); on the H200, 30.2M linear interactions/s
#               at 16, 34.0M at 32; neural 7.07M at 16, 6.90M at 32
#   profile:    experiments/profile_round per stage (best wall, XLA's bytes, bandwidth against
#               the card's peak: H200 4,800 GB/s, else the H100's 3,350) at 10^6 linear lanes
#               and 10^5 neural lanes (a neural lane holds 8,832 parameters: 10^6 of them in
#               one step would be 35 GB), with a jax.profiler trace of whole rounds under
#               $OUT/trace_* (with TRACE=1)
# Longer, on request:
#   grid:       paper_budget for poisoning_figs2_4 (the full grid, 50 rounds measured;
#               5 minutes a fold on the H200)
#   suite:      the README's GPU command (10,000 and 1,000,000 clients, every variant)
#   unchunked:  linear at 1,000,000 clients in one chunk, plain and DP
#   eval_every: linear at 1,000,000 clients in one chunk and neural in chunks of 20,000,
#               10 rounds, offline evaluation every round against every 10th (--eval_every)
# Writes suite JSON files and a log under $OUT.
set -uo pipefail
OUT=${OUT:-results/gpu_check}
SECTIONS=${SECTIONS:-million,groups,profile}
TRACE=${TRACE:-0}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}
DATA="--synthetic_queries=1000 --synthetic_features=136 --synthetic_docs_per_query=120"
# The card's memory bandwidth (GB/s) for profile_round's bandwidth column.
case "$(nvidia-smi -L 2>/dev/null)" in
  *H200*) PEAK_GBPS=4800 ;;
  *) PEAK_GBPS=3350 ;;
esac

million() {
  for case in "linear 0" "neural 100000"; do
    set -- $case
    echo "== $1, 1,000,000 clients, client_chunk=$2, 10 rounds, eval_every=10 =="
    # shellcheck disable=SC2086
    timeout 150 python3 -m experiments.benchmark $DATA --n_clients=1000000 --client_chunk="$2" \
      --local_updates=2 --rounds=10 --chunk_rounds=10 --ranker="$1" --window_scoring=vmap \
      --eval_every=10 --repeats=2 | tail -n 2 | cut -c1-400
  done
}

groups() {
  for case in "linear 1000000 4" "linear 1000000 8" "linear 1000000 16" "linear 1000000 32" \
    "neural 100000 4" "neural 100000 16"; do
    set -- $case
    echo "== whole round: $1, $2 lanes, $3 display groups =="
    # shellcheck disable=SC2086
    timeout 90 python3 -m experiments.profile_round $DATA --n_clients="$2" --local_updates=2 \
      --rounds=5 --ranker="$1" --window_scoring=vmap --display_groups="$3" --round_reps=3 \
      --nostages | tail -n 2 | cut -c1-400
  done
}

grid() {
  echo "== paper_budget: poisoning_figs2_4, 50 rounds measured in chunks of 25 =="
  timeout 180 python3 -m experiments.paper_budget --recipes=poisoning_figs2_4 \
    --measure_chunk_rounds=25 --output="$OUT/paper_budget.json"
}

profile() {
  for case in "linear 1000000" "neural 100000"; do
    set -- $case
    echo "== profile: $1, $2 clients (one step's lanes at once), B = 2 =="
    trace=""; [ "$TRACE" = 1 ] && trace="--trace_dir=$OUT/trace_$1"
    # shellcheck disable=SC2086
    timeout 150 python3 -m experiments.profile_round $DATA --n_clients="$2" --local_updates=2 \
      --rounds=5 --ranker="$1" --window_scoring=vmap --reps=10 --round_reps=3 \
      --cost_analysis --peak_gbps="$PEAK_GBPS" $trace
  done
}

suite() {
  echo "== suite (README's GPU command) =="
  timeout 420 python3 -m experiments.benchmark --suite --suite_clients=10000,1000000 \
    --window_scoring=vmap --suite_output="$OUT/suite.json"
}

unchunked() {
  echo "== linear at 1,000,000 clients, one chunk (no client chunking) =="
  timeout 150 python3 -m experiments.benchmark --suite --suite_clients=1000000 \
    --suite_rankers=linear --suite_variants=plain,dp --suite_client_chunk=2000000 \
    --window_scoring=vmap --suite_output="$OUT/suite_unchunked.json"
}

eval_every() {
  for case in "linear 0 1" "linear 0 10" "linear 0 10 dp" "neural 20000 1" "neural 20000 10"; do
    set -- $case
    extra=""; [ "${4:-}" = dp ] && extra="--epsilon=4.5 --sensitivity=5"
    echo "== $1, 1,000,000 clients, client_chunk=$2, 10 rounds, eval_every=$3 ${4:-plain} =="
    # shellcheck disable=SC2086
    timeout 120 python3 -m experiments.benchmark $DATA --n_clients=1000000 --client_chunk="$2" \
      --local_updates=2 --rounds=10 --chunk_rounds=10 --ranker="$1" --window_scoring=vmap \
      --eval_every="$3" --repeats=2 $extra | tail -n 2 | cut -c1-400
  done
}

{
  nvidia-smi -L
  python3 -c "import jax; print('jax', jax.__version__, jax.devices())"
  for section in ${SECTIONS//,/ }; do
    case "$section" in
      million | groups | grid | profile | suite | unchunked | eval_every)
        start=$SECONDS; "$section"; echo "-- $section: $((SECONDS - start)) s" ;;
      *) echo "gpu_check.sh: unknown section '$section' (million, groups, grid, profile, suite, unchunked, eval_every)" ;;
    esac
  done
} 2>&1 | tee "$OUT/log.txt"
