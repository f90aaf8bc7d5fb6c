module github.com/faiss-sidecar/faiss-sidecar

go 1.26.8

require (
	github.com/DataDog/zstd v1.5.7
	github.com/hashicorp/golang-lru/v2 v2.0.7
	golang.org/x/sys v0.50.0
)
