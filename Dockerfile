# syntax=docker/dockerfile:1
# Build: cgo on (the zstd backend uses DataDog/zstd).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=1 go build -trimpath -ldflags="-s -w" -o /out/faiss-sidecar ./cmd/faiss-sidecar

# Runtime: small Debian base (glibc for cgo), non-root user, index files in /data.
FROM debian:bookworm-slim
RUN useradd --no-log-init --uid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin sidecar \
 && mkdir -p /data && chown sidecar /data
COPY --from=build /out/faiss-sidecar /usr/local/bin/faiss-sidecar
USER sidecar
VOLUME ["/data"]
EXPOSE 8080
ENV FAISS_SIDECAR_LISTEN=0.0.0.0:8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["faiss-sidecar", "health", "--url", "http://127.0.0.1:8080/_health"]
# With no --data-root the embedded demo index is served; mount indexes and pass
#   --data-root /data (or FAISS_SIDECAR_DATA_ROOT=/data) and a --config file.
ENTRYPOINT ["faiss-sidecar", "serve"]
