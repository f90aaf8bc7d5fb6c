package quant

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"syscall"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/internal/filekind"
)

// A guide file stores Codes so a restart need not rebuild them. Layout
// (little-endian; docs/quantization.md):
//
//	0   magic "FSQGUIDE"          8   version u32 (guideVersionOf)
//	12  level u8, metric u8, rotation rounds u8, flags u8 (bit 0: exact)
//	16  n u64    24 d u32    28 stride u32
//	32  params length u64    40 codes length u64
//	48  source size i64    56 source mtime i64 (ns)    64 source hash [32]
//	96  CRC-32C of bytes [0, 96)    100 centroids u32 (16x, 32x; 0 otherwise)
//	104 params, then codes (n·stride bytes)
//	end CRC-32C of every byte before it (u32)
//
// Params: 4x, 5x, 6x and 8x: min then step per dimension (float32); 16x, 32x:
// the origin, then the centroids' min and step per dimension (float32),
// the centroids as 8-bit codes on them (d bytes each), then the
// rotation's 2·rounds sign flips as 64-bit words of d bits each;
// 16x and 32x rows name their centroid (below 'centroids').
// Version 5 is the 32x of many centroids and the level 16x; a 32x guide of an older
// version (one centroid for all vectors, another row layout) is refused
// as corrupt, so it is rebuilt. 8x rows are d 4-bit codes, two a
// byte, the even dimension in the low nibble; 5x and 6x rows are the
// codes' high 4 bits as 8x's, then one plane of d bits per lower bit
// (lowest first), then ‖x̂‖² (float32). Flag exact (4x only, version 4):
// every vector decodes to itself (Codes.Exact).

var (
	// ErrStale: the guide was built from another version of the index
	// file (its SourceID differs); rebuild it.
	ErrStale = errors.New("guide is stale")
	// ErrCorrupt: the guide is damaged or not a guide (magic, version,
	// checksum, sizes or truncation); rebuild it.
	ErrCorrupt = errors.New("guide is corrupt")
)

