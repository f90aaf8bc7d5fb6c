package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/quant"
)

// inspectGuide prints an on_disk guide file's parameters (quant.ReadInfo)
// when path is one; ok false for any other file.
func inspectGuide(path string, asJSON bool, stdout io.Writer) (ok bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return false, nil // openSource reports it
	}
	head := make([]byte, 8)
	_, rerr := io.ReadFull(f, head)
	f.Close()
	if rerr != nil || !quant.IsGuide(head) {
		return false, nil
	}
	info, err := quant.ReadInfo(path)
	if err != nil {
		return true, err
	}
	out := struct {
		File     string `json:"file"`
		Kind     string `json:"kind"`
		Version  int    `json:"version"`
		Level    string `json:"compression"`
		Metric   string `json:"metric"`
		N        int64  `json:"ntotal"`
		D        int    `json:"d"`
		Stride   int    `json:"bytes_per_vector"`
		Bytes    int64  `json:"memory_bytes"`
		FileSize int64  `json:"file_size"`
		Exact    bool   `json:"exact"`
		// Centroids: how many centroids 32x codes are centred on (0
		// for other levels).
		Centroids int `json:"centroids"`
		Source    struct {
			Size    int64  `json:"size"`
			ModTime string `json:"mtime"`
			Hash    string `json:"sha256"`
		} `json:"source"`
	}{File: path, Kind: "guide", Version: info.Version, Level: info.Level.String(), Metric: info.Metric.String(),
		N: info.N, D: info.D, Stride: info.Stride, Bytes: info.Bytes, FileSize: info.FileSize, Exact: info.Exact, Centroids: info.Centroids}
	out.Source.Size = info.Source.Size
	out.Source.ModTime = time.Unix(0, info.Source.ModTime).UTC().Format(time.RFC3339Nano)
	out.Source.Hash = hex.EncodeToString(info.Source.Hash[:])
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return true, enc.Encode(out)
	}
	fmt.Fprintf(stdout, "%s: on_disk guide v%d, %s, %s, %d vectors of d=%d, %d bytes a vector, %d bytes in memory (file %d bytes)\n",
		path, out.Version, out.Level, out.Metric, out.N, out.D, out.Stride, out.Bytes, out.FileSize)
	fmt.Fprintf(stdout, "built from an index file of %d bytes, modified %s, sha256 of its sampled bytes %s\n",
		out.Source.Size, out.Source.ModTime, out.Source.Hash)
	if out.Centroids > 0 {
		fmt.Fprintf(stdout, "each vector's signs are taken about the nearest of %d centroids (8-bit, %d bytes)\n", out.Centroids, out.Centroids*out.D)
	}
	if out.Exact {
		fmt.Fprintln(stdout, "exact: the codes are the vectors themselves (at most 256 values a dimension); the rerank reads nothing")
	}
	return true, nil
}
