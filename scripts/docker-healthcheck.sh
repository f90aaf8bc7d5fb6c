#!/bin/sh
# The image's HEALTHCHECK: asks /_health at the address serve listens on,
# FAISS_SIDECAR_LISTEN (the entrypoint refuses --listen), through loopback
# when that is every interface.
addr=${FAISS_SIDECAR_LISTEN:-127.0.0.1:8080}
host=${addr%:*}
port=${addr##*:}
case $host in
"" | 0.0.0.0 | "[::]") host=127.0.0.1 ;;
esac
exec faiss-sidecar health --url "http://$host:$port/_health"
