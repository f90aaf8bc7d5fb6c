package main

import "github.com/faiss-sidecar/faiss-sidecar/engine"

// procEnv is what this process decided for every index it opens
// (engine.Env): one S3 client for all its objects, and the kernels'
// instruction set, which main reads from FAISS_SIDECAR_NO_AVX512 before
// any command runs. The libraries keep no such state; the binary does.
var procEnv = &engine.Env{S3: engine.NewS3Client(engine.S3Options{})}
