#!/usr/bin/env bash
# Recall@10 of compact HNSW indexes built by FAISS from fashion-mnist (SQ8 and
# binary), without rerank and with full-precision rerank at oversample 1, 2, 3, 5,
# against exact ground truth (IndexFlatL2 on the float vectors). At k = 10 every
# oversample up to 10 gives the same shortlist (K1 = max(100, ⌈k·oversample⌉) = 100,
# OpenSearch's rule), so recall@100 at k = 100 follows too, where K1 = 100·oversample.
# ef_search: the file's (16), OpenSearch's default 100, and 500 for k = 100. With
# efSearch below K1, FAISS's stop rule ends the search before K1 candidates are good
# ones (docs/hnsw-search.md §5.3): the shortlist is only as good as ef_search lets it be.
#   /usr/bin/python3 bench/gen_search_data.py && bash bench/rerank_recall.sh
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o bench-data/faiss-sidecar ./cmd/faiss-sidecar
bin=bench-data/faiss-sidecar
d=bench-data
[ -f $d/fmnist.vec ] || "$bin" export-vectors $d/fmnist.faiss $d/fmnist.vec
recall() { "$bin" bench "$@" --k "$k" ${ef:+--ef-search $ef} --gt $d/fmnist.gt.ivecs --duration 1s --json | /usr/bin/python3 -c "import json,sys;d=json.load(sys.stdin);print('%.4f %8.0f' % (d['recall'], d['qps']))"; }
printf "%-16s %-4s %-4s %-14s %8s %8s\n" index k ef rerank recall@k QPS
for cfg in 10: 10:100 100:500; do
k=${cfg%%:*} ef=${cfg#*:}
for idx in sq8 bin; do
  if [ $idx = sq8 ]; then args=($d/fmnist_sq8.faiss --queries $d/fmnist.queries.fvecs)
  else args=($d/fmnist_bin.faiss --queries $d/fmnist_bin.queries.bvecs --rerank-queries $d/fmnist.queries.fvecs); fi
  read -r r q <<<"$(recall "${args[@]}")"
  printf "%-16s %-4s %-4s %-14s %8s %8s\n" "fmnist_$idx" "$k" "${ef:-file}" none "$r" "$q"
  for os in 1 2 3 5; do
    read -r r q <<<"$(recall "${args[@]}" --rerank-vectors $d/fmnist.vec --oversample $os --rerank-strategy mmap-willneed)"
    printf "%-16s %-4s %-4s %-14s %8s %8s\n" "fmnist_$idx" "$k" "${ef:-file}" "oversample $os" "$r" "$q"
  done
done
done
