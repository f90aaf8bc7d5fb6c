package diskcache_test

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/hnswsearch"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/blockcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/diskcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
)

// fileObject is a local file as a disk cache's object: a warm disk cache
// never reads it, so the benchmark needs no S3 server.
type fileObject struct {
	*partial.File
	name, etag string
}

func (f fileObject) Name() string { return f.name }
func (f fileObject) ETag() string { return f.etag }

// BenchmarkWarmDiskVsPread: HNSW searches of one index with one memory
// cache budget, through the pread backend and through what an s3:// path
// with --cache-dir stacks (block cache → disk cache → object), the disk
// cache warm. A warm disk cache should serve at least 0.8× pread's
// queries/s:
//
//	go test -run '^$' -bench WarmDiskVsPread ./partial/diskcache
//
// FAISS_SIDECAR_BENCH_INDEX (a float HNSW index; default the largest
// fixture) and FAISS_SIDECAR_BENCH_CACHE_BYTES (default a quarter of the
// file) choose another index and budget.
func BenchmarkWarmDiskVsPread(b *testing.B) {
	path := os.Getenv("FAISS_SIDECAR_BENCH_INDEX")
	if path == "" {
		path = "../../testdata/fixtures/hnsw_flat_large.faiss"
	}
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	budget := fi.Size() / 4
	if v := os.Getenv("FAISS_SIDECAR_BENCH_CACHE_BYTES"); v != "" {
		if budget, err = strconv.ParseInt(v, 10, 64); err != nil {
			b.Fatal(err)
		}
	}
	stacks := []struct {
		name string
		open func(b *testing.B) partial.Storage
	}{
		{"pread", func(b *testing.B) partial.Storage {
			s, err := storage.Open(context.Background(), path, storage.Options{Backend: "pread", CacheBytes: budget})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{"pread-64k-blocks", func(b *testing.B) partial.Storage {
			s, err := storage.Open(context.Background(), path, storage.Options{Backend: "pread", CacheBytes: budget, BlockSize: s3.DefaultBlockSize})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{"warm-disk", func(b *testing.B) partial.Storage { return warmDisk(b, path, fi, budget, 0) }},
		{"warm-disk-64k-memory-blocks", func(b *testing.B) partial.Storage {
			return warmDisk(b, path, fi, budget, s3.DefaultBlockSize)
		}},
	}
	for _, st := range stacks {
		b.Run("stack="+st.name, func(b *testing.B) {
			s := st.open(b)
			defer s.Close()
			f, err := faissfmt.OpenWith(partial.ReaderAt(context.Background(), s), s.Size(), faissfmt.OpenOptions{})
			if err != nil {
				b.Fatal(err)
			}
			x, err := hnswsearch.New(context.Background(), f, s, hnswsearch.Options{})
			if err != nil {
				b.Fatal(err)
			}
			r := rand.New(rand.NewPCG(3, 3))
			qs := make([][]float32, 256)
			for i := range qs {
				qs[i] = make([]float32, f.Graph.D)
				for j := range qs[i] {
					qs[i][j] = r.Float32()
				}
			}
			p := hnswsearch.Params{K: 10, EfSearch: 64}
			for _, q := range qs { // the memory cache as warm as its budget allows
				if _, _, err := x.Search(q, p, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				dst := make([]hnswsearch.Result, 0, 10)
				i := 0
				for pb.Next() {
					var err error
					if dst, _, err = x.Search(qs[i%len(qs)], p, dst[:0]); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
		})
	}
}

// warmDisk opens path as storage.Open stacks an s3:// object with a cache
// directory (memory blocks of memBlock bytes, 0: its default), the disk
// cache filled first.
func warmDisk(b *testing.B, path string, fi os.FileInfo, budget int64, memBlock int) partial.Storage {
	f, err := partial.OpenFile(path)
	if err != nil {
		b.Fatal(err)
	}
	obj := fileObject{File: f, name: "file://" + path, etag: strconv.FormatInt(fi.ModTime().UnixNano(), 10)}
	dc, err := diskcache.Open(obj, diskcache.Options{Dir: diskcache.NewDir(b.TempDir(), 0)})
	if err != nil {
		b.Fatal(err)
	}
	for off := int64(0); off < dc.Size(); off += 1 << 20 {
		if _, err := dc.ReadAtContext(context.Background(), make([]byte, min(1<<20, dc.Size()-off)), off, nil); err != nil {
			b.Fatal(err)
		}
	}
	if memBlock == 0 {
		memBlock = 4096
	}
	c, err := blockcache.NewCached(path, dc, nil, budget, memBlock)
	if err != nil {
		b.Fatal(err)
	}
	return c
}
