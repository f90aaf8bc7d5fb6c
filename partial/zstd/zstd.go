package zstd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/blockcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/internal/backendkit"
)

// Zstd seekable format (zstd contrib/seekable_format): independent zstd
// frames followed by a skippable frame holding the seek table:
//
//	magic 0x184D2A5E | frame size u32 | entries (cSize u32, dSize u32[, xxh u32]) | nframes u32 | descriptor u8 | 0x8F92EAB1
//
// Frame checksums (the low 32 bits of XXH64 of the decompressed frame) are
// verified whenever the table carries them; CompressSeekable writes them.
const (
	skippableMagic  = 0x184D2A5E
	seekableMagic   = 0x8F92EAB1
	seekFooterSize  = 9
	maxSeekFrames   = 0x8000000
	maxFrameDecomp  = 0x40000000
	checksumFlag    = 0x80
	reservedBitMask = 0x7c
)

type zframe struct {
	cOff, dOff   int64
	cSize, dSize int64
	sum          uint32 // low 32 bits of XXH64 of the frame's bytes
	hasSum       bool
}

// seekTable parses the seek table at the end of r (size bytes).
func seekTable(r interface {
	ReadAt([]byte, int64) (int, error)
}, size int64, name string) ([]zframe, int64, error) {
	if size < 8+seekFooterSize {
		return nil, 0, fmt.Errorf("%s: too small for a seek table", name)
	}
	var foot [seekFooterSize]byte
	if _, err := r.ReadAt(foot[:], size-seekFooterSize); err != nil {
		return nil, 0, err
	}
	if binary.LittleEndian.Uint32(foot[5:]) != seekableMagic {
		var head [4]byte
		if _, err := r.ReadAt(head[:], 0); err == nil && HasMagic(head[:]) {
			return nil, 0, fmt.Errorf("%s starts with a zstd frame but has no seek table at its end: "+
				"it is truncated, or plain zstd rather than the seekable format (faiss-sidecar compress writes that; or decompress it)", name)
		}
		return nil, 0, fmt.Errorf("%s is not zstd-compressed: no zstd frame at its start, no seek table at its end (last 4 bytes are not 0x8F92EAB1)", name)
	}
	n := int64(binary.LittleEndian.Uint32(foot[0:]))
	desc := foot[4]
	if desc&reservedBitMask != 0 {
		return nil, 0, fmt.Errorf("%s: seek table descriptor %#x has reserved bits set", name, desc)
	}
	entry := int64(8)
	if desc&checksumFlag != 0 {
		entry = 12
	}
	if n > maxSeekFrames || n*entry+seekFooterSize+8 > size {
		return nil, 0, fmt.Errorf("%s: seek table claims %d frames, more than the file holds", name, n)
	}
	tableLen := n*entry + seekFooterSize
	start := size - tableLen - 8
	hdr := make([]byte, 8+n*entry)
	if _, err := r.ReadAt(hdr, start); err != nil {
		return nil, 0, err
	}
	if binary.LittleEndian.Uint32(hdr[0:]) != skippableMagic || int64(binary.LittleEndian.Uint32(hdr[4:])) != tableLen {
		return nil, 0, fmt.Errorf("%s: seek table frame header at byte %d is malformed", name, start)
	}
	frames := make([]zframe, 0, n)
	var cOff, dOff int64
	for i := int64(0); i < n; i++ {
		e := hdr[8+i*entry:]
		f := zframe{cOff: cOff, dOff: dOff, cSize: int64(binary.LittleEndian.Uint32(e[0:])), dSize: int64(binary.LittleEndian.Uint32(e[4:]))}
		if entry == 12 {
			f.sum, f.hasSum = binary.LittleEndian.Uint32(e[8:]), true
		}
		if f.dSize > maxFrameDecomp {
			return nil, 0, fmt.Errorf("%s: frame %d decompresses to %d bytes, more than 1 GiB", name, i, f.dSize)
		}
		cOff += f.cSize
		dOff += f.dSize
		if cOff > start {
			return nil, 0, fmt.Errorf("%s: frame %d ends at byte %d, past the seek table at %d", name, i, cOff, start)
		}
		if f.dSize > 0 { // skippable and empty frames hold no data
			frames = append(frames, f)
		}
	}
	if cOff != start {
		return nil, 0, fmt.Errorf("%s: frames cover %d bytes but the seek table starts at byte %d", name, cOff, start)
	}
	return frames, dOff, nil
}