const (
	guideMagic = "FSQGUIDE"
	// guideVersion is the newest version this build reads and writes.
	// Version 1 holds 4x and 32x; version 2 adds the level 8x, version 3
	// the levels 5x and 6x, with the same layout; version 4 the flag
	// exact, version 5 the 32x of many centroids and 16x (the 32x of versions 1
	// to 4 is no longer read). A guide is written at the oldest version
	// that holds what it holds, so a build that reads only version 1
	// still loads the 4x guides of a newer one (and rebuilds an 8x or
	// exact guide it meets: ErrCorrupt naming the version).
	guideVersion = 5
	flagExact    = 1
	headerLen    = 104
	trailerLen   = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SourceID identifies the index file a guide was built from.
type SourceID struct {
	Size    int64    // file size in bytes
	ModTime int64    // modification time, ns since the Unix epoch
	Hash    [32]byte // SHA-256 of the ranges Identify read
}

// Info describes a guide file without its codes.
type Info struct {
	Path    string
	Version int
	Level   Level
	Metric  faissfmt.Metric
	N       int64
	D       int
	Stride  int  // bytes per vector
	Exact   bool // the codes are the vectors (Codes.Exact)
	// Centroids is how many centroids 16x and 32x codes are centred on (0 for
	// other levels).
	Centroids int
	Bytes     int64 // memory the loaded Codes hold (Codes.Bytes)
	FileSize  int64
	Source    SourceID
}

// guideVersionOf is the version a guide of level l with flags is written
// at: the first that knows both.
func guideVersionOf(l Level, flags uint8) uint32 {
	if flags&flagExact != 0 {
		return 4
	}
	switch l {
	case Level8x:
		return 2
	case Level5x, Level6x:
		return 3
	case Level16x, Level32x:
		return 5
	}
	return 1
}

// header is the fixed part of a guide.
type header struct {
	version   uint32
	level     Level
	metric    faissfmt.Metric
	rounds    int
	flags     uint8
	centroids int
	n         int64
	d, stride int
	paramsLen int64
	codesLen  int64
	src       SourceID
}

func (c *Codes) header(src SourceID) header {
	var flags uint8
	if c.exact {
		flags |= flagExact
	}
	h := header{version: guideVersionOf(c.level, flags), flags: flags, level: c.level, metric: c.metric, n: c.n, d: c.d, stride: c.stride,
		paramsLen: int64(c.paramBytes()), codesLen: int64(len(c.rows)), src: src}
	if c.rot != nil {
		h.rounds = c.rot.rounds
	}
	if c.level.codeBits() > 0 {
		h.centroids = c.k
	}
	return h
}

func (h *header) marshal() []byte {
	b := make([]byte, headerLen)
	copy(b, guideMagic)
	le := binary.LittleEndian
	le.PutUint32(b[8:], h.version)
	b[12], b[13], b[14], b[15] = uint8(h.level), uint8(h.metric), uint8(h.rounds), h.flags
	le.PutUint64(b[16:], uint64(h.n))
	le.PutUint32(b[24:], uint32(h.d))
	le.PutUint32(b[28:], uint32(h.stride))
	le.PutUint64(b[32:], uint64(h.paramsLen))
	le.PutUint64(b[40:], uint64(h.codesLen))
	le.PutUint64(b[48:], uint64(h.src.Size))
	le.PutUint64(b[56:], uint64(h.src.ModTime))
	copy(b[64:96], h.src.Hash[:])
	le.PutUint32(b[96:], crc32.Checksum(b[:96], castagnoli))
	le.PutUint32(b[100:], uint32(h.centroids))
	return b
}

// parseHeader checks the fixed header against itself and the file size.
func parseHeader(b []byte, fileSize int64, name string) (header, error) {
	var h header
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%s: %w: %s", name, ErrCorrupt, fmt.Sprintf(format, a...))
	}
	if fileSize < headerLen+trailerLen || len(b) < headerLen {
		return h, bad("%d bytes is shorter than a guide's header", fileSize)
	}
	if string(b[:8]) != guideMagic {
		return h, bad("not a guide file (no guide magic at its start)") // its bytes are not echoed
	}
	le := binary.LittleEndian
	h.version = le.Uint32(b[8:])
	if h.version < 1 || h.version > guideVersion {
		return h, bad("version %d (this build reads versions 1 to %d)", h.version, guideVersion)
	}
	if got, want := le.Uint32(b[96:]), crc32.Checksum(b[:96], castagnoli); got != want {
		return h, bad("header checksum %08x, computed %08x", got, want)
	}
	h.level, h.metric, h.rounds, h.flags = Level(b[12]), faissfmt.Metric(b[13]), int(b[14]), b[15]
	h.n = int64(le.Uint64(b[16:]))
	h.d = int(le.Uint32(b[24:]))
	h.stride = int(le.Uint32(b[28:]))
	h.paramsLen = int64(le.Uint64(b[32:]))
	h.codesLen = int64(le.Uint64(b[40:]))
	h.src.Size = int64(le.Uint64(b[48:]))
	h.src.ModTime = int64(le.Uint64(b[56:]))
	copy(h.src.Hash[:], b[64:96])
	h.centroids = int(le.Uint32(b[100:]))
	switch {
	case h.level == Level32x && h.version < guideVersionOf(Level32x, 0):
		return h, bad("a version %d 32x guide (one centroid; this build reads the 32x of version %d, many centroids)", h.version, guideVersionOf(Level32x, 0))
	case !h.level.valid():
		return h, bad("unknown level %d", b[12])
	case h.version < guideVersionOf(h.level, 0):
		return h, bad("level %s in a version %d guide (%s came with version %d)", h.level, h.version, h.level, guideVersionOf(h.level, 0))
	case h.flags&^flagExact != 0 || (h.flags != 0 && h.version < guideVersionOf(h.level, h.flags)):
		return h, bad("flags %#x in a version %d guide", h.flags, h.version)
	case h.flags&flagExact != 0 && h.level != Level4x:
		return h, bad("flag exact on a %s guide (4x only)", h.level)
	case checkMetric(h.metric) != nil:
		return h, bad("unsupported metric %d", b[13])
	case h.d < 1 || h.d > faissfmt.MaxDim:
		return h, bad("dimension %d out of range", h.d)
	case h.stride != h.level.BytesPerVector(h.d):
		return h, bad("row stride %d, want %d for %s at d=%d", h.stride, h.level.BytesPerVector(h.d), h.level, h.d)
	case h.n < 0 || h.n > math.MaxInt32:
		return h, bad("vector count %d out of range", h.n)
	case h.level.codeBits() > 0 && h.rounds != rotationRounds(h.d):
		return h, bad("rotation rounds %d, want %d", h.rounds, rotationRounds(h.d))
	case h.level.codeBits() == 0 && h.rounds != 0:
		return h, bad("rotation rounds %d on a %s guide", h.rounds, h.level)
	case h.level.codeBits() > 0 && (h.centroids < 1 || h.centroids > maxCentroids):
		return h, bad("%d centroids (want 1 to %d)", h.centroids, maxCentroids)
	case h.level.codeBits() == 0 && h.centroids != 0:
		return h, bad("%d centroids on a %s guide", h.centroids, h.level)
	}
	if want := paramLen(h.level, h.d, h.rounds, h.centroids); h.paramsLen != want {
		return h, bad("parameters take %d bytes, want %d", h.paramsLen, want)
	}
	if h.codesLen != h.n*int64(h.stride) {
		return h, bad("codes take %d bytes, want %d vectors × %d", h.codesLen, h.n, h.stride)
	}
	if want := headerLen + h.paramsLen + h.codesLen + trailerLen; fileSize != want {
		return h, bad("file is %d bytes; its header describes %d (truncated or padded)", fileSize, want)
	}
	return h, nil
}

