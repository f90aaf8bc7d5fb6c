#!/usr/bin/env bash
# Re-runs the attacks of the hardening issue against a real server and
# prints, for each, the HTTP status, the error type and the server's RSS
# (VmRSS) and peak RSS (VmHWM) afterwards. Loopback only; about a minute.
#   bash bench/attacks.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
work=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$work"' EXIT
go build -o "$work/faiss-sidecar" ./cmd/faiss-sidecar
mkdir "$work/data"
for f in hnsw_flat_large hnsw_flat_l2 flat_l2 opensearch_0_165_vec; do
  cp "testdata/fixtures/$f.faiss" "$work/data/"
done
for b in mmap pread direct; do cp "$work/data/hnsw_flat_large.faiss" "$work/data/v_$b.faiss"; done
port=$((20000 + RANDOM % 20000))
url="http://127.0.0.1:$port"
"$work/faiss-sidecar" serve --listen "127.0.0.1:$port" --data-root "$work/data" --token T --pprof 2>"$work/log" &
pid=$!
auth=(-H "Authorization: Bearer T")
for _ in $(seq 100); do curl -sf "$url/_health" >/dev/null && break; sleep 0.1; done

mem() { awk '/VmRSS|VmHWM/ {printf "%s %d MB  ", $1, $2/1024}' "/proc/$pid/status"; }
# attack NAME METHOD PATH [BODY|@FILE]: one request, its status and type, memory after.
attack() {
  local name=$1 method=$2 path=$3 body=${4:-}
  local out status
  out=$(curl -s -o "$work/body" -w '%{http_code}' -X "$method" "${auth[@]}" "$url$path" --data-binary "$body" || true)
  status=$out
  local typ
  typ=$(grep -o '"type":"[a-z_]*"' "$work/body" | head -1 || true)
  kill -0 "$pid" 2>/dev/null || { echo "SERVER DIED after: $name"; exit 1; }
  printf '%-58s %s %-34s %s\n' "$name" "$status" "${typ:-}" "$(mem)"
}

v64=$(python3 -c 'print("["+",".join(["0.5"]*64)+"]")')
attack "load v (full)" PUT /indexes/v '{"path":"hnsw_flat_large.faiss","mode":"full"}'
for b in mmap pread direct; do
  attack "load v_$b (memory_efficient, $b)" PUT "/indexes/v_$b" "{\"path\":\"v_$b.faiss\",\"backend\":\"$b\"}"