// Every zstd frame starts with zstdFrameMagic; skippable frames (a seek
// table among them) with 0x184D2A50 … 0x184D2A5F. Both little-endian.
const (
	zstdFrameMagic     = 0xFD2FB528
	skippableMagicMask = 0xFFFFFFF0
)

// HasMagic reports whether b starts with a zstd frame or a skippable
// frame: compressed data, not a file to read in place.
func HasMagic(b []byte) bool {
	if len(b) < 4 {
		return false
	}
	m := binary.LittleEndian.Uint32(b)
	return m == zstdFrameMagic || m&skippableMagicMask == skippableMagic&skippableMagicMask
}

// IsCompressed reports whether the file at path is zstd-compressed in any
// form: a zstd (or skippable) frame at its start, or a seek table at its end.
func IsCompressed(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var head [4]byte
	if n, err := f.ReadAt(head[:], 0); err != nil && n < len(head) && !errors.Is(err, io.EOF) {
		return false, err
	}
	if HasMagic(head[:]) {
		return true, nil
	}
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	_, _, err = seekTable(f, st.Size(), path)
	return err == nil, nil
}

// Supported reports whether this build can decompress zstd (it needs cgo).
const Supported = zstdAvailable

// IsSeekable reports whether the file at path ends with a valid zstd seek
// table.
func IsSeekable(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	return IsSeekableAt(f, st.Size()), nil
}

// IsSeekableAt reports whether the size bytes r holds end with a valid
// zstd seek table.
func IsSeekableAt(r io.ReaderAt, size int64) bool {
	_, _, err := seekTable(r, size, "")
	return err == nil
}

// File serves the decompressed bytes of a zstd seekable file; decoded
// frames are kept in a block cache. It implements partial.Storage,
// StatsReporter and FileChecker.
type File struct {
	raw    partial.Storage // the compressed file
	name   string
	frames []zframe
	size   int64
	cache  *blockcache.Cache
	blocks *blockcache.Blocks // the frames, by number
	life   backendkit.Life

	requests, bytesRequested, hits, misses atomic.Int64
}

// Open opens a zstd seekable file; cache may be nil (a private cache of
// budget bytes is made). Without cgo it fails with errors.ErrUnsupported.
// Errors name the file as opts say (partial.Named).
func Open(path string, cache *blockcache.Cache, budget int64, opts ...partial.OpenOption) (*File, error) {
	if !zstdAvailable {
		return nil, fmt.Errorf("the zstd backend needs cgo (built without it): %w", errors.ErrUnsupported)
	}
	name := partial.NameOf(path, opts...)
	raw, err := partial.OpenFile(path, opts...)
	if err != nil {
		return nil, err
	}
	return New(raw, name, cache, budget)
}

// New serves the decompressed bytes of the zstd seekable file raw holds
// (a partial.File in a served storage, whose file checks and statistics
// are then the File's), named name in errors, as Open does. It takes raw
// over: closing the File, or New failing, closes it.
func New(raw partial.Storage, name string, cache *blockcache.Cache, budget int64) (*File, error) {
	if !zstdAvailable {
		raw.Close()
		return nil, fmt.Errorf("the zstd backend needs cgo (built without it): %w", errors.ErrUnsupported)
	}
	frames, size, err := seekTable(partial.ReaderAt(context.Background(), raw), raw.Size(), name)
	if err != nil {
		raw.Close()
		return nil, err
	}
	switch {
	case cache != nil:
	case budget >= size:
		// The frames bound what a private cache of the whole file holds,
		// so it never needs to evict.
		cache = blockcache.NewWhole(budget)
	default:
		cache = blockcache.New(budget)
	}
	z := &File{raw: raw, name: name, frames: frames, size: size, cache: cache}
	z.blocks = cache.Register(int64(len(frames)))
	z.life.Free = func() error { z.blocks.Forget(); return raw.Close() }
	return z, nil
}

func (z *File) Size() int64 { return z.size }