func paramLen(l Level, d, rounds, centroids int) int64 {
	if l.sqBits() > 0 {
		return 8 * int64(d)
	}
	return 12*int64(d) + int64(centroids)*int64(d) + 8*int64(2*rounds*words(d))
}

// Encode writes c as a guide for the source src to w.
func (c *Codes) Encode(w io.Writer, src SourceID) (int64, error) {
	crc := crc32.New(castagnoli)
	cw := &countWriter{w: io.MultiWriter(w, crc)}
	h := c.header(src)
	cw.Write(h.marshal())
	cw.Write(c.marshalParams())
	for o := 0; o < len(c.rows); o += 4 << 20 {
		cw.Write(c.rows[o:min(o+4<<20, len(c.rows))])
	}
	cw.Write(binary.LittleEndian.AppendUint32(nil, crc.Sum32()))
	return cw.n, cw.err
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	k, err := c.w.Write(p)
	c.n += int64(k)
	c.err = err
	return k, err
}

func (c *Codes) marshalParams() []byte {
	b := make([]byte, 0, c.paramBytes())
	le := binary.LittleEndian
	floats := func(x []float32) {
		for _, v := range x {
			b = le.AppendUint32(b, math.Float32bits(v))
		}
	}
	if c.level.sqBits() > 0 {
		floats(c.vmin)
		floats(c.delta)
		return b
	}
	floats(c.origin)
	floats(c.vmin)
	floats(c.delta)
	b = append(b, c.cents...)
	for _, s := range c.rot.signs {
		b = le.AppendUint64(b, s)
	}
	return b
}

func (c *Codes) unmarshalParams(b []byte, rounds, centroids int) error {
	le := binary.LittleEndian
	floats := func(n int) ([]float32, error) {
		x := make([]float32, n)
		for j := range x {
			x[j] = math.Float32frombits(le.Uint32(b[4*j:]))
			if math.IsNaN(float64(x[j])) || math.IsInf(float64(x[j]), 0) {
				return nil, fmt.Errorf("parameter %d is %v", j, x[j])
			}
		}
		b = b[4*n:]
		return x, nil
	}
	var err error
	if c.level.sqBits() > 0 {
		if c.vmin, err = floats(c.d); err != nil {
			return err
		}
		if c.delta, err = floats(c.d); err != nil {
			return err
		}
		for j, v := range c.delta {
			if v < 0 {
				return fmt.Errorf("step of dimension %d is negative (%v)", j, v)
			}
		}
		return nil
	}
	if c.origin, err = floats(c.d); err != nil {
		return err
	}
	if c.vmin, err = floats(c.d); err != nil {
		return err
	}
	if c.delta, err = floats(c.d); err != nil {
		return err
	}
	for j, v := range c.delta { // the centroids' codes decode to finite values
		if hi := float64(c.vmin[j]) + 255*float64(v); v < 0 || math.IsInf(float64(float32(hi)), 0) {
			return fmt.Errorf("centroid step of dimension %d is %v (from %v)", j, v, c.vmin[j])
		}
	}
	c.k = centroids
	c.cents = append([]byte(nil), b[:centroids*c.d]...)
	b = b[centroids*c.d:]
	r := &rotator{d: c.d, m: 1 << (bitsLen(c.d) - 1), rounds: rounds}
	r.signs = make([]uint64, 2*rounds*words(c.d))
	for i := range r.signs {
		r.signs[i] = le.Uint64(b[8*i:])
	}
	r.maskPad()
	c.rot = r
	return nil
}

