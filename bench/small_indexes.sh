#!/usr/bin/env bash
# Many small indexes (issue 37 §3): a server loads N FAISS-written segments
# of 1,000 × 128 vectors (bench/gen_small_segments.py) in mode
# memory_efficient over one keep-alive connection, then reports its RSS and
# Go heap growth per index, open descriptors, the loads' times, and its CPU
# while idle with all of them loaded (the file watcher's cost); with
# QUERIES, each index is then searched that many times and RSS read again.
#   bash bench/small_indexes.sh [N ...]          (default: 1000 10000)
#   BASE=REV bash bench/small_indexes.sh 10000   (REV's build too, side by side)
# BIN: the binary to measure (default: this tree's, built into a temporary
# directory); BASE: also measure revision REV (git archive, built the
# same way), base then new for each N; IDLE: seconds of idle CPU measured
# (default 30; 0: none); PROFILE=DIR: every allocation sampled
# (GODEBUG=memprofilerate=1, slow), the heap profile after the loads (and
# searches) written to DIR/heap.LABEL.N.pb.gz for go tool pprof.
set -euo pipefail
cd "$(dirname "$0")/.."
seg=$(realpath -m bench-data/segments)
counts=${*:-1000 10000}
max=0
for n in $counts; do [ "$n" -gt "$max" ] && max=$n; done
[ -e "$seg/seg_$(printf %05d $((max - 1))).faiss" ] || /usr/bin/python3 bench/gen_small_segments.py --n "$max"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -n "${BIN:-}" ]; then bin=$(realpath "$BIN"); else
  bin=$tmp/new; go build -o "$bin" ./cmd/faiss-sidecar; fi
arms="new:$bin"
if [ -n "${BASE:-}" ]; then
  mkdir "$tmp/base-src"
  git archive "$BASE" | tar -x -C "$tmp/base-src"
  (cd "$tmp/base-src" && go build -o "$tmp/base" ./cmd/faiss-sidecar)
  arms="base:$tmp/base $arms"
fi
for n in $counts; do
  for arm in $arms; do
    label=${arm%%:*} b=${arm#*:}
    port=$((20000 + RANDOM % 40000))
    if [ -n "${PROFILE:-}" ]; then
      GODEBUG=memprofilerate=1 "$b" serve --listen 127.0.0.1:$port --data-root "$seg" --log-level warn --pprof 2>/dev/null & pid=$!
    else
      "$b" serve --listen 127.0.0.1:$port --data-root "$seg" --log-level warn 2>/dev/null & pid=$!
    fi
    trap 'kill $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
    "$b" health --url "http://127.0.0.1:$port/_health" --wait 10s >/dev/null
    echo "== $label"
    /usr/bin/python3 bench/small_indexes.py "$port" "$pid" "$seg" "$n"
    if [ -n "${PROFILE:-}" ]; then
      mkdir -p "$PROFILE"
      curl -s "http://127.0.0.1:$port/debug/pprof/heap?gc=1" >"$PROFILE/heap.$label.$n.pb.gz"
    fi
    kill $pid; wait $pid 2>/dev/null || true
    echo
  done
done
