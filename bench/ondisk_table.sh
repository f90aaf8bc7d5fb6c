#!/usr/bin/env bash
# Mode on_disk's recall@10, R (reads per query: the search's device reads
# plus the rerank's read requests) and QPS for each compression ×
# oversample × ef, warm (no memory limit), 1 thread, k 10, beside full mode
# at the same ef in the same run.
#   bash bench/ondisk_table.sh [INDEX QUERIES GT]   (default: bench-data/fmnist.*)
# Guides are built once into GUIDE_DIR (default bench-data/guides).
# LEVELS (default "4x 5x 6x 8x 32x"), OVERSAMPLES (default "1 2 3 5"), EFS
# (default "16 64 256") and SECS (per row, default 2) choose the rows; BIN
# runs a binary built beforehand instead of building bench-data/faiss-sidecar.
set -euo pipefail
cd "$(dirname "$0")/.."
idx=${1:-bench-data/fmnist.faiss}
q=${2:-bench-data/fmnist.queries.fvecs}
gt=${3:-bench-data/fmnist.gt.ivecs}
secs=${SECS:-2}
guides=${GUIDE_DIR:-bench-data/guides}
bin=${BIN:-}
if [ -z "$bin" ]; then
  go build -o bench-data/faiss-sidecar ./cmd/faiss-sidecar
  bin=bench-data/faiss-sidecar
fi
row() {
  "$bin" bench "$idx" --queries "$q" --gt "$gt" --k 10 --threads 1 --duration "${secs}s" --json "$@" 2>/dev/null |
    /usr/bin/python3 -c "import json,sys;d=json.load(sys.stdin);print('%7.4f %6.1f %8.0f' % (d['recall'], d.get('device_reads_per_query',0)+d.get('rerank_reads_per_query',0), d['qps']))"
}
printf "%-6s %-11s %-10s %7s %6s %8s\n" ef compression oversample recall R QPS
for ef in ${EFS:-16 64 256}; do
  printf "%-6s %-11s %-10s %s\n" $ef full - "$(row --ef-search $ef --mode full)"
  for c in ${LEVELS:-4x 5x 6x 8x 32x}; do
    for os in ${OVERSAMPLES:-1 2 3 5}; do
      printf "%-6s %-11s %-10s %s\n" $ef $c $os "$(row --ef-search $ef --mode on_disk --compression $c --guide-dir "$guides" --oversample $os)"
    done
  done
done
