#!/usr/bin/env bash
# memory_efficient vs full, side by side: full mode, memory_efficient over the
# pread block cache (1 GiB budget, warmed) and over mmap (warmed: huge pages)
# on the same index, queries and parameters, alternated ROUNDS times per ef
# (this machine's QPS moves 10-20% between runs); prints every run's QPS,
# the medians and each median's ratio to full mode's.
#   /usr/bin/python3 bench/gen_search_data.py   # once: builds bench-data/{fmnist,clustered}.*
#   ROUNDS=5 SECS=2 bash bench/backends_vs_full.sh [DATASET...]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-5} secs=${SECS:-2}
datasets=("$@")
[ ${#datasets[@]} -gt 0 ] || datasets=(clustered fmnist)
go build -o bench-data/faiss-sidecar ./cmd/faiss-sidecar
bin=bench-data/faiss-sidecar
configs=("full|--mode full"
  "pread|--mode memory_efficient --backend pread --cache-bytes $((1 << 30)) --warmup"
  "mmap|--mode memory_efficient --backend mmap --warmup")
for ds in "${datasets[@]}"; do
  idx=bench-data/$ds.faiss q=bench-data/$ds.queries.fvecs
  [ -f "$idx" ] || { echo "missing $idx: run bench/gen_search_data.py" >&2; exit 1; }
  for ef in ${EFS:-16 64 256}; do
    declare -A runs=()
    for _ in $(seq "$rounds"); do
      for cfg in "${configs[@]}"; do
        name=${cfg%%|*}
        # shellcheck disable=SC2086 # the flags split on purpose
        qps=$("$bin" bench "$idx" --queries "$q" --k 10 --ef-search "$ef" --duration "${secs}s" --json ${cfg#*|} |
          /usr/bin/python3 -c "import json,sys; print(round(json.load(sys.stdin)['qps']))")
        runs[$name]="${runs[$name]:-} $qps"
      done
    done
    base=""
    for cfg in "${configs[@]}"; do
      name=${cfg%%|*}
      med=$(tr ' ' '\n' <<<"${runs[$name]}" | grep . | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
      base=${base:-$med}
      printf "%-10s ef %-4s %-6s median %7s  ×full %5.3f  runs:%s\n" "$ds" "$ef" "$name" "$med" \
        "$(/usr/bin/python3 -c "print($med / $base)")" "${runs[$name]}"
    done
    unset runs
  done
done
