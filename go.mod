module github.com/faiss-sidecar/faiss-sidecar

go 1.26.8
