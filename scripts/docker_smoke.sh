#!/usr/bin/env bash
# Builds the image from the Dockerfile and checks what the Dockerfile
# promises: it runs as a non-root user, serves the embedded demo index, its
# HEALTHCHECK passes, /data is the data root for mounted index files (and
# paths outside it are refused), and an index loaded from there answers and
# switches modes.
#   bash scripts/docker_smoke.sh
# Env: DOCKER (docker or podman; default docker), BUILD_ARGS and RUN_ARGS
# (extra flags), PORT (host port; default 18080). Podman as root in a VM with
# cgroups v1 and no systemd (passed this way on 2026-11-30):
#   DOCKER="podman --runtime runc" BUILD_ARGS="--isolation chroot --format docker --network host" \
#   RUN_ARGS="--ulimit nofile=4096:4096 --ulimit nproc=4096:4096" bash scripts/docker_smoke.sh
# Without a registry, the two base images (golang:1.26-bookworm with gcc,
# debian:bookworm-slim) must be tagged locally first.
set -euo pipefail
cd "$(dirname "$0")/.."
docker=${DOCKER:-docker}
port=${PORT:-18080}
image=faiss-sidecar:smoke
name=faiss-sidecar-smoke-$$
data=$(mktemp -d)
cp testdata/fixtures/idmap_hnsw.faiss "$data/"
chmod -R a+rX "$data"
cleanup() { $docker rm -f "$name" >/dev/null 2>&1 || true; rm -rf "$data"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; $docker logs "$name" 2>&1 | tail -20 >&2 || true; exit 1; }

$docker build ${BUILD_ARGS:-} -t "$image" .
$docker run -d --name "$name" ${RUN_ARGS:-} -p "127.0.0.1:$port:8080" -v "$data:/data:ro" "$image" --data-root /data >/dev/null
url=http://127.0.0.1:$port
for _ in $(seq 50); do curl -sf "$url/_health" >/dev/null && break; sleep 0.2; done
curl -sf "$url/_health" >/dev/null || fail "no answer on $url/_health"

uid=$($docker exec "$name" id -u)
[ "$uid" != 0 ] || fail "the container runs as root"
$docker exec "$name" faiss-sidecar health --url http://127.0.0.1:8080/_health >/dev/null || fail "the HEALTHCHECK command fails"

code=$(curl -s -o /dev/null -w '%{http_code}' -XPUT "$url/indexes/x" -d '{"path":"/etc/passwd","mode":"full"}')
[ "$code" = 403 ] || fail "a path outside /data gave HTTP $code, want 403"
curl -sf -XPUT "$url/indexes/t" -d '{"path":"idmap_hnsw.faiss","mode":"memory_efficient","backend":"mmap"}' >/dev/null || fail "loading from /data"
q='{"vector":[0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.0],"k":5}'
before=$(curl -sf -XPOST "$url/indexes/t/_search" -d "$q" | sed 's/"took":[^,]*,//')
curl -sf -XPUT "$url/indexes/t/_mode" -d '{"mode":"full"}' >/dev/null || fail "switching to full"
after=$(curl -sf -XPOST "$url/indexes/t/_search" -d "$q" | sed 's/"took":[^,]*,//')
[ -n "$before" ] && [ "$before" = "$after" ] || fail "results differ across the switch: $before / $after"
echo "ok: image $image runs as uid $uid, healthy, serves /data, switch keeps results ($(echo "$after" | head -c 80)…)"
