#!/usr/bin/env bash
# Server CPU per search against the same searches in process, on one core.
# `serve` runs pinned to core 0 with an index of bench-data/ (mode MODE,
# default memory_efficient: mmap); a Go client pinned to core 1 sends
# keep-alive requests on CONC connections; the server's CPU time (the sum
# of its threads' /proc schedstat) is read before and after and divided by
# the searches answered. k 10, ef_search 16.
#
# The ratio: `faiss-sidecar bench … --threads 1` (same mode) runs on core 0
# too, and the client sends _msearch requests of BATCH vectors as
# vectors_b64; each is stopped (SIGSTOP) while the other runs, in turns of
# SLICE seconds, for 2 × SECS seconds of wall time. Both thus run in the
# same seconds, on the same core, never at once: a shared machine's
# neighbours, which change the CPU a search takes from one second to the
# next, weigh on both alike. bench's CPU (/usr/bin/time) less its fixed
# cost (open, reading the queries: a run of one query, taken first), over
# its searches and its warm-up pass, is the in-process cost.
# ROUNDS rounds print: in-process µs a query | server µs a search in
# _msearch (vectors_b64) | their ratio (target ≤ 1.15); then, for
# reference, server µs a search in _msearch with decimal "vectors", and a
# _search request with decimal "vector" and with vector_b64, SECS each.
#
#   bash bench/msearch_cpu.sh [BINARY [BASE_BINARY]]   (DATASETS="clustered
#   fmnist" MODE=memory_efficient SECS=4 SLICE=0.25 ROUNDS=3 BATCH=50 CONC=2;
#   PROFILE=DIR adds an _msearch (vectors_b64) phase a round, the server
#   started with --pprof, and saves its CPU profile there)
# With BASE_BINARY a second server, of that binary, serves beside the first
# (on core 0 too, idle but for its own turns), and each round adds a phase
# where a client of each sends _msearch (vectors_b64) requests, taking
# turns as above: a change's before and after in one run.
# Needs bench-data/NAME.faiss and NAME.queries.fvecs (bench/gen_search_data.py).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
DATASETS=${DATASETS:-clustered fmnist} SECS=${SECS:-4} SLICE=${SLICE:-0.25} ROUNDS=${ROUNDS:-3}
MODE=${MODE:-memory_efficient}
BATCH=${BATCH:-50} CONC=${CONC:-2} PROFILE=${PROFILE:-}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
bin=${1:-}
if [ -z "$bin" ]; then bin="$work/faiss-sidecar"; go build -o "$bin" ./cmd/faiss-sidecar; fi
base=${2:-}

cat >"$work/client.go" <<'GO'
// Sends the bodies of a file (one a line) round robin to a URL on conc
// keep-alive connections for a duration; prints the 200s and the others.
package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	url, file := os.Args[1], os.Args[2]
	dur, _ := time.ParseDuration(os.Args[3])
	conc, _ := strconv.Atoi(os.Args[4])
	data, err := os.ReadFile(file)
	if err != nil {
		panic(err)
	}
	bodies := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc, DisableCompression: true}}
	var ok, bad atomic.Int64
	end := time.Now().Add(dur)
	var wg sync.WaitGroup
	for w := range conc {
		wg.Go(func() {
			for i := w; time.Now().Before(end); i += conc {
				r, err := client.Post(url, "application/json", bytes.NewReader(bodies[i%len(bodies)]))
				if err != nil {
					bad.Add(1)
					continue
				}
				io.Copy(io.Discard, r.Body)
				r.Body.Close()
				if r.StatusCode == 200 {
					ok.Add(1)
				} else {
					bad.Add(1)
				}
			}
		})
	}
	wg.Wait()
	fmt.Println(ok.Load(), bad.Load())
}
GO
(cd "$work" && go mod init client >/dev/null 2>&1 && go build -o client client.go)

pprof=()
if [ -n "$PROFILE" ]; then pprof=(--pprof); mkdir -p "$PROFILE"; fi
# serve BINARY: starts it on core 0; sets port and pid.
serve() {
  port=$((20000 + RANDOM % 20000))
  taskset -c 0 "$1" serve --listen "127.0.0.1:$port" --data-root "$PWD/bench-data" "${pprof[@]}" 2>>"$work/log" &
  pid=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/_health" >/dev/null && break; sleep 0.1; done
}
if [ -n "$base" ]; then serve "$base"; burl="http://127.0.0.1:$port" bpid=$pid; fi
serve "$bin"
url="http://127.0.0.1:$port" spid=$pid

# cpu PID: its threads' time on a CPU, in ns.
cpu() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f\n", s}'; }

