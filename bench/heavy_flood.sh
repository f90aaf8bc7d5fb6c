#!/usr/bin/env bash
# A flood of heavy searches (radial, ef_search 100000, on an on_disk index)
# from CLIENTS clients while one client times cheap searches on another
# index: the cheap searches' latency, and what the flood was answered.
#   bash bench/heavy_flood.sh [BINARY]   (CLIENTS=32 SECS=20)
# Needs bench-data/fmnist.faiss (bench/gen_search_data.py) and its 4x guide
# in bench-data/guides (faiss-sidecar quantize … --guide-dir bench-data/guides).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
CLIENTS=${CLIENTS:-32} SECS=${SECS:-20}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
bin=${1:-}
if [ -z "$bin" ]; then bin="$work/faiss-sidecar"; go build -o "$bin" ./cmd/faiss-sidecar; fi
port=$((20000 + RANDOM % 20000))
url="http://127.0.0.1:$port"
"$bin" serve --listen "127.0.0.1:$port" --data-root "$PWD/bench-data" --data-root "$PWD/testdata/fixtures" \
  --guide-dir "$PWD/bench-data/guides" 2>"$work/log" &
pid=$!
for _ in $(seq 100); do curl -sf "$url/_health" >/dev/null && break; sleep 0.1; done
curl -sf -X PUT "$url/indexes/od" -d '{"path":"fmnist.faiss","mode":"on_disk","compression":"4x"}' >/dev/null
curl -sf -X PUT "$url/indexes/small" -d "{\"path\":\"$PWD/testdata/fixtures/hnsw_flat_l2.faiss\"}" >/dev/null
/usr/bin/python3 - "$work" <<'PY'
import sys, numpy as np
w = sys.argv[1]
q = np.fromfile("bench-data/fmnist.queries.fvecs", dtype=np.float32)
d = int(q[:1].view(np.int32)[0]); v = q[1:d+1]
open(w + "/heavy.json", "w").write('{"vector":[%s],"max_distance":2000000,"method_parameters":{"ef_search":100000}}' % ",".join("%g" % x for x in v))
open(w + "/cheap.json", "w").write('{"vector":[%s],"k":10}' % ",".join(["0.5"] * 32))
PY
flood() {
  local code
  while :; do # a client that honours Retry-After (1 s)
    code=$(curl -s -o /dev/null -w '%{http_code}' "$url/indexes/od/_search" --data-binary @"$work/heavy.json" || true)
    echo "$code" >>"$work/codes.$1"
    if [ "$code" = 429 ]; then sleep 1; fi
  done
}
for i in $(seq "$CLIENTS"); do flood "$i" & done
sleep 2
end=$((SECONDS + SECS))
while [ $SECONDS -lt $end ]; do
  curl -s -o /dev/null -w '%{http_code} %{time_total}\n' "$url/indexes/small/_search" --data-binary @"$work/cheap.json" >>"$work/cheap"
  sleep 0.2
done
kill -0 $pid || { echo "SERVER DIED"; exit 1; }
rss=$(awk '/VmHWM/ {print $2/1024 " MB"}' /proc/$pid/status)
echo "cheap searches on another index while $CLIENTS clients flood radial ef 100000 on on_disk (${SECS}s):"
sort -k2 -g "$work/cheap" | awk '{c[$1]++; t[NR]=$2} END {printf "  %d answered (", NR; for (k in c) printf "%s: %d ", k, c[k]; printf "), latency p50 %.1f ms, p90 %.1f ms, max %.1f ms\n", 1000*t[int((NR+1)/2)], 1000*t[int(NR*0.9)], 1000*t[NR]}'
echo -n "  the flood's answers: "; cat "$work"/codes.* | sort | uniq -c | tr '\n' ' '; echo
echo "  server peak RSS $rss"
