#!/usr/bin/env bash
# Writes the CLI's and the REST API's answers on the shipped queries into OUTDIR, with every
# timing field zeroed, so that two builds can be compared byte for byte:
#   bench/answers.sh ./old-binary /tmp/a && bench/answers.sh ./new-binary /tmp/b && diff -r /tmp/a /tmp/b
set -euo pipefail
bin=$(realpath "${1:?usage: bench/answers.sh BINARY OUTDIR}")
out=${2:?usage: bench/answers.sh BINARY OUTDIR}
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
out=$(realpath "$out")
work=$(mktemp -d)
trap 'kill "$srv" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
srv=

cd "$repo/testdata"
idx=fixtures/opensearch_0_165_vec.faiss
q=queries/opensearch_0_165_vec.fvecs
zero() { sed -E 's/"(took|took_ms|search_us)": ?[0-9.e+-]+/"\1":0/g'; }

# Command line: every mode, k-NN and radial.
cli() { local name=$1; shift; "$bin" search "$@" --out "$out/cli-$name.jsonl" >/dev/null 2>"$work/err" ||
	{ echo "cli $name failed: $(cat "$work/err")" >&2; exit 1; }; }
cli full "$idx" --queries "$q" --k 10 --mode full
cli mmap "$idx" --queries "$q" --k 10 --mode memory_efficient --backend mmap
cli pread "$idx" --queries "$q" --k 10 --mode memory_efficient --backend pread
cli ef64 "$idx" --queries "$q" --k 10 --ef-search 64
cli ondisk "$idx" --queries "$q" --k 10 --mode on_disk --compression 4x --guide-dir "$work"
cli radius "$idx" --queries "$q" --radius 60000

# REST: the same index in each mode, and fixtures of other kinds, on a fresh server.
port=$((20000 + RANDOM % 20000))
"$bin" serve --listen "127.0.0.1:$port" --data-root "$repo/testdata" --guide-dir "$work" 2>"$work/serve.log" &
srv=$!
"$bin" health --url "http://127.0.0.1:$port/_health" --wait 20s >/dev/null
api() { curl -s -X "$1" "http://127.0.0.1:$port$2" -H 'Content-Type: application/json' ${3:+-d "$3"}; echo; }
load() { api PUT "/indexes/$1" "$2" >/dev/null; }
load full "{\"path\":\"$idx\",\"mode\":\"full\"}"
load mmap "{\"path\":\"$idx\",\"mode\":\"memory_efficient\",\"backend\":\"mmap\"}"
load pread "{\"path\":\"$idx\",\"mode\":\"memory_efficient\",\"backend\":\"pread\"}"
load ondisk "{\"path\":\"$idx\",\"mode\":\"on_disk\",\"compression\":\"4x\"}"
for f in hnsw_flat_ip bin_hnsw hnsw_sq_8bit idmap2_hnsw hnsw_ties_l2; do
	load "$f" "{\"path\":\"fixtures/$f.faiss\"}"
done
python3 - "$repo/testdata" "$port" "$out" <<'EOF'
import json, struct, sys, urllib.request
root, port, out = sys.argv[1], sys.argv[2], sys.argv[3]
def post(path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req) as r: return r.read().decode()
    except urllib.error.HTTPError as e: return e.read().decode()
def fvecs(p):
    b = open(p, "rb").read(); d = struct.unpack_from("<i", b)[0]; n = len(b) // (4 + 4 * d)
    return [list(struct.unpack_from(f"<{d}f", b, i * (4 + 4 * d) + 4)) for i in range(n)]
qs = fvecs(f"{root}/queries/opensearch_0_165_vec.fvecs")[:20]
with open(f"{out}/rest-opensearch.txt", "w") as o:
    for name in ["full", "mmap", "pread", "ondisk"]:
        for v in qs:
            o.write(post(f"/indexes/{name}/_search", {"vector": v, "k": 10}))
            o.write(post(f"/indexes/{name}/_search", {"vector": v, "k": 5, "method_parameters": {"ef_search": 64}, "filter": {"ids": list(range(0, 400, 3))}}))
        o.write(post(f"/indexes/{name}/_msearch", {"vectors": qs, "k": 3}))
        o.write(post(f"/indexes/{name}/_search", {"vector": qs[0], "max_distance": 60000}))
for f in ["hnsw_flat_ip", "bin_hnsw", "hnsw_sq_8bit", "idmap2_hnsw", "hnsw_ties_l2"]:
    fx = json.load(open(f"{root}/fixtures/{f}.search.json"))
    with open(f"{out}/rest-{f}.txt", "w") as o:
        for v in fx["queries"][:20]:
            o.write(post(f"/indexes/{f}/_search", {"vector": v, "k": 10}))
EOF
for f in "$out"/rest-*.txt; do zero <"$f" >"$f.tmp" && mv "$f.tmp" "$f"; done
api GET /indexes/full | zero | sed -E 's/"(latency_[a-z0-9_]+|p50[a-z_]*|p99[a-z_]*|queries[a-z_]*|resident_bytes|cache[a-z_]*)": ?[^,}]+/"\1":0/g' >"$out/rest-get.txt"
echo "answers written to $out"