done
attack "_search k=10000000000" POST /indexes/v/_search "{\"vector\":$v64,\"k\":10000000000}"
attack "_search k=1000000000" POST /indexes/v/_search "{\"vector\":$v64,\"k\":1000000000}"
attack "_search k=-1" POST /indexes/v/_search "{\"vector\":$v64,\"k\":-1}"
attack "_search k=0" POST /indexes/v/_search "{\"vector\":$v64,\"k\":0}"
attack "_search k=null" POST /indexes/v/_search "{\"vector\":$v64,\"k\":null}"
attack "_search k absent (10)" POST /indexes/v/_search "{\"vector\":$v64}"
attack "_msearch k=-1" POST /indexes/v/_msearch "{\"vectors\":[$v64],\"k\":-1}"
attack "_search ef_search=1048576 k=10000" POST /indexes/v/_search "{\"vector\":$v64,\"k\":10000,\"method_parameters\":{\"ef_search\":1048576}}"
# The 130 KB _msearch: as many vectors as fit, k 10000.
python3 -c "import sys; v='['+','.join(['0.5']*64)+']'; n=130000//len(v); sys.stdout.write('{\"vectors\":['+','.join([v]*n)+'],\"k\":10000}')" >"$work/msearch.json"
attack "_msearch 130 KB body, k=10000" POST /indexes/v/_msearch "@$work/msearch.json"
python3 -c "import sys; v='['+','.join(['0.5']*64)+']'; sys.stdout.write('{\"vectors\":['+','.join([v]*400)+'],\"k\":10000}')" >"$work/msearch400.json"
attack "_msearch 400 vectors, k=10000 (over max_request_work)" POST /indexes/v/_msearch "@$work/msearch400.json"
python3 -c "import sys; v='['+','.join(['0.5']*64)+']'; sys.stdout.write('{\"vectors\":['+','.join([v]*400)+'],\"k\":100}')" >"$work/msearch_ok.json"
attack "_msearch 400 vectors, k=100 (allowed; 40000 hits)" POST /indexes/v/_msearch "@$work/msearch_ok.json"
attack "PUT _mode verify_queries=1000000000" PUT /indexes/v/_mode '{"mode":"memory_efficient","verify_queries":1000000000}'
# A long switch (1000 check queries) with a DELETE sent meanwhile.
attack "load w" PUT /indexes/w '{"path":"hnsw_flat_large.faiss","mode":"full"}'
curl -s -o /dev/null -X PUT "${auth[@]}" "$url/indexes/w/_mode" -d '{"mode":"memory_efficient","backend":"pread","verify_queries":1000}' &
sw=$!
sleep 0.05
t0=$(date +%s%N)
attack "DELETE w during its switch" DELETE /indexes/w
echo "    DELETE answered in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
wait $sw
attack "PUT /indexes/%ff%fe" PUT /indexes/%ff%fe '{"path":"hnsw_flat_l2.faiss"}'
attack "GET /metrics after the bad name" GET /metrics
attack "PUT path /etc/nope (missing, outside)" PUT /indexes/x '{"path":"/etc/nope"}'
attack "PUT path /etc/shadow (exists, outside)" PUT /indexes/x '{"path":"/etc/shadow"}'
attack "PUT path: a directory" PUT /indexes/x "{\"path\":\"$work/data\"}"
attack "PUT flat index without graph" PUT /indexes/x '{"path":"flat_l2.faiss"}'
attack "PUT backend zstd on a plain file" PUT /indexes/x '{"path":"hnsw_flat_l2.faiss","backend":"zstd"}'
for p in "" goroutine heap cmdline symbol "profile?seconds=1" "trace?seconds=0.1"; do
  code=$(curl -s -o /dev/null -w '%{http_code}' "$url/debug/pprof/$p")
  codeT=$(curl -s -o /dev/null -w '%{http_code}' "${auth[@]}" "$url/debug/pprof/$p")
  printf '%-58s %s without token, %s with\n' "pprof /debug/pprof/$p" "$code" "$codeT"
done
printf '%-58s %s\n' "GET /indexes without token" "$(curl -s -o /dev/null -w '%{http_code}' "$url/indexes")"
# Served files changed under their indexes.
truncate -s 0 "$work/data/v_mmap.faiss" 2>/dev/null || truncate -s 0 "$work/data/v_mmap.faiss"
attack "search v_mmap after truncate -s 0" POST /indexes/v_mmap/_search "{\"vector\":$v64}"
attack "_warmup v_mmap after truncate" POST /indexes/v_mmap/_warmup
cp testdata/fixtures/hnsw_flat_l2.faiss "$work/data/v_pread.faiss"
attack "search v_pread after cp small big" POST /indexes/v_pread/_search "{\"vector\":$v64}"
cp testdata/fixtures/hnsw_flat_l2.faiss "$work/data/v_direct.faiss"
attack "search v_direct after cp small big" POST /indexes/v_direct/_search "{\"vector\":$v64}"
attack "search v (full, other index) still serves" POST /indexes/v/_search "{\"vector\":$v64}"
grep -o 'faiss_sidecar_index_failed{index="[a-z_]*"} [01]' <(curl -s "$url/metrics") | sed 's/^/    /'
code=$(curl -s "${auth[@]}" "$url/indexes/v_mmap" | grep -o '"state":"[a-z]*"')
echo "    GET /indexes/v_mmap: $code"
echo "final: $(mem)"
