package main

import (
	"flag"
	"fmt"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// cacheDirFlags are --cache-dir and --cache-dir-bytes: the local disk cache
// of an s3:// path (search, bench, inspect; serve's cache_dir).
type cacheDirFlags struct {
	dir   string
	bytes int64
	d     *engine.CacheDir // value's, made once
}

// value is the cache directory the flags name, one for the command (every
// index and storage it opens shares it); nil without either flag. It is
// touched only when an s3:// path opens on it.
func (f *cacheDirFlags) value() *engine.CacheDir {
	if f.d == nil && (f.dir != "" || f.bytes != 0) {
		f.d = engine.NewCacheDir(f.dir, f.bytes)
	}
	return f.d
}

func (f *cacheDirFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.dir, "cache-dir", "", "s3:// paths: keep the blocks fetched in this local directory, across runs (checked against the object's ETag; one process at a time)")
	fs.Int64Var(&f.bytes, "cache-dir-bytes", 0, fmt.Sprintf("--cache-dir's budget in bytes, every object in it together (0: %d, 10 GiB)", int64(engine.DefaultCacheDirBytes)))
}
