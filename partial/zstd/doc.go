// Package zstd is the seekable zstd format: independent zstd frames and a
// seek table at the end, so any range decompresses without the frames
// before it. File is the backend that serves a file's decompressed bytes as
// a partial.Storage, its decoded frames kept in a blockcache.Cache;
// CompressSeekable writes the format, with a checksum per frame that File
// verifies. Decompression needs cgo (Supported).
package zstd
