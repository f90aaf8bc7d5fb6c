# syntax=docker/dockerfile:1
# Build: cgo on (the zstd backend uses DataDog/zstd).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=1 go build -trimpath -ldflags="-s -w" -o /out/faiss-sidecar ./cmd/faiss-sidecar

# Runtime: small Debian base (glibc for cgo) with the CA bundle that https://
# object stores need; a non-root user whose home, /var/lib/faiss-sidecar, is
# a writable volume (on_disk guides; --cache-dir, when wanted); index files
# mounted in /data, usually read-only.
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/*
RUN useradd --no-log-init --uid 10001 --user-group --no-create-home --home-dir /var/lib/faiss-sidecar \
      --shell /usr/sbin/nologin sidecar \
 && mkdir -p /data /var/lib/faiss-sidecar/guides \
 && chown sidecar:sidecar /data /var/lib/faiss-sidecar /var/lib/faiss-sidecar/guides
COPY --from=build /out/faiss-sidecar /usr/local/bin/faiss-sidecar
COPY --chmod=0755 scripts/docker-entrypoint.sh /usr/local/bin/faiss-sidecar-entrypoint
COPY --chmod=0755 scripts/docker-healthcheck.sh /usr/local/bin/faiss-sidecar-healthcheck
USER sidecar
WORKDIR /var/lib/faiss-sidecar
# HOME: os.UserCacheDir and the AWS shared config files resolve under it.
# FAISS_SIDECAR_LISTEN is the address serve listens on and the health check
# asks (the entrypoint refuses --listen); it overrides a config's listen.
ENV HOME=/var/lib/faiss-sidecar \
    FAISS_SIDECAR_LISTEN=0.0.0.0:8080
VOLUME ["/data", "/var/lib/faiss-sidecar"]
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
  CMD ["faiss-sidecar-healthcheck"]
# faiss-sidecar serve --guide-dir /var/lib/faiss-sidecar/guides, then the
# arguments. With no --data-root the embedded demo index is served; mount
# indexes and pass --data-root /data (or FAISS_SIDECAR_DATA_ROOT=/data),
# and a --config file for more. Other commands: --entrypoint faiss-sidecar.
ENTRYPOINT ["faiss-sidecar-entrypoint"]
