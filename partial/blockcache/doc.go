// Package blockcache is a block cache in front of a partial.Storage.
//
// Cache is a sharded LRU of blocks with a byte budget, shared by any number
// of files; hits are lock-free, and one device read serves every caller
// that misses the same block at once. Cached serves a Storage's bytes
// through it (the pread backend, and direct with a cache), with zero-copy
// views of cached blocks (partial.BlockViewer). Its blocks live off the Go
// heap: in a mirror laid out like the file when the cache can hold the
// whole file, else in recycled slots; evicted memory is reused only after
// every read section that could see it has ended. Blocks is the same cache
// for a backend that makes its blocks itself (zstd's decoded frames).
package blockcache