// checkRows refuses rows whose float32 fields (16x, 32x: the three factors;
// 5x, 6x: ‖x̂‖²) are not finite, or (16x, 32x) that name a centroid past the
// last: a build writes none, so one in a guide whose checksums hold was
// written by something else.
func (c *Codes) checkRows() error {
	var at, count int // the fields' offset in a row and how many
	switch {
	case c.level.codeBits() > 0:
		at, count = 0, 3
	case c.level.planes() > 0:
		at, count = c.stride-4, 1
	default:
		return nil
	}
	for v := range c.n {
		row := c.row(int32(v))
		for k := range count {
			if f := f32(row[at+4*k:]); math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				return fmt.Errorf("row %d holds %v", v, f)
			}
		}
		if c.level.codeBits() > 0 {
			if id := int(binary.LittleEndian.Uint16(row[12:])); id >= c.k {
				return fmt.Errorf("row %d names centroid %d of %d", v, id, c.k)
			}
		}
	}
	return nil
}

// Write stores c as the guide file path for source src, atomically: a
// temporary file in the same directory, fsynced, renamed over path, and
// the directory fsynced; a crash leaves the old guide or the new one.
func Write(path string, c *Codes, src SourceID) error { return WriteAs(path, path, c, src) }

// WriteAs is Write naming the guide name in its errors, and the files
// beside it in name's directory (the caller's name for path's).
func WriteAs(path, name string, c *Codes, src SourceID) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("writing guide %s: %w", name, renamedIn(err, dir, filepath.Dir(name)))
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			err = fmt.Errorf("writing guide %s: %w", name, renamedIn(err, dir, filepath.Dir(name)))
		}
	}()
	// Readable as index files usually are (CreateTemp makes it 0600), so
	// a server running as another user can load a guide built ahead.
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	dw := &drainWriter{f: f}
	bw := bufio.NewWriterSize(dw, 1<<20)
	if _, err = c.Encode(bw, src); err != nil {
		return err
	}
	if err = bw.Flush(); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	dropCache(f) // written back: the built Codes hold the rows already
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// drainWriter writes to f and, every drainBytes, writes what it wrote
// back to the device and out of the page cache (writeBack), so a guide
// being written holds at most that much in dirty pages.
type drainWriter struct {
	f           *os.File
	off, synced int64
}

const drainBytes = 2 << 20

func (w *drainWriter) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) { // a large write (Encode's rows) in pieces of what is left to drainBytes
		piece := p[done:min(len(p), done+int(drainBytes-(w.off-w.synced)))]
		n, err := w.f.Write(piece)
		done += n
		w.off += int64(n)
		if err != nil {
			return done, err
		}
		if w.off-w.synced >= drainBytes {
			if err := writeBack(w.f, w.synced, w.off-w.synced); err != nil {
				return done, err
			}
			w.synced = w.off
		}
	}
	return done, nil
}

// IsGuide reports whether head, a file's first bytes, starts as a guide
// file does (its magic), so a tool can tell a guide from an index file.
func IsGuide(head []byte) bool { return len(head) >= 8 && string(head[:8]) == guideMagic }

// ReadInfo reads a guide's header (checked, including its size against
// the file's) without the codes, for inspect. Use Load to check the rest.
func ReadInfo(path string) (Info, error) {
	f, st, err := openRegular(path, path)
	if err != nil {
		return Info{}, err
	}
	defer f.Close()
	b := make([]byte, headerLen)
	if st.Size() >= headerLen {
		if _, err := f.ReadAt(b, 0); err != nil {
			return Info{}, fmt.Errorf("%s: %w", path, err)
		}
	}
	h, err := parseHeader(b, st.Size(), path)
	if err != nil {
		return Info{}, err
	}
	return h.info(path, st.Size()), nil
}

