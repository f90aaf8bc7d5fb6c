#!/usr/bin/env bash
# An OpenSearch shard served by faiss-sidecar, end to end, over the segment
# files FAISS wrote in testdata/segments/l2 (see docs/opensearch.md):
# load each segment at "refresh", group them under the shard's alias, search
# the shard with one request and per-segment filters, then "merge" three
# segments into one: load the new segment, swap the alias in one call, delete
# the old ones. Run from the repository's root:
#   bash scripts/opensearch_shard.sh
set -euo pipefail
cd "$(dirname "$0")/.."
port=${PORT:-8093}
url=http://127.0.0.1:$port
go build -o /tmp/faiss-sidecar-demo ./cmd/faiss-sidecar
/tmp/faiss-sidecar-demo serve --listen "127.0.0.1:$port" --data-root testdata/segments 2>/tmp/faiss-sidecar-demo.log &
server=$!
trap 'kill $server; wait $server 2>/dev/null || true' EXIT
/tmp/faiss-sidecar-demo health --url "$url/_health" --wait 10s >/dev/null
call() { echo "> $1 $2 ${3:-}" >&2; curl -fsS -X "$1" "$url$2" -H 'Content-Type: application/json' ${3:+-d "$3"}; }

# Refresh: the plugin wrote one file per segment; load each as its own index.
for s in 0 1 2 3 4 5 6 7; do
	call PUT /indexes/shard0-seg$s "{\"path\": \"l2/_${s}_165_my_vector.faiss\", \"space_type\": \"l2\"}" >/dev/null
done

# The shard is an alias over its segments.
call POST /_aliases '{"actions": [{"add": {"indices": ["shard0-seg0", "shard0-seg1", "shard0-seg2", "shard0-seg3",
  "shard0-seg4", "shard0-seg5", "shard0-seg6", "shard0-seg7"], "alias": "shard0"}}]}'

# One search over the shard: the merged top 5, each hit naming its segment.
# Segment 3's live documents are only docs 1-40 (its filter); others unfiltered.
q='[0.025, 0.463, -6.971, 1.575, 0.384, 1.02, 1.583, -1.314, 3.49, -1.718, 3.33, 4.37, -2.236, -4.278, 0.408, -0.502]'
ids=$(seq -s, 1 40)
call POST /indexes/shard0/_search "{\"vector\": $q, \"k\": 5, \"filters\": {\"shard0-seg3\": {\"ids\": [$ids]}}}"

# Merge: segments 0, 1 and 2 became segment 8. Load it, swap the alias in one
# step (searches see the old set or the new one, never a mix), delete the old.
call PUT /indexes/shard0-seg8 '{"path": "l2/_8_165_my_vector.faiss", "space_type": "l2"}' >/dev/null
call POST /_aliases '{"actions": [{"add": {"index": "shard0-seg8", "alias": "shard0"}},
  {"remove": {"indices": ["shard0-seg0", "shard0-seg1", "shard0-seg2"], "alias": "shard0"}}]}'
for s in 0 1 2; do call DELETE /indexes/shard0-seg$s >/dev/null; done
call GET /_aliases
call POST /indexes/shard0/_search "{\"vector\": $q, \"k\": 5}"
