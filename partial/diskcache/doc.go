// Package diskcache is a local-disk cache tier for a remote object (an S3
// object, partial/s3): a partial.Storage in front of it that keeps the
// object's blocks as files in a directory, under a byte budget, and serves
// them from there until they are evicted (least recently used first).
// partial/storage stacks it between the memory block cache
// (partial/blockcache) and the object when a cache directory is given.
//
// # Layout
//
// A cache directory holds a marker file (MarkerName, naming the format),
// a lock file (one process uses a directory at a time; flock where the
// platform has it) and one subdirectory per object, named by a hash of the
// object's name (its s3:// URL). An object's subdirectory holds a meta file
// (MetaName: the name, ETag, size and block size it was filled for) and one
// file per cached block, named by the block number in hex ("1f.blk"). A
// block file is a header, then the block's bytes:
//
//	 0   8  magic "FSDCBLK1"
//	 8  16  version: the first 16 bytes of SHA-256(name, ETag, size, block size)
//	24   8  offset of the block in the object (little endian)
//	32   4  length of the block
//	36   4  chunk size, 4096
//	40   4  CRC-32C of the header but this field
//	44   4  zero
//	48  4k  CRC-32C of each 4096-byte chunk of the block (the last may be shorter)
//
// # Safety
//
// Blocks are written to a temporary file and renamed into place, without
// fsync: after a crash a block may be missing, empty or torn, but then its
// header or checksums no longer match and a read drops it and fetches it
// again. A block's header (magic, version, offset, length, header CRC) is
// checked when its file is opened, and every read checks the CRC-32C of
// each chunk it reads: a chunk that fails is never served, and its block
// is dropped. On open the cache re-reads its directory (blocks in the
// order they were written, oldest first, trimmed to the budget); an object
// opened with another ETag, size or block size than its meta file records
// has its blocks discarded. The bytes of block files (headers included)
// never exceed the budget, except for blocks being written at that moment;
// the in-memory index holds one small entry per block on disk, and up to a
// quarter of the process's descriptor limit (1024 to 16384) block files
// are kept open (closed when evicted).
//
// # Reads
//
// A read checks the disk for each block it spans and reads only the chunks
// it needs from there; the blocks that are not there are fetched whole
// from the object in one ReadBatch (the s3 backend sends them as parallel,
// coalesced GETs), written to disk and returned. Callers missing the same
// block at once wait for one fetch. Above it, partial/storage keeps memory
// blocks of 4 KiB, so a memory miss is one pread of one chunk.
package diskcache