# drive URL PID PATH FILE SECONDS: sends FILE's bodies to the server at
# URL for SECONDS; prints "answered ns_of_server_cpu".
drive() {
  local c0 c1 out n bad
  c0=$(cpu "$2")
  out=$(taskset -c 1 "$work/client" "$1$3" "$4" "${5}s" "$CONC")
  c1=$(cpu "$2")
  read -r n bad <<<"$out"
  if [ "$bad" != 0 ]; then echo "$3: $bad requests failed" >&2; exit 1; fi
  echo "$n $((c1 - c0))"
}

# per N NS K: µs per search of NS ns over N requests of K searches.
per() { awk -v n="$1" -v ns="$2" -v k="$3" 'BEGIN {printf "%.1f", ns / 1e3 / (n * k)}'; }

bench_args() {
  echo "bench-data/$ds.faiss --queries bench-data/$ds.queries.fvecs --k 10 --ef-search 16 --mode $MODE --threads 1 --json"
}

# ab: the base binary's server against this one's, their clients taking
# turns as bench and the client do in interleave; prints their µs a search.
ab() {
  local c0 b0 cp bp2 n nb bad badb
  # Never leave either stopped (a stopped process ignores the trap's TERM).
  trap 'kill -CONT ${cp:-} ${bp2:-} 2>/dev/null; kill ${cp:-} ${bp2:-} 2>/dev/null' EXIT
  c0=$(cpu "$spid") b0=$(cpu "$bpid")
  taskset -c 1 "$work/client" "$url/indexes/$ds/_msearch" "$work/msearch-b64" "$((2 * SECS))s" "$CONC" >"$work/client.out" &
  cp=$!
  kill -STOP "$cp"
  taskset -c 1 "$work/client" "$burl/indexes/$ds/_msearch" "$work/msearch-b64" "$((2 * SECS))s" "$CONC" >"$work/base.out" &
  bp2=$!
  while kill -0 "$bp2" 2>/dev/null || kill -0 "$cp" 2>/dev/null; do
    sleep "$SLICE"
    kill -STOP "$bp2" 2>/dev/null || true
    kill -CONT "$cp" 2>/dev/null || true
    sleep "$SLICE"
    kill -STOP "$cp" 2>/dev/null || true
    kill -CONT "$bp2" 2>/dev/null || true
  done
  wait "$cp" "$bp2"
  read -r n bad <"$work/client.out"
  read -r nb badb <"$work/base.out"
  if [ "$bad$badb" != 00 ]; then echo "_msearch: $bad and $badb (base) requests failed" >&2; exit 1; fi
  echo "$(per "$nb" "$(($(cpu "$bpid") - b0))" "$BATCH") $(per "$n" "$(($(cpu "$spid") - c0))" "$BATCH")"
}

# interleave: the ratio's round; prints "in-process server" µs.
interleave() {
  # shellcheck disable=SC2046
  /usr/bin/time -f '%U %S' -o "$work/time" taskset -c 0 "$bin" bench $(bench_args) \
    --duration "$((2 * SECS))s" >"$work/bench.json" &
  local tp=$! bp= cp= c0 n bad
  # Never leave either stopped (a stopped process ignores the trap's TERM).
  trap 'kill -CONT ${bp:-} ${cp:-} 2>/dev/null; kill ${bp:-} ${cp:-} 2>/dev/null' EXIT
  while [ -z "$bp" ] && kill -0 "$tp" 2>/dev/null; do bp=$(pgrep -P "$tp" || true); sleep 0.01; done
  kill -STOP "$bp"
  c0=$(cpu "$spid")
  taskset -c 1 "$work/client" "$url/indexes/$ds/_msearch" "$work/msearch-b64" "$((2 * SECS))s" "$CONC" >"$work/client.out" &
  cp=$!
  while kill -0 "$bp" 2>/dev/null || kill -0 "$cp" 2>/dev/null; do
    sleep "$SLICE"
    kill -STOP "$cp" 2>/dev/null || true
    kill -CONT "$bp" 2>/dev/null || true
    sleep "$SLICE"
    kill -STOP "$bp" 2>/dev/null || true
    kill -CONT "$cp" 2>/dev/null || true
  done
  wait "$tp" "$cp"
  read -r n bad <"$work/client.out"
  if [ "$bad" != 0 ]; then echo "_msearch: $bad requests failed" >&2; exit 1; fi
  /usr/bin/python3 - "$work" "$fixed" "$n" "$(($(cpu "$spid") - c0))" "$BATCH" <<'PY'
import json, sys
w, fixed, n, ns, batch = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
cpu = sum(map(float, open(w + "/time").read().split()))
searches = json.load(open(w + "/bench.json"))["searches"] + 1000  # and the warm-up pass
print("%.1f %.1f" % ((cpu - fixed) * 1e6 / searches, ns / 1e3 / (n * batch)))
PY
}

