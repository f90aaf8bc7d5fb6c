#!/usr/bin/env bash
# Time from `serve` start to the first answered `_search` of an on_disk
# index whose guide is persisted (issue 18: within 1 s on the 1.05 GB
# index), cold (the index and its guide evicted from the page cache) and
# warm.
#   bash bench/restart.sh [INDEX QUERIES] (default: the 1.6M × 128 clustered set)
# COMPRESSION (default auto) and BUDGET (--memory-budget of the index, 0:
# none) choose the load; the guide is built beforehand in bench-data/guides.
set -euo pipefail
cd "$(dirname "$0")/.."
idx=$(realpath "${1:-bench-data/clustered_1m6.faiss}")
q=${2:-bench-data/clustered_1m6.queries.fvecs}
comp=${COMPRESSION:-auto}
budget=${BUDGET:-0}
if [ -n "${BIN:-}" ]; then bin=$(realpath "$BIN"); else
  go build -o bench-data/faiss-sidecar ./cmd/faiss-sidecar; bin=$(realpath bench-data/faiss-sidecar); fi
guides=$(realpath -m bench-data/guides)
mkdir -p "$guides"
# The guide this load uses, built (or found) outside the timing.
"$bin" bench "$idx" --queries "$q" --k 10 --max-queries 1 --duration 1ms --mode on_disk --compression "$comp" \
  --guide-dir "$guides" --memory-budget "$budget" >/dev/null
vec=$(/usr/bin/python3 -c "
import struct,sys
f=open('$q','rb'); d=struct.unpack('<i',f.read(4))[0]
print(list(struct.unpack('<%df'%d,f.read(4*d))))")
port=$((20000 + RANDOM % 40000))
cfg=$(mktemp)
trap 'rm -f "$cfg"' EXIT
body="{\"path\": \"$idx\", \"mode\": \"on_disk\", \"compression\": \"$comp\""
[ "$budget" != 0 ] && body="$body, \"memory_budget\": $budget"
echo "{\"listen\": \"127.0.0.1:$port\", \"data_roots\": [\"$(dirname "$idx")\"], \"guide_dir\": \"$guides\", \"indexes\": {\"c\": $body}}}" >"$cfg"
for state in cold warm; do
  if [ $state = cold ]; then
    for f in "$idx" "$guides"/"$(basename "$idx")".*.guide; do "$bin" bench storage "$f" --reads 1 --cold >/dev/null; done
  fi
  t0=$(date +%s%N)
  "$bin" serve --config "$cfg" >/dev/null 2>&1 & pid=$!
  ok=
  for _ in $(seq 1500); do # 30 s at most, a try every 20 ms
    if curl -sf -o /dev/null -X POST "http://127.0.0.1:$port/indexes/c/_search" -H 'Content-Type: application/json' \
      -d "{\"vector\": $vec, \"k\": 10}"; then ok=1; break; fi
    sleep 0.02
  done
  t1=$(date +%s%N)
  kill $pid; wait $pid 2>/dev/null || true
  [ -n "$ok" ] || { echo "$state: no answer in 30 s" >&2; exit 1; }
  echo "$state: first answer $(( (t1 - t0) / 1000000 )) ms after serve started (compression $comp, budget $budget)"
done
