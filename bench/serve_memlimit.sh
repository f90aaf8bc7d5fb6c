#!/usr/bin/env bash
# `serve` inside a cgroup-v1 memory limit, cold (page cache dropped): one
# index loaded over REST with LOAD (default: on_disk, no memory_budget),
# then CLIENTS clients send SEARCHES _search requests each (one
# fashion-mnist query each, k 10). Prints the load's answer, the status
# codes, whether the server is alive, its cgroup's peak and OOM kills, and
# the index's GET.
#   LIMIT=BYTES bash bench/serve_memlimit.sh [BINARY]
#   (LOAD='{"path":"fmnist.faiss","mode":"on_disk"}' CLIENTS=8 SEARCHES=375)
# Needs root, /sys/fs/cgroup/memory, bench-data/fmnist.* (bench/gen_search_data.py);
# guides are read from and written to bench-data/guides.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
: "${LIMIT:?LIMIT=bytes (e.g. $(($(stat -c %s bench-data/fmnist.faiss) / 3)), a third of fashion-mnist)}"
LOAD=${LOAD:-'{"path":"fmnist.faiss","mode":"on_disk"}'} CLIENTS=${CLIENTS:-8} SEARCHES=${SEARCHES:-375}
work=$(mktemp -d)
cg=/sys/fs/cgroup/memory/faiss-sidecar-serve-$$
trap 'kill $(jobs -p) 2>/dev/null || true; sleep 0.5; rmdir "$cg" 2>/dev/null || true; rm -rf "$work"' EXIT
bin=${1:-}
if [ -z "$bin" ]; then bin="$work/faiss-sidecar"; go build -o "$bin" ./cmd/faiss-sidecar; fi
mkdir -p bench-data/guides "$cg"
echo "$LIMIT" >"$cg/memory.limit_in_bytes"
sync
echo 3 >/proc/sys/vm/drop_caches
port=$((20000 + RANDOM % 20000))
url="http://127.0.0.1:$port"
sh -c "echo \$\$ > $cg/cgroup.procs; exec $bin serve --listen 127.0.0.1:$port --data-root $PWD/bench-data --guide-dir $PWD/bench-data/guides" 2>"$work/log" &
pid=$!
for _ in $(seq 300); do curl -sf "$url/_health" >/dev/null && break; sleep 0.1; done
echo "limit $LIMIT bytes; node budget: $(grep -o '"memory_budget":[0-9]*' "$work/log" | head -1)"
echo "load: $(curl -s -X PUT "$url/indexes/od" -d "$LOAD" | head -c 600)"
/usr/bin/python3 - "$url" "$CLIENTS" "$SEARCHES" <<'PY'
import collections, json, sys, threading, urllib.error, urllib.request
import numpy as np
url, clients, searches = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
raw = np.fromfile("bench-data/fmnist.queries.fvecs", dtype=np.float32)
d = int(raw[:1].view(np.int32)[0])
q = raw.reshape(-1, d + 1)[:, 1:]
codes = collections.Counter()
def client(c):
    for i in range(searches):
        body = json.dumps({"vector": q[(c * searches + i) % len(q)].tolist(), "k": 10}).encode()
        try:
            with urllib.request.urlopen(urllib.request.Request(url + "/indexes/od/_search", data=body, method="POST"), timeout=30) as r:
                r.read()
                codes[r.status] += 1
        except urllib.error.HTTPError as e:
            codes[e.code] += 1
        except Exception as e:
            codes[type(e).__name__] += 1
ts = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print("answers:", dict(codes))
PY
alive=$(kill -0 "$pid" 2>/dev/null && echo alive || echo DEAD)
echo "server $alive; cgroup peak $(cat "$cg/memory.max_usage_in_bytes") bytes; $(grep oom_kill "$cg/memory.oom_control" | tr '\n' ' ')"
echo "index: $(curl -s "$url/indexes/od" | head -c 900)"