for ds in $DATASETS; do
  /usr/bin/python3 - "$work" "$ds" "$BATCH" <<'PY'
import base64, json, sys, numpy as np
w, ds, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
q = np.fromfile("bench-data/%s.queries.fvecs" % ds, dtype=np.float32)
d = int(q[:1].view(np.int32)[0]); q = q.reshape(-1, d + 1)[:, 1:]
b64 = [base64.b64encode(v.astype("<f4").tobytes()).decode() for v in q]
dec = [json.dumps(v.tolist()) for v in q]
tail = ',"k":10,"method_parameters":{"ef_search":16}}'
with open(w + "/search-dec", "w") as f:
    f.writelines('{"vector":%s%s\n' % (v, tail) for v in dec)
with open(w + "/search-b64", "w") as f:
    f.writelines('{"vector_b64":"%s"%s\n' % (v, tail) for v in b64)
with open(w + "/msearch-b64", "w") as f, open(w + "/msearch-dec", "w") as g:
    for i in range(0, len(q) - batch + 1, batch):
        f.write('{"vectors_b64":[%s]%s\n' % (",".join('"%s"' % v for v in b64[i:i + batch]), tail))
        g.write('{"vectors":[%s]%s\n' % (",".join(dec[i:i + batch]), tail))
print("%s: %d queries of %d dimensions; _msearch bodies of %d vectors: %d bytes as vectors_b64, %d as decimal" % (
    ds, len(q), d, batch, len(open(w + "/msearch-b64").readline()), len(open(w + "/msearch-dec").readline())))
PY
  for u in "$url" ${burl:+"$burl"}; do
    curl -sf -X PUT "$u/indexes/$ds" -d "{\"path\":\"$ds.faiss\",\"mode\":\"$MODE\"}" >/dev/null
    taskset -c 1 "$work/client" "$u/indexes/$ds/_msearch" "$work/msearch-b64" 1s "$CONC" >/dev/null # warm-up
  done
  # bench's fixed cost: open, queries, a warm-up and a measured query.
  # shellcheck disable=SC2046
  /usr/bin/time -f '%U %S' -o "$work/time" taskset -c 0 "$bin" bench $(bench_args) --max-queries 1 --duration 1ns >/dev/null
  fixed=$(awk '{print $1 + $2}' "$work/time")
  echo "  µs of CPU: in-process a query | server a search, _msearch vectors_b64 | ratio || server: a search, _msearch decimal; a _search request, decimal, vector_b64${base:+ || a search, _msearch vectors_b64: base, this binary: ratio}"
  for r in $(seq "$ROUNDS"); do
    read -r ip mb <<<"$(interleave)"
    if [ -n "$PROFILE" ]; then # a phase of its own, profiled
      curl -sf -o "$PROFILE/$ds.r$r.pprof" "$url/debug/pprof/profile?seconds=$SECS" &
      prof=$!
      drive "$url" "$spid" "/indexes/$ds/_msearch" "$work/msearch-b64" "$SECS" >/dev/null
      wait "$prof"
    fi
    bb=
    if [ -n "$base" ]; then
      read -r b1 b2 <<<"$(ab)"
      bb=$(awk -v a="$b1" -v b="$b2" 'BEGIN {printf " || %s, this binary %s: %.3f", a, b, b / a}')
    fi
    read -r n d <<<"$(drive "$url" "$spid" "/indexes/$ds/_msearch" "$work/msearch-dec" "$SECS")"
    md=$(per "$n" "$d" "$BATCH")
    read -r n d <<<"$(drive "$url" "$spid" "/indexes/$ds/_search" "$work/search-dec" "$SECS")"
    sd=$(per "$n" "$d" 1)
    read -r n d <<<"$(drive "$url" "$spid" "/indexes/$ds/_search" "$work/search-b64" "$SECS")"
    sb=$(per "$n" "$d" 1)
    awk -v r="$r" -v ip="$ip" -v mb="$mb" -v md="$md" -v sd="$sd" -v sb="$sb" -v bb="$bb" \
      'BEGIN {printf "  round %d: %s | %s | %.3f || %s; %s, %s%s\n", r, ip, mb, mb / ip, md, sd, sb, bb}'
  done
  for u in "$url" ${burl:+"$burl"}; do curl -sf -X DELETE "$u/indexes/$ds" >/dev/null; done
done
kill -0 "$spid" || { echo "SERVER DIED"; tail "$work/log"; exit 1; }
