// Package storage opens a file with a storage backend chosen by name: the
// one place that composes partial's file backends with a block cache
// (blockcache) and the zstd backend (zstd), and knows each one's defaults.
package storage
