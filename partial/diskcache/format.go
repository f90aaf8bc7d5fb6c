package diskcache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// On-disk names.
const (
	// MarkerName is the file that makes a directory a disk cache; its
	// content is markerText. A non-empty directory without it is refused,
	// so a mistyped --cache-dir never has its files deleted.
	MarkerName = "FAISS-SIDECAR-CACHE"
	markerText = "faiss-sidecar disk cache, format 1\n"
	lockName   = "lock"
	// MetaName is an object subdirectory's meta file.
	MetaName = "object.json"
	blockExt = ".blk"
	tmpInfix = ".tmp"
	// fixedHeader is a block header's length before its chunk CRCs;
	// chunkSize the piece of a block each CRC covers.
	fixedHeader = 48
	chunkSize   = 4096
	magic       = "FSDCBLK1"
	// maxBlockSize bounds a block (and what a header may claim).
	maxBlockSize = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// version identifies the bytes of one version of an object cut in blocks
// of one size: blocks of another ETag, size or block size never match.
type version [16]byte

func versionOf(m meta) version {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%d", m.Name, m.ETag, m.Size, m.BlockSize)
	var v version
	copy(v[:], h.Sum(nil))
	return v
}

// objectDirName is an object's subdirectory: 32 hex digits of SHA-256 of
// its name.
func objectDirName(name string) string {
	h := sha256.Sum256([]byte(name))
	return hex.EncodeToString(h[:16])
}

// isObjectDirName reports whether s could be an objectDirName.
func isObjectDirName(s string) bool {
	if len(s) != 32 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// blockName is block blk's file name.
func blockName(blk int64) string { return strconv.FormatInt(blk, 16) + blockExt }

// parseBlockName returns the block number of a block file's name; false
// for any other name (temporary files included).
func parseBlockName(s string) (int64, bool) {
	h, ok := strings.CutSuffix(s, blockExt)
	if !ok || h == "" || len(h) > 15 {
		return 0, false
	}
	n, err := strconv.ParseInt(h, 16, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 16) != h {
		return 0, false
	}
	return n, true
}

// meta is what an object's subdirectory was filled for.
type meta struct {
	Format    int    `json:"format"`
	Name      string `json:"name"`
	ETag      string `json:"etag"`
	Size      int64  `json:"size"`
	BlockSize int64  `json:"block_size"`
}

// encodeMeta is meta's file content.
func encodeMeta(m meta) []byte {
	b, _ := json.Marshal(m) // strings and integers only: cannot fail
	return append(b, '\n')
}

// parseMeta reads a meta file; every field is checked.
func parseMeta(b []byte) (meta, error) {
	var m meta
	if len(b) > 64<<10 {
		return m, fmt.Errorf("meta file of %d bytes is too large", len(b))
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("unreadable meta file: %w", err)
	}
	switch {
	case m.Format != 1:
		return m, fmt.Errorf("meta file format %d, want 1", m.Format)
	case m.Name == "" || m.ETag == "":
		return m, errors.New("meta file without a name or ETag")
	case m.Size < 0:
		return m, fmt.Errorf("meta file with size %d", m.Size)
	case checkBlockSize(m.BlockSize) != nil:
		return m, fmt.Errorf("meta file with block size %d", m.BlockSize)
	}
	return m, nil
}

// checkBlockSize: a power of two from 512 to maxBlockSize.
func checkBlockSize(bs int64) error {
	if bs < 512 || bs > maxBlockSize || bs&(bs-1) != 0 {
		return fmt.Errorf("block size %d is not a power of two from 512 to %d", bs, maxBlockSize)
	}
	return nil
}

// header is a block file's header: where the block lies, and the CRC-32C
// of each chunkSize piece of its bytes (so a read of part of a block checks
// only the chunks it reads).
type header struct {
	v     version
	off   int64
	n     uint32
	crcs  []byte // little-endian CRC-32C of each chunk, 4 bytes a chunk
	bytes []byte // the whole encoded header
}

// chunks is the number of chunks of a block of n bytes.
func chunks(n int64) int64 { return (n + chunkSize - 1) / chunkSize }

// headerSize is the length of the header of a block of n bytes.
func headerSize(n int64) int64 { return fixedHeader + 4*chunks(n) }

// encodeHeader is the header of data, the block at off of version v.
func encodeHeader(v version, off int64, data []byte) []byte {
	n := int64(len(data))
	b := make([]byte, headerSize(n))
	copy(b[0:8], magic)
	copy(b[8:24], v[:])
	binary.LittleEndian.PutUint64(b[24:32], uint64(off))
	binary.LittleEndian.PutUint32(b[32:36], uint32(n))
	binary.LittleEndian.PutUint32(b[36:40], chunkSize)
	for i := int64(0); i < chunks(n); i++ {
		binary.LittleEndian.PutUint32(b[fixedHeader+4*i:], checksum(data[i*chunkSize:min((i+1)*chunkSize, n)]))
	}
	binary.LittleEndian.PutUint32(b[40:44], headerCRC(b))
	return b
}

// headerCRC is the CRC-32C of a header but its own field.
func headerCRC(b []byte) uint32 {
	return crc32.Update(checksum(b[:40]), castagnoli, b[fixedHeader:])
}

// decodeHeader parses a block file's header from the start of b (which
// may run on into the data), checking its magic, chunk size, length and
// its own CRC. The header keeps pieces of b.
func decodeHeader(b []byte) (header, error) {
	var h header
	switch {
	case len(b) < fixedHeader:
		return h, fmt.Errorf("block header of %d bytes, want at least %d", len(b), fixedHeader)
	case string(b[0:8]) != magic:
		return h, errors.New("not a block file (bad magic)")
	case binary.LittleEndian.Uint32(b[36:40]) != chunkSize:
		return h, fmt.Errorf("block header with chunks of %d bytes, want %d", binary.LittleEndian.Uint32(b[36:40]), chunkSize)
	case binary.LittleEndian.Uint32(b[44:48]) != 0:
		return h, errors.New("block header padding is not zero")
	}
	copy(h.v[:], b[8:24])
	h.off = int64(binary.LittleEndian.Uint64(b[24:32]))
	h.n = binary.LittleEndian.Uint32(b[32:36])
	if h.off < 0 || h.n == 0 || h.n > maxBlockSize {
		return h, fmt.Errorf("block header with offset %d, length %d", h.off, h.n)
	}
	hs := headerSize(int64(h.n))
	if int64(len(b)) < hs {
		return h, fmt.Errorf("block header of %d bytes, want %d for a block of %d", len(b), hs, h.n)
	}
	h.bytes, h.crcs = b[:hs], b[fixedHeader:hs]
	if binary.LittleEndian.Uint32(b[40:44]) != headerCRC(h.bytes) {
		return h, errors.New("block header checksum mismatch")
	}
	return h, nil
}

// check reports whether h is the header of the n-byte block at off of
// version v, and data holds its bytes from chunk first on (a whole number
// of chunks, or up to the block's end) matching their checksums.
func (h header) check(v version, off, n int64, first int64, data []byte) error {
	switch {
	case h.v != v:
		return errors.New("block of another version of the object")
	case h.off != off || int64(h.n) != n:
		return fmt.Errorf("block header says %d bytes at %d, want %d at %d", h.n, h.off, n, off)
	}
	for i := int64(0); i*chunkSize < int64(len(data)); i++ {
		c := data[i*chunkSize : min((i+1)*chunkSize, int64(len(data)))]
		if checksum(c) != binary.LittleEndian.Uint32(h.crcs[4*(first+i):]) {
			return fmt.Errorf("block data checksum mismatch in chunk %d", first+i)
		}
	}
	return nil
}
