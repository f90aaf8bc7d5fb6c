#!/usr/bin/env bash
# Builds the image from the Dockerfile and checks what the Dockerfile and the
# README promise:
#   - the build context is small (no .git, built binaries, bench-data,
#     fixtures or test binaries: .dockerignore);
#   - it runs as a non-root user with a writable home, and has the CA bundle
#     that https:// object stores need;
#   - its HEALTHCHECK turns healthy on a port other than 8080, set with
#     FAISS_SIDECAR_LISTEN, and --listen (which it could not follow) is
#     refused with the reason;
#   - /data is the data root for mounted index files (paths outside it are
#     refused), an index loaded from there answers the same across a mode
#     switch, and an on_disk index over the read-only mount keeps its guide
#     in the image's writable volume;
#   - FAISS_SIDECAR_TOKEN guards /indexes while /_health stays open.
#   bash scripts/docker_smoke.sh
# Without a container engine (no daemon) it prints SKIP and exits 0.
# Env: DOCKER (docker or podman; default docker), BUILD_ARGS and RUN_ARGS
# (extra flags), PORT (host port; default 18080), MAX_CONTEXT_KB (default
# 5120). Podman as root in a VM with cgroups v1 and no systemd (passed this
# way on 2026-11-30; podman runs no health check by itself there, so this
# script runs it with `podman healthcheck run`):
#   DOCKER="podman --runtime runc" BUILD_ARGS="--isolation chroot --format docker --network host" \
#   RUN_ARGS="--ulimit nofile=4096:4096 --ulimit nproc=4096:4096" bash scripts/docker_smoke.sh
# Without a registry, the two base images (golang:1.26-bookworm with gcc,
# debian:bookworm-slim) must be tagged locally first.
set -euo pipefail
cd "$(dirname "$0")/.."
docker=${DOCKER:-docker}
port=${PORT:-18080}
max_context_kb=${MAX_CONTEXT_KB:-5120}
image=faiss-sidecar:smoke
ctx_image=faiss-sidecar:smoke-context
name=faiss-sidecar-smoke-$$
names=()

if ! command -v "${docker%% *}" >/dev/null 2>&1; then
	echo "SKIP: docker_smoke.sh: no '${docker%% *}' command to build and run the image with (DOCKER: docker or podman)"
	exit 0
fi
if ! $docker info >/dev/null 2>&1; then
	echo "SKIP: docker_smoke.sh: '$docker info' fails: no container engine (daemon) to build and run the image with"
	exit 0
fi
podman=false
$docker --version 2>/dev/null | grep -qi podman && podman=true

