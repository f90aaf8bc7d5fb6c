#!/usr/bin/env bash
# Side-by-side search benchmark: Debian FAISS 1.7.3 (one thread) and
# faiss-sidecar bench on the same index files, queries and parameters, in one
# run; prints QPS, recall and the ratio for ef 16, 64, 256 at k=10.
#   /usr/bin/python3 bench/gen_search_data.py   # once: builds bench-data/{fmnist,clustered}.*
#   bash bench/search_vs_faiss.sh [SECONDS]
# PAIRS=N (default 1) repeats the FAISS / full-mode pair N times, alternating,
# and prints each ratio, then their median and range: FAISS's own QPS moves
# 10-20% between runs here.
# DATASETS="clustered" (default "fmnist clustered") picks the data sets.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-3}
go build -o bench-data/faiss-sidecar ./cmd/faiss-sidecar
bin=bench-data/faiss-sidecar
field() { /usr/bin/python3 -c "import json,sys;print(json.load(sys.stdin)['$1'])"; }
printf "%-10s %4s  %-28s %10s %8s %8s\n" dataset ef configuration QPS recall "×FAISS"
for ds in ${DATASETS:-fmnist clustered}; do
  idx=bench-data/$ds.faiss q=bench-data/$ds.queries.fvecs gt=bench-data/$ds.gt.ivecs
  [ -f "$idx" ] || { echo "missing $idx: run bench/gen_search_data.py" >&2; exit 1; }
  for ef in 16 64 256; do
    ratios=()
    for pair in $(seq "${PAIRS:-1}"); do
      f=$(/usr/bin/python3 bench/faiss_time.py "$idx" "$q" "$gt" 10 "$ef" "$secs")
      fq=$(echo "$f" | field qps)
      printf "%-10s %4s  %-28s %10.0f %8.4f %8s\n" "$ds" "$ef" "FAISS 1.7.3 (Debian), 1 thr" "$fq" "$(echo "$f" | field recall)" "1.00"
      cfgs="full:1 memory_efficient:1:mmap memory_efficient:1:pread full:2"
      [ "$pair" -gt 1 ] && cfgs="full:1" # later pairs: FAISS beside full mode only
      for cfg in $cfgs; do
        IFS=: read -r mode thr backend <<<"$cfg"
        args=(bench "$idx" --queries "$q" --gt "$gt" --k 10 --ef-search "$ef" --threads "$thr" --mode "$mode" --duration "${secs}s" --json)
        [ -n "${backend:-}" ] && args+=(--backend "$backend" --cache-bytes $((1 << 30)))
        [ "${backend:-}" = mmap ] && args+=(--warmup) # "a warm mmap": populated on huge pages
        o=$("$bin" "${args[@]}")
        oq=$(echo "$o" | field qps)
        r=$(/usr/bin/python3 -c "print($oq / $fq)")
        [ "$mode:$thr" = full:1 ] && ratios+=("$r")
        printf "%-10s %4s  %-28s %10.0f %8.4f %8.2f\n" "$ds" "$ef" "sidecar $mode${backend:+/$backend} $thr thr" "$oq" "$(echo "$o" | field recall)" "$r"
      done
    done
    [ "${#ratios[@]}" -gt 1 ] && printf "%-10s %4s  full 1 thr ×FAISS over %d pairs: median %s, range %s\n" "$ds" "$ef" "${#ratios[@]}" \
      "$(/usr/bin/python3 -c "import statistics,sys; print('%.2f' % statistics.median(map(float, sys.argv[1:])))" "${ratios[@]}")" \
      "$(/usr/bin/python3 -c "import sys; v=sorted(map(float, sys.argv[1:])); print('%.2f-%.2f' % (v[0], v[-1]))" "${ratios[@]}")"
  done
done