func (h *header) info(path string, size int64) Info {
	return Info{Path: path, Version: int(h.version), Level: h.level, Metric: h.metric, N: h.n, D: h.d, Exact: h.flags&flagExact != 0, Centroids: h.centroids,
		Stride: h.stride, Bytes: h.codesLen + h.paramsLen + 256, FileSize: size, Source: h.src}
}

// Load reads the guide file path and returns its Codes if it was built
// from src: ErrStale when its source identity differs, ErrCorrupt when it
// is damaged (both wrapped in an error naming the file). Every byte is
// checked against the checksum before the Codes are returned.
func Load(path string, src SourceID) (*Codes, error) { return LoadAs(path, path, src) }

// LoadAs is Load naming the guide name in its errors.
func LoadAs(path, name string, src SourceID) (*Codes, error) {
	f, st, err := openRegular(path, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := decode(f, st.Size(), name, &src)
	if err == nil {
		dropCache(f)
	}
	return c, err
}

// openRegular opens a guide file without blocking: a FIFO or a device at
// the path is ErrCorrupt, not an open that waits for a writer.
func openRegular(path, name string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("%w", renamed(err, path, name))
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%w: %s is %s, not a regular file", ErrCorrupt, name, filekind.Of(st.Mode()))
	}
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%w", renamed(err, path, name))
	}
	return f, st, nil
}

// renamed is err, of an operation on the file at path, naming it name
// when err is an *fs.PathError (what package os returns).
func renamed(err error, path, name string) error {
	return rename(err, func(p string) string {
		if p == path {
			return name
		}
		return p
	})
}

// renamedIn is err, of an operation on files in dir, naming them in
// nameDir (the caller's name for dir).
func renamedIn(err error, dir, nameDir string) error {
	return rename(err, func(p string) string {
		if filepath.Dir(p) == dir {
			return filepath.Join(nameDir, filepath.Base(p))
		}
		return p
	})
}

// rename is err with the paths of an *fs.PathError or an *os.LinkError
// (what package os returns) mapped by name.
func rename(err error, name func(string) string) error {
	switch e := err.(type) {
	case *fs.PathError:
		return &fs.PathError{Op: e.Op, Path: name(e.Path), Err: e.Err}
	case *os.LinkError:
		return &os.LinkError{Op: e.Op, Old: name(e.Old), New: name(e.New), Err: e.Err}
	}
	return err
}

// decode reads a guide of size bytes from r; src nil skips the staleness
// check (tests, fuzzing).
func decode(r io.ReaderAt, size int64, name string, src *SourceID) (*Codes, error) {
	b := make([]byte, headerLen)
	if size >= headerLen {
		if _, err := r.ReadAt(b, 0); err != nil {
			return nil, fmt.Errorf("%s: %w: %v", name, ErrCorrupt, err)
		}
	}
	h, err := parseHeader(b, size, name)
	if err != nil {
		return nil, err
	}
	if src != nil && h.src != *src {
		return nil, fmt.Errorf("%s: %w: built from a file of %d bytes, mtime %d, hash %x; the index is %d bytes, mtime %d, hash %x",
			name, ErrStale, h.src.Size, h.src.ModTime, h.src.Hash[:8], src.Size, src.ModTime, src.Hash[:8])
	}
	crc := crc32.New(castagnoli)
	crc.Write(b)
	params := make([]byte, h.paramsLen)
	if err := readAt(r, params, headerLen, crc); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", name, ErrCorrupt, err)
	}
	c, err := newCodes(h.n, h.d, h.metric, h.level)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %v", name, ErrCorrupt, err)
	}
	c.exact = h.flags&flagExact != 0
	fail := func(format string, a ...any) (*Codes, error) {
		c.Close()
		return nil, fmt.Errorf("%s: %w: %s", name, ErrCorrupt, fmt.Sprintf(format, a...))
	}
	if err := readAt(r, c.rows, headerLen+h.paramsLen, crc); err != nil {
		return fail("%v", err)
	}
	var tail [trailerLen]byte
	if err := readAt(r, tail[:], headerLen+h.paramsLen+h.codesLen, nil); err != nil {
		return fail("%v", err)
	}
	if got, want := binary.LittleEndian.Uint32(tail[:]), crc.Sum32(); got != want {
		return fail("checksum %08x, computed %08x", got, want)
	}
	if err := c.unmarshalParams(params, h.rounds, h.centroids); err != nil {
		return fail("%v", err)
	}
	if err := c.checkRows(); err != nil {
		return fail("%v", err)
	}
	return c, nil
}

