#!/usr/bin/env bash
# A flood of large _msearch requests against a server inside a cgroup-v1
# memory limit that also holds a full copy of fashion-mnist: does the
# process survive, and what is its peak memory?
#   bash bench/msearch_flood.sh [BINARY]   (LIMIT_MB=512 CLIENTS=60 SECS=20)
# SHAPE=tiny sends instead a body of (2 MiB)/4 vectors "[0]", which the
# server must refuse (max_msearch_vectors) without decoding it.
# Needs root, /sys/fs/cgroup/memory and bench-data/fmnist.faiss
# (bench/gen_search_data.py).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
LIMIT_MB=${LIMIT_MB:-512} CLIENTS=${CLIENTS:-60} SECS=${SECS:-20}
work=$(mktemp -d)
cg=/sys/fs/cgroup/memory/faiss-sidecar-flood-$$
trap 'kill $(jobs -p) 2>/dev/null || true; sleep 0.5; rmdir "$cg" 2>/dev/null || true; rm -rf "$work"' EXIT
bin=${1:-}
if [ -z "$bin" ]; then bin="$work/faiss-sidecar"; go build -o "$bin" ./cmd/faiss-sidecar; fi
mkdir "$cg"
echo $((LIMIT_MB << 20)) >"$cg/memory.limit_in_bytes"
port=$((20000 + RANDOM % 20000))
url="http://127.0.0.1:$port"
sh -c "echo \$\$ > $cg/cgroup.procs; exec $bin serve --listen 127.0.0.1:$port --data-root $PWD/bench-data" 2>"$work/log" &
pid=$!
for _ in $(seq 100); do curl -sf "$url/_health" >/dev/null && break; sleep 0.1; done
curl -sf -X PUT "$url/indexes/f" -d '{"path":"fmnist.faiss","mode":"full"}' >/dev/null
/usr/bin/python3 - "$work" "${SHAPE:-fmnist}" <<'PY'
import sys, numpy as np
w = sys.argv[1]
q = np.fromfile("bench-data/fmnist.queries.fvecs", dtype=np.float32)
d = int(q[:1].view(np.int32)[0]); q = q.reshape(-1, d + 1)[:, 1:]
vs = ",".join("[" + ",".join("%.6g" % x for x in q[i % len(q)]) + "]" for i in range(1000))
if sys.argv[2] == "tiny":
    vs = ",".join(["[0]"] * ((2 << 20) // 4))
open(w + "/big.json", "w").write('{"vectors":[%s],"k":10}' % vs)
PY
echo "body $(stat -c %s "$work/big.json") bytes; cgroup limit ${LIMIT_MB} MiB; $CLIENTS clients for ${SECS}s"
flood() {
  local end=$((SECONDS + SECS)) code
  while [ $SECONDS -lt $end ]; do
    code=$(curl -s -o /dev/null -w '%{http_code}' "$url/indexes/f/_msearch" --data-binary @"$work/big.json" || true)
    echo "$code" >>"$work/codes.$1"
  done
}
for i in $(seq "$CLIENTS"); do flood "$i" & done
wait $(jobs -p | grep -v "^$pid$") 2>/dev/null || true
if kill -0 $pid 2>/dev/null; then
  echo "server alive; peak RSS $(awk '/VmHWM/ {print int($2/1024)}' /proc/$pid/status) MB; cgroup peak $(($(cat $cg/memory.max_usage_in_bytes) >> 20)) MiB"
else
  echo "SERVER DIED (cgroup OOM kills: $(awk '$1 == "oom_kill" {print $2}' "$cg/memory.oom_control"))"
fi
echo -n "answers: "; cat "$work"/codes.* | sort | uniq -c | tr '\n' ' '; echo