// Frames is the number of data frames.
func (z *File) Frames() int { return len(z.frames) }

// ReadAtContext reads p at off, adding frame-cache hits and misses (and
// the compressed bytes read for misses) to t (when not nil). It fails at
// once under a ctx that has ended; its frame reads, and its waits for a
// frame another caller is decoding, give up when ctx ends.
func (z *File) ReadAtContext(ctx context.Context, p []byte, off int64, t *partial.Tally) (int, error) {
	if !z.life.Acquire() {
		return 0, backendkit.Closed(z.name)
	}
	defer z.life.Release()
	z.requests.Add(1)
	z.bytesRequested.Add(int64(len(p)))
	if err := backendkit.CheckRange(z.name, off, int64(len(p)), z.size); err != nil {
		return 0, err
	}
	if err := partial.Interrupted(ctx); err != nil {
		return 0, fmt.Errorf("%s: read of %d bytes at offset %d given up: %w", z.name, len(p), off, err)
	}
	i := sort.Search(len(z.frames), func(i int) bool { return z.frames[i].dOff+z.frames[i].dSize > off })
	done := 0
	for done < len(p) {
		f := &z.frames[i]
		b, err := z.frame(ctx, i, t)
		if err != nil {
			return done, err
		}
		pos := off + int64(done)
		done += copy(p[done:], b[pos-f.dOff:])
		i++
	}
	return done, nil
}

func (z *File) frame(ctx context.Context, i int, t *partial.Tally) ([]byte, error) {
	if b, ok := z.blocks.Hit(int64(i), z.frames[i].dSize); ok {
		z.hits.Add(1)
		t.CountLookup(true, 0)
		return b, nil
	}
	f := z.frames[i]
	b, hit, err := z.blocks.Get(ctx, int64(i), func() ([]byte, error) {
		src := make([]byte, f.cSize)
		if _, err := z.raw.ReadAtContext(ctx, src, f.cOff, nil); err != nil {
			return nil, err
		}
		dst := make([]byte, f.dSize)
		n, err := zstdDecompress(dst, src)
		if err != nil {
			return nil, fmt.Errorf("%s: frame %d at byte %d: %w", z.name, i, f.cOff, err)
		}
		if int64(n) != f.dSize {
			return nil, fmt.Errorf("%s: frame %d at byte %d decompressed to %d bytes, the seek table says %d", z.name, i, f.cOff, n, f.dSize)
		}
		if sum := uint32(xxhash.Sum64(dst)); f.hasSum && sum != f.sum {
			return nil, fmt.Errorf("%s: frame %d at byte %d: checksum %#08x does not match the seek table's %#08x", z.name, i, f.cOff, sum, f.sum)
		}
		return dst, nil
	})
	if hit {
		z.hits.Add(1)
	} else {
		z.misses.Add(1)
	}
	t.CountLookup(hit, f.cSize)
	if err != nil {
		// A frame that no longer decodes, or checks, may be another
		// version's: say so when the file changed.
		if cerr := z.CheckFile(ctx); errors.Is(cerr, partial.ErrFileChanged) {
			err = cerr
		}
	}
	return b, err
}

func (z *File) Close() error { return z.life.Close(z.name) }

func (z *File) Stats() partial.Stats {
	s := partial.Stats{Requests: z.requests.Load(), BytesRequested: z.bytesRequested.Load(),
		CacheHits: z.hits.Load(), CacheMisses: z.misses.Load()}
	var in partial.Stats
	if sr, ok := z.raw.(partial.StatsReporter); ok {
		in = sr.Stats()
	}
	s.ReadCalls, s.BytesRead = in.ReadCalls, in.BytesRead
	s.CacheEvictions = z.cache.Evictions()
	s.ResidentBytes = z.cache.Bytes()
	return s
}

// CheckFile checks the compressed file: see partial.FileChecker.
func (z *File) CheckFile(ctx context.Context) error {
	if fc, ok := z.raw.(partial.FileChecker); ok {
		return fc.CheckFile(ctx)
	}
	return nil
}

// CheckFD checks the compressed file: see partial.FileChecker.
func (z *File) CheckFD() error {
	if fc, ok := z.raw.(partial.FileChecker); ok {
		return fc.CheckFD()
	}
	return nil
}
