#!/usr/bin/env bash
# max_connections under clients holding its slots: MAXCONN slots (default
# 64), all held by clients that are IDLE (keep-alive, one request each,
# then nothing), BUSY (each loops _search on its connection, reconnecting
# when the server closes it), SILENT (4 × MAXCONN connections that send
# nothing, reopened when closed) or PARTIAL (the same, each sending
# headers that never end); meanwhile NEW fresh connections (default 20),
# one at a time, each time GET /_health. Prints the newcomers' latency
# (p50, max; "timeout" past 10 s), and for busy clients their answers and
# how often their connection was closed or reset.
#   MODE=idle|busy|silent|partial bash bench/conn_flood.sh [BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
MODE=${MODE:-idle} MAXCONN=${MAXCONN:-64} NEW=${NEW:-20}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
bin=${1:-}
if [ -z "$bin" ]; then bin="$work/faiss-sidecar"; go build -o "$bin" ./cmd/faiss-sidecar; fi
port=$((20000 + RANDOM % 20000))
printf '{"max_connections":%d,"indexes":{"t":{"path":"hnsw_flat_l2.faiss"}}}' "$MAXCONN" >"$work/config.json"
"$bin" serve --listen "127.0.0.1:$port" --data-root "$PWD/testdata/fixtures" --config "$work/config.json" 2>"$work/log" &
for _ in $(seq 300); do curl -sf "http://127.0.0.1:$port/_health" >/dev/null && break; sleep 0.1; done
/usr/bin/python3 - "$port" "$MODE" "$MAXCONN" "$NEW" <<'PY'
import collections, json, socket, sys, threading, time
port, mode, maxconn, new = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def request(path, body=b""):
    method = b"POST" if body else b"GET"
    return (method + b" " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Length: " +
            str(len(body)).encode() + b"\r\n\r\n" + body)
def answer(s):
    """Reads one response; returns (status, closes) or raises."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            raise ConnectionError("closed")
        buf += d
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    n = 0
    for l in lines[1:]:
        k, _, v = l.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v)
    while len(rest) < n:
        d = s.recv(65536)
        if not d:
            raise ConnectionError("closed")
        rest += d
    return int(lines[0].split()[1]), b"connection: close" in head.lower()
search = request(b"/indexes/t/_search", json.dumps({"vector": [0.5] * 32, "k": 5}).encode())
stop = threading.Event()
counts = collections.Counter()
held = []
def busy():
    s = None
    while not stop.is_set():
        try:
            if s is None:
                s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(search)
            status, closes = answer(s)
            counts[status] += 1
            if closes:
                counts["closed by the server (Connection: close)"] += 1
                s.close(); s = None
        except (OSError, ConnectionError) as e:
            counts["connection lost: " + type(e).__name__] += 1
            if s: s.close()
            s = None
def flood():
    socks = set()
    while not stop.is_set():
        while len(socks) < 4 * maxconn:
            s = socket.socket(); s.setblocking(False)
            try:
                s.connect(("127.0.0.1", port))
            except BlockingIOError:
                pass
            if mode == "partial":
                try: s.send(b"GET /_health HTTP/1.1\r\nHost: x\r\n")
                except OSError: pass
            socks.add(s)
        for s in list(socks):
            try:
                if s.recv(1024, socket.MSG_DONTWAIT) is not None:
                    s.close(); socks.discard(s); counts["flood connections closed by the server"] += 1
            except BlockingIOError:
                pass
            except OSError:
                s.close(); socks.discard(s); counts["flood connections closed by the server"] += 1
        time.sleep(0.05)
    for s in socks: s.close()
threads = []
if mode in ("silent", "partial"):
    t = threading.Thread(target=flood); t.start(); threads.append(t)
for _ in range(maxconn if mode in ("idle", "busy") else 0):
    if mode == "idle":
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(request(b"/_health")); answer(s); held.append(s)
    else:
        t = threading.Thread(target=busy); t.start(); threads.append(t)
time.sleep(1)
lat = []
for i in range(new):
    t0 = time.monotonic()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(request(b"/_health"))
        status, _ = answer(s)
        lat.append(time.monotonic() - t0)
        s.close()
    except (OSError, ConnectionError):
        lat.append(float("inf"))
    time.sleep(0.1)
stop.set()
for t in threads: t.join()
lat.sort()
fmt = lambda x: "timeout" if x == float("inf") else "%.1f ms" % (x * 1e3)
print(f"{mode}: max_connections {maxconn}; {new} newcomers' /_health: p50 {fmt(lat[len(lat)//2])}, max {fmt(lat[-1])}")
if mode != "idle":
    print(dict(counts))
PY