// readAt fills b from r at off in pieces, feeding h.
func readAt(r io.ReaderAt, b []byte, off int64, h hash.Hash32) error {
	for len(b) > 0 {
		p := b[:min(len(b), 8<<20)]
		k, err := r.ReadAt(p, off)
		if k < len(p) {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("reading %d bytes at %d: %w", len(p), off, err)
		}
		if h != nil {
			h.Write(p)
		}
		if f, ok := r.(*os.File); ok {
			dropRange(f, off, int64(len(p)))
		}
		b, off = b[len(p):], off+int64(len(p))
	}
	return nil
}

// Range is a byte range of the source file that Identify hashes.
type Range struct{ Off, Len int64 }

// Identify computes a source's identity: its size and modification time
// (ns), and the SHA-256 of the bytes of ranges (each preceded by its
// offset and length), which must lie inside [0, size).
func Identify(r io.ReaderAt, size, modTime int64, ranges []Range) (SourceID, error) {
	id := SourceID{Size: size, ModTime: modTime}
	h := sha256.New()
	var buf []byte
	for _, g := range ranges {
		if g.Off < 0 || g.Len < 0 || g.Off > size || g.Len > size-g.Off {
			return id, fmt.Errorf("identity range [%d, +%d) outside the %d-byte file", g.Off, g.Len, size)
		}
		var pre [16]byte
		binary.LittleEndian.PutUint64(pre[:], uint64(g.Off))
		binary.LittleEndian.PutUint64(pre[8:], uint64(g.Len))
		h.Write(pre[:])
		for off, end := g.Off, g.Off+g.Len; off < end; {
			k := min(end-off, 1<<20)
			if int64(cap(buf)) < k {
				buf = make([]byte, k)
			}
			if err := readAt(r, buf[:k], off, nil); err != nil {
				return id, fmt.Errorf("identifying source: %w", err)
			}
			h.Write(buf[:k])
			off += k
		}
	}
	h.Sum(id.Hash[:0])
	return id, nil
}

// Identity block sampling: every byte outside the large sections (headers,
// small arrays, the sections' counts) is hashed, and evenly spaced blocks
// of each section, first and last included.
const (
	identityBlock       = 4096
	identityCodesBlocks = 32
	identityOtherBlocks = 8
)

// IdentityRanges lists the ranges of an opened FAISS file that Identify
// hashes: all bytes outside its sections (bounded by 64 MiB, the rest of
// a larger gap sampled), and sampled blocks of every section.
func IdentityRanges(f *faissfmt.File) []Range {
	var secs []faissfmt.Section
	for x := f.Root; x != nil; x = x.Child {
		secs = append(secs, x.Sections...)
	}
	sortSections(secs)
	var out []Range
	at := int64(0)
	gap := func(off, end int64) {
		if end <= off {
			return
		}
		if end-off <= 64<<20 {
			out = append(out, Range{off, end - off})
			return
		}
		out = append(out, sample(off, end-off, identityCodesBlocks)...)
	}
	for _, s := range secs {
		gap(at, s.Offset)
		blocks := identityOtherBlocks
		if s.Name == "codes" {
			blocks = identityCodesBlocks
		}
		out = append(out, sample(s.Offset, s.Len, blocks)...)
		at = max(at, s.Offset+s.Len)
	}
	gap(at, f.Size)
	return out
}

// IdentifyFile is Identify over IdentityRanges(f).
func IdentifyFile(r io.ReaderAt, f *faissfmt.File, modTime int64) (SourceID, error) {
	return Identify(r, f.Size, modTime, IdentityRanges(f))
}

// sample returns up to blocks evenly spaced identityBlock-byte ranges
// covering [off, off+n), the first and last included.
func sample(off, n int64, blocks int) []Range {
	if n <= int64(blocks)*identityBlock {
		return []Range{{off, n}}
	}
	out := make([]Range, 0, blocks)
	for i := range int64(blocks) {
		o := off + i*(n-identityBlock)/int64(blocks-1)
		out = append(out, Range{o, identityBlock})
	}
	return out
}

func sortSections(s []faissfmt.Section) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j].Offset < s[j-1].Offset; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