data=
sentinels=()
made_bench_data=false
cleanup() {
	for n in "${names[@]}"; do $docker rm -f "$n" >/dev/null 2>&1 || true; done
	rm -rf "$data"
	for f in "${sentinels[@]}"; do rm -f "$f"; done
	if $made_bench_data; then rmdir bench-data 2>/dev/null || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
data=$(mktemp -d)
cp testdata/fixtures/idmap_hnsw.faiss "$data/"
chmod -R a+rX "$data"
# Things a checkout accumulates that must stay out of the build context;
# each is made here only where absent, and removed again.
[ -e bench-data ] || made_bench_data=true
for f in faiss-sidecar bench-data/smoke.sentinel smoke-sentinel.test; do
	if [ ! -e "$f" ]; then
		mkdir -p "$(dirname "$f")"
		sentinels+=("$f")
		{ echo "docker_smoke.sh sentinel (removed when the script ends); safe to delete"; head -c 1048576 /dev/zero; } >"$f"
	fi
done
current=
fail() {
	echo "FAIL: $*" >&2
	[ -n "$current" ] && $docker logs "$current" 2>&1 | tail -20 >&2
	exit 1
}
# start NAME ARGS…: runs the image detached as NAME.
start() {
	local n=$1
	shift
	names+=("$n")
	current=$n
	$docker run -d --name "$n" ${RUN_ARGS:-} "$@" >/dev/null
}
# healthy NAME: waits (up to a minute) for the image's HEALTHCHECK to pass.
healthy() {
	local status=
	for _ in $(seq 60); do
		if $podman; then
			$docker healthcheck run "$1" >/dev/null 2>&1 && return 0
		else
			status=$($docker inspect -f '{{.State.Health.Status}}' "$1")
			[ "$status" = healthy ] && return 0
			[ "$status" = unhealthy ] && break
		fi
		[ "$($docker inspect -f '{{.State.Running}}' "$1")" = true ] || break
		sleep 1
	done
	fail "$1: the HEALTHCHECK did not pass (status '${status:-?}'): $($docker inspect -f '{{json .State.Health}}' "$1" 2>/dev/null | tail -c 400)"
}

# 1. The build context: what COPY . sees, through .dockerignore.
printf 'FROM debian:bookworm-slim\nCOPY . /ctx\n' | $docker build ${BUILD_ARGS:-} -q -t "$ctx_image" -f - . >/dev/null
listing=$($docker run --rm ${RUN_ARGS:-} --entrypoint sh "$ctx_image" -c 'du -sk /ctx | cut -f1; cd /ctx && find . -maxdepth 2 | sort')
$docker rmi "$ctx_image" >/dev/null 2>&1 || true
context_kb=$(echo "$listing" | head -1)
for p in ./.git ./faiss-sidecar ./bench-data ./testdata ./smoke-sentinel.test; do
	echo "$listing" | grep -qx -- "$p" && fail "the build context holds $p (.dockerignore)"
done
echo "$listing" | grep -qx ./cmd/faiss-sidecar || fail "the build context lacks cmd/faiss-sidecar"
[ "$context_kb" -le "$max_context_kb" ] || fail "the build context is $context_kb KiB, over $max_context_kb KiB"

# 2. The image.
$docker build ${BUILD_ARGS:-} -t "$image" .

# 3. A non-default port through FAISS_SIDECAR_LISTEN; /data read-only.
start "$name" -e FAISS_SIDECAR_LISTEN=0.0.0.0:9090 -p "127.0.0.1:$port:9090" -v "$data:/data:ro" "$image" --data-root /data
healthy "$name"
url=http://127.0.0.1:$port
curl -sf "$url/_health" >/dev/null || fail "no answer on $url/_health"

uid=$($docker exec "$name" id -u)
[ "$uid" != 0 ] || fail "the container runs as root"
$docker exec "$name" sh -c 'cd "$HOME" && touch .smoke && rm .smoke' || fail "the runtime user's home is not writable"
$docker exec "$name" sh -c 'test "$(grep -c "BEGIN CERTIFICATE" /etc/ssl/certs/ca-certificates.crt)" -gt 50' ||
	fail "no CA bundle in /etc/ssl/certs/ca-certificates.crt (https:// object stores)"

code=$(curl -s -o /dev/null -w '%{http_code}' -XPUT "$url/indexes/x" -d '{"path":"/etc/passwd","mode":"full"}')
[ "$code" = 403 ] || fail "a path outside /data gave HTTP $code, want 403"
curl -sf -XPUT "$url/indexes/t" -d '{"path":"idmap_hnsw.faiss","mode":"memory_efficient","backend":"mmap"}' >/dev/null || fail "loading from /data"
q='{"vector":[0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.0],"k":5}'
before=$(curl -sf -XPOST "$url/indexes/t/_search" -d "$q" | sed 's/"took":[^,]*,//')
curl -sf -XPUT "$url/indexes/t/_mode" -d '{"mode":"full"}' >/dev/null || fail "switching to full"
after=$(curl -sf -XPOST "$url/indexes/t/_search" -d "$q" | sed 's/"took":[^,]*,//')
[ -n "$before" ] && [ "$before" = "$after" ] || fail "results differ across the switch: $before / $after"

# 4. on_disk over the read-only mount: the guide is written in the volume.
curl -sf -XPUT "$url/indexes/g" -d '{"path":"idmap_hnsw.faiss","mode":"on_disk","compression":"4x"}' >/dev/null || fail "loading on_disk from /data"
curl -sf -XPOST "$url/indexes/g/_search" -d "$q" | grep -q '"hits"' || fail "searching the on_disk index"
info=$(curl -sf "$url/indexes/g")
echo "$info" | grep -q '"path":"/var/lib/faiss-sidecar/guides/' || fail "the guide is not in /var/lib/faiss-sidecar/guides: $info"
echo "$info" | grep -q '"not_saved"' && fail "the guide could not be saved: $info"
$docker exec "$name" sh -c 'ls /var/lib/faiss-sidecar/guides/*.4x.guide' >/dev/null || fail "no guide file in /var/lib/faiss-sidecar/guides"

# 5. --listen is refused with the reason (the health check could not follow it).
if out=$($docker run --rm ${RUN_ARGS:-} "$image" --listen 0.0.0.0:9999 2>&1); then
	fail "--listen was accepted: $out"
fi
echo "$out" | grep -q FAISS_SIDECAR_LISTEN || fail "--listen refused without naming FAISS_SIDECAR_LISTEN: $out"

# 6. The README's token: /indexes needs it, /_health (the health check) does not.
tname=$name-token
start "$tname" -e FAISS_SIDECAR_TOKEN=smoke-token -p "127.0.0.1:$((port + 1)):8080" "$image"
healthy "$tname"
turl=http://127.0.0.1:$((port + 1))
code=$(curl -s -o /dev/null -w '%{http_code}' "$turl/indexes/demo")
[ "$code" = 401 ] || fail "/indexes/demo without the token gave HTTP $code, want 401"
curl -sf -H 'Authorization: Bearer smoke-token' "$turl/indexes/demo" >/dev/null || fail "/indexes/demo with the token"

echo "ok: context ${context_kb} KiB; image $image runs as uid $uid, CA bundle present, healthy on port 9090," \
	"serves /data, switch keeps results, on_disk guide in the volume, --listen refused, token enforced ($(echo "$after" | head -c 60)…)"
