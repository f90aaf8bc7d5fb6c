module github.com/faiss-sidecar/faiss-sidecar

go 1.26.8

require (
	github.com/DataDog/zstd v1.5.7
	github.com/SaveTheRbtz/zstd-seekable-format-go/pkg v0.10.0
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/hashicorp/golang-lru/v2 v2.0.7
	github.com/klauspost/compress v1.20.4
	golang.org/x/sys v0.50.0
)

require golang.org/x/sync v0.20.0 // indirect
