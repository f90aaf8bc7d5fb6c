#!/bin/sh
# The image's entrypoint: faiss-sidecar serve with its arguments, guides of
# on_disk indexes kept in the image's writable volume unless --guide-dir
# says otherwise: mounted indexes are usually read-only, and a guide that
# cannot be written beside its index is rebuilt at every load.
set -eu
guide_dir=/var/lib/faiss-sidecar/guides
for arg in "$@"; do
	case $arg in
	--listen | --listen=* | -listen | -listen=*)
		# The HEALTHCHECK (docker-healthcheck.sh) cannot see arguments.
		echo "faiss-sidecar image: set the listen address with -e FAISS_SIDECAR_LISTEN=HOST:PORT rather than $arg, so that the container's health check asks the same port" >&2
		exit 2
		;;
	--guide-dir | --guide-dir=* | -guide-dir | -guide-dir=*) guide_dir= ;;
	esac
done
if [ -n "$guide_dir" ]; then
	set -- --guide-dir "$guide_dir" "$@"
fi
exec faiss-sidecar serve "$@"
