package rerank

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/faiss-sidecar/faiss-sidecar/internal/distance"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/recordcache"
)

// Strategies names the read strategies.
var Strategies = []string{StrategyDirect, StrategyMmapWillneed, StrategyMmap, StrategyPread, StrategyBatch}

// The read strategies (Store says how each reads).
const (
	StrategyDirect       = "direct"
	StrategyMmapWillneed = "mmap-willneed"
	StrategyMmap         = "mmap"
	StrategyPread        = "pread"
	// StrategyBatch reads through a partial.Storage; the only strategy
	// for an s3:// object.
	StrategyBatch = "batch"
)

// Store reads full-precision vectors by label with one strategy:
//
//   - direct: O_DIRECT; the whole shortlist sorted by offset, overlapping and
//     adjacent aligned blocks coalesced, submitted at once through io_uring
//     (its own kernel-side queue, independent of search concurrency);
//   - mmap-willneed: a MADV_RANDOM mapping; MADV_WILLNEED over every page of
//     the shortlist first, so the kernel reads them in parallel, then copies;
//   - mmap: the same mapping read in place without the advice: for vectors
//     in the page cache (a warm index), where a system call per vector is
//     the cost (a cold one faults its pages in one at a time);
//   - pread: one buffered read per vector, in shortlist order (the baseline);
//   - batch: the whole shortlist as one batch of reads through a
//     partial.Storage (partial.BatchReader): its vectors sorted by offset,
//     grouped by BatchBlock-byte blocks, overlapping and adjacent blocks
//     coalesced, all sent at once. Over an s3:// object that is one round of
//     parallel ranged GETs per shortlist; over a local file, parallel preads.
//
// A Store is safe for concurrent use.
type Store struct {
	Layout
	strategy string
	direct   *partial.Direct
	mm       *partial.Mmap
	file     *partial.File
	batch    partial.Storage // strategy batch's storage
	ownBatch bool            // Close closes batch
	bufs     bufList         // shortlists' working memory, reused
	cache    *recordcache.Cache
	decoder  Decoder
	noAVX512 bool // SetAVX512
}

// Decoder gives vectors from memory bit for bit as the vector file holds
// them: a lossless compressed copy (quant.Codes when Exact).
type Decoder interface {
	// Decode writes vector label's Dim values to dst.
	Decode(label int32, dst []float32)
}

// SetDecoder makes the store take every vector from d instead of reading
// it (nor its cache): the answers are the same, without I/O. Set before
// the store is used.
func (s *Store) SetDecoder(d Decoder) { s.decoder = d }

// SetCache makes the store look vectors up in c (records of 4·Dim bytes
// by label; the caller owns and budgets it) before reading them, and keep
// there those it reads. Set before the store is used; it outlives the
// store's last use.
func (s *Store) SetCache(c *recordcache.Cache) { s.cache = c }

// SetAVX512 lets the rescoring's fast kernel use AVX-512 where the CPU has
// it (on, the default) or keeps it on AVX2 (distance.Fast: the same bits).
// Set before the store is used.
func (s *Store) SetAVX512(on bool) { s.noAVX512 = !on }

// bufs is one shortlist's working memory: the read buffer and the
// bookkeeping of its reads, reused across shortlists so that a query
// allocates nothing once its worker has run one as large.
type bufs struct {
	raw   []byte // read buffer, aligned for direct I/O on the direct strategy
	order []int  // labels' indexes sorted by offset
	spans []span
	reqs  []partial.ReadReq
	miss  []int32 // viewCached's misses …
	at    []int   // … and their indexes into the labels
	// ctx is the reading query's context while the buffers are taken:
	// reads that can block give up when it ends.
	ctx context.Context
}

// rawN returns b.raw resliced to n bytes (not zeroed), made larger first
// when it is short: a quarter more than asked, so the next shortlists, a
// little larger or smaller, reuse it.
func (s *Store) rawN(b *bufs, n int) []byte {
	if cap(b.raw) < n {
		size := max(n+n/4, minArena)
		if s.direct == nil {
			b.raw = make([]byte, size)
		} else {
			b.raw = s.direct.AlignedBuffer(size)
		}
	}
	return b.raw[:n]
}

// minArena is the smallest read buffer made: a shortlist of 100 vectors
// of up to 2 KiB, one 512-byte-aligned span each.
const minArena = 256 << 10

// bufList keeps up to maxFreeBufs shortlists' working memory between
// shortlists. Unlike a sync.Pool it survives collections: under a tight
// memory limit (a memory budget's heap share) the collector runs often,
// and a pool emptied by each one made every shortlist allocate and clear a
// new read buffer, which brought the next collection sooner.
type bufList struct {
	mu   sync.Mutex
	free []*bufs
}

const maxFreeBufs = 8

// take returns the kept bufs whose read buffer is the smallest of at least
// n bytes or, when none is, the one whose buffer is largest (its buffer is
// then replaced by a larger one, not kept beside it, so the list holds
// about as many buffers as shortlists run at once rather than every size
// seen); new bufs when none is kept.
func (a *bufList) take(n int) *bufs {
	a.mu.Lock()
	defer a.mu.Unlock()
	best, largest := -1, -1
	for i, b := range a.free {
		if cap(b.raw) >= n && (best < 0 || cap(b.raw) < cap(a.free[best].raw)) {
			best = i
		}
		if largest < 0 || cap(b.raw) > cap(a.free[largest].raw) {
			largest = i
		}
	}
	i := cmp.Or(best+1, largest+1) - 1
	if i < 0 {
		return new(bufs)
	}
	b := a.free[i]
	last := len(a.free) - 1
	a.free[i], a.free[last] = a.free[last], nil
	a.free = a.free[:last]
	return b
}

// give keeps b for a later take, unless maxFreeBufs are kept already.
func (a *bufList) give(b *bufs) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.free) < maxFreeBufs {
		a.free = append(a.free, b)
	}
}

// FetchStats describes one Fetch.
type FetchStats struct {
	Vectors   int   `json:"vectors"`    // vectors fetched
	Reads     int   `json:"reads"`      // read requests issued (after coalescing)
	BytesRead int64 `json:"bytes_read"` // bytes those requests read (alignment included)
	// Batches counts batches of parallel reads, each one round trip to the
	// storage (1 a shortlist on the direct and batch strategies; 0 on pread
	// and mmap, whose reads go one after another).
	Batches int `json:"batches"`
	// CacheHits counts vectors served by the store's cache (SetCache),
	// neither read nor counted in Reads.
	CacheHits int `json:"cache_hits"`
	// Decoded counts vectors taken from the store's Decoder (SetDecoder),
	// without a read.
	Decoded int `json:"decoded"`
}

// DefaultParallel is how many reads the direct strategy keeps in flight:
// where a cold shortlist's time stops falling as more are added (bench
// rerank).
const DefaultParallel = 128

// Open opens the local vector file at path with strategy, the direct
// strategy keeping DefaultParallel reads in flight. Vectors in an object
// store are read through a storage the caller opens (OpenStorage).
func Open(path, strategy string) (*Store, error) {
	return OpenParallel(path, strategy, 0)
}

// NewBatch reads the vectors l locates through st with strategy batch.
// The Store does not own st: the caller keeps it open while the Store is
// used and closes it after.
func NewBatch(st partial.Storage, l Layout) *Store {
	return &Store{Layout: l, strategy: StrategyBatch, batch: st}
}

// OpenStorage reads the vector file st holds (an object the caller opened:
// every read is a round trip) with strategy batch, naming it name in
// errors; reading its layout gives up when ctx ends. The Store owns st:
// closing it, or OpenStorage failing, closes st.
func OpenStorage(ctx context.Context, st partial.Storage, name string) (*Store, error) {
	l, err := ReadLayout(partial.ReaderAt(ctx, st), st.Size(), name)
	if err != nil {
		st.Close()
		return nil, err
	}
	return &Store{Layout: l, strategy: StrategyBatch, batch: st, ownBatch: true}, nil
}

// OpenParallel is Open with the direct strategy keeping up to parallel
// reads in flight (≤ 0: DefaultParallel; other strategies ignore it).
func OpenParallel(path, strategy string, parallel int) (*Store, error) {
	return openStore(path, path, strategy, parallel)
}

// OpenAs is Open naming the file name (as the user gave it) in errors.
func OpenAs(path, name, strategy string) (*Store, error) {
	return openStore(path, name, strategy, 0)
}

func openStore(path, name, strategy string, parallel int) (*Store, error) {
	if parallel <= 0 {
		parallel = DefaultParallel
	}
	l, err := OpenLayoutAs(path, name)
	if err != nil {
		return nil, err
	}
	if testAfterLayout != nil {
		testAfterLayout(path)
	}
	l.Path = name // the Store's messages name it
	s := &Store{Layout: l, strategy: strategy}
	switch strategy {
	case StrategyDirect:
		s.direct, err = partial.OpenDirect(path, parallel, partial.Named(name))
	case StrategyMmapWillneed, StrategyMmap:
		s.mm, err = partial.OpenMmap(path, partial.Named(name))
	case StrategyPread:
		s.file, err = partial.OpenFile(path, partial.Named(name))
	case StrategyBatch:
		s.file, err = partial.OpenFile(path, partial.Named(name))
		s.batch, s.ownBatch = s.file, true
	default:
		return nil, fmt.Errorf("unknown strategy %q (known: %s)", strategy, strings.Join(Strategies, ", "))
	}
	if err != nil {
		return nil, err
	}
	// The file the strategy opened must be the one whose records the
	// layout checked.
	fi, err := os.Stat(path)
	if err == nil && l.Unchanged(fi) {
		err = s.CheckFile(context.Background())
	} else if err == nil {
		err = partial.ErrFileChanged
	}
	if err != nil {
		s.Close()
		return nil, &changedError{name: name, err: err}
	}
	return s, nil
}

// NewStore reads the vectors l locates (l.Path names them in errors) with
// strategy from st, a storage its caller opened for that strategy: a
// *partial.Direct for direct, a *partial.Mmap for mmap and mmap-willneed,
// a *partial.File for pread; any storage for batch. The Store owns st:
// closing it, or NewStore failing, closes st.
func NewStore(l Layout, strategy string, st partial.Storage) (*Store, error) {
	s := &Store{Layout: l, strategy: strategy}
	ok := true
	switch strategy {
	case StrategyDirect:
		s.direct, ok = st.(*partial.Direct)
	case StrategyMmapWillneed, StrategyMmap:
		s.mm, ok = st.(*partial.Mmap)
	case StrategyPread:
		s.file, ok = st.(*partial.File)
	case StrategyBatch:
		s.batch, s.ownBatch = st, true
	default:
		st.Close()
		return nil, fmt.Errorf("unknown strategy %q (known: %s)", strategy, strings.Join(Strategies, ", "))
	}
	if !ok {
		st.Close()
		return nil, fmt.Errorf("strategy %s does not read a %T", strategy, st)
	}
	return s, nil
}

// changedError is a vector file changed while it was opened.
type changedError struct {
	name string
	err  error
}

func (e *changedError) Error() string {
	return e.name + " changed while it was being opened; open it again"
}
func (e *changedError) Unwrap() []error { return []error{e.err, partial.ErrFileChanged} }

// testAfterLayout, when a test sets it, runs between the layout's check
// of a local file and the strategy's open.
var testAfterLayout func(path string)

// Strategy is the read strategy in use.
func (s *Store) Strategy() string { return s.strategy }

// Close releases the file (not a storage given to NewBatch).
func (s *Store) Close() error {
	switch {
	case s.batch != nil:
		if s.ownBatch {
			return s.batch.Close()
		}
		return nil
	case s.direct != nil:
		return s.direct.Close()
	case s.mm != nil:
		return s.mm.Close()
	}
	return s.file.Close()
}

// Check reports whether the store fits an index of dimension d and ntotal
// vectors, naming the file and the mismatch.
func (s *Store) Check(d int, ntotal int64) error {
	if s.Dim != d {
		return &vectorsError{fmt.Errorf("%s holds %d-dimensional vectors, the index has dimension %d", s.Path, s.Dim, d)}
	}
	if s.Count != ntotal {
		return &vectorsError{fmt.Errorf("%s holds %d vectors, the index has %d", s.Path, s.Count, ntotal)}
	}
	return nil
}

// Fetch reads the vectors of labels into dst (len(labels)·Dim values, in
// label order as given).
func (s *Store) Fetch(labels []int32, dst []float32, st *FetchStats) error {
	d := s.Dim
	if len(dst) < len(labels)*d {
		return fmt.Errorf("Fetch needs %d floats of room, got %d", len(labels)*d, len(dst))
	}
	return s.view(nil, labels, st, func(i int, b []byte) { decode(dst[i*d:(i+1)*d], b) })
}

// view reads the vectors of labels and calls use(i, bytes of labels[i]) for
// each; the bytes are valid only during the call. With a cache, a vector
// found there is used in place and read after all if it was overwritten
// meanwhile: use may then be called twice for one i, the second call with
// the right bytes.
//
// A vector file that changed since it was opened (truncated, overwritten,
// replaced) fails the read with an error wrapping partial.ErrFileChanged,
// as hnswsearch's queries do: a fault on the mapping is recovered into it
// (mmap-willneed), and every read ends with the storage's per-query check
// (partial.FileChecker.CheckFD), so no answer mixes two versions' bytes.
//
// Reads that can block (an object store, a device) give up when ctx ends
// (nil: never).
func (s *Store) view(ctx context.Context, labels []int32, st *FetchStats, use func(i int, b []byte)) (err error) {
	for _, l := range labels {
		if l < 0 || int64(l) >= s.Count {
			return fmt.Errorf("%w: %s: label %d is out of range [0, %d)", ErrVectors, s.Path, l, s.Count)
		}
	}
	if st != nil {
		st.Vectors += len(labels)
	}
	if len(labels) > viewChunk {
		for lo := 0; lo < len(labels); lo += viewChunk {
			part := labels[lo:min(lo+viewChunk, len(labels))]
			if err := s.viewPart(ctx, part, st, func(i int, b []byte) { use(lo+i, b) }); err != nil {
				return err
			}
		}
		return nil
	}
	return s.viewPart(ctx, labels, st, use)
}

// viewChunk is how many vectors one view reads at once at most: a whole
// shortlist of long vectors read at once would take a read buffer of tens
// of MB, more than a small server can spare for one request; 512 keep far
// more reads in flight than a device serves at once, in a few MB.
const viewChunk = 512

// viewPart is view of at most viewChunk labels, checked.
func (s *Store) viewPart(ctx context.Context, labels []int32, st *FetchStats, use func(i int, b []byte)) (err error) {
	b := s.bufs.take(len(labels) * 4 * s.Dim)
	if b.ctx = ctx; ctx == nil {
		b.ctx = context.Background()
	}
	defer func() { b.ctx = nil; s.bufs.give(b) }()
	switch {
	case s.decoder != nil:
		s.viewDecoded(b, labels, st, use)
		return nil
	case s.cache != nil:
		return s.viewCached(b, labels, st, use)
	}
	return s.viewFile(b, labels, st, use)
}

// viewDecoded takes every vector of labels from the decoder.
func (s *Store) viewDecoded(b *bufs, labels []int32, st *FetchStats, use func(i int, b []byte)) {
	raw := s.rawN(b, 4*s.Dim)
	// The values' bytes as the file holds them: little-endian float32.
	x := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(raw))), s.Dim)
	for i, l := range labels {
		s.decoder.Decode(l, x)
		if bigEndian {
			for j, v := range x {
				binary.LittleEndian.PutUint32(raw[4*j:], math.Float32bits(v))
			}
		}
		use(i, raw)
	}
	if st != nil {
		st.Decoded += len(labels)
	}
}

var bigEndian = binary.NativeEndian.Uint16([]byte{1, 0}) != 1

// viewCached serves from the cache the labels it holds intact and reads the
// rest (viewFile), storing them in the cache.
func (s *Store) viewCached(bf *bufs, labels []int32, st *FetchStats, use func(i int, b []byte)) error {
	miss, at := bf.miss[:0], bf.at[:0] // miss[j] is labels[at[j]]
	defer func() { bf.miss, bf.at = miss[:0], at[:0] }()
	for i, l := range labels {
		if b, tok, ok := s.cache.Get(l); ok {
			use(i, b)
			if s.cache.Valid(tok) {
				continue
			}
		}
		miss, at = append(miss, l), append(at, i)
	}
	if st != nil {
		st.CacheHits += len(labels) - len(miss)
	}
	if len(miss) == 0 { // the cached bytes were read from the version opened
		return s.checkFD()
	}
	return s.viewFile(bf, miss, st, func(j int, b []byte) {
		s.cache.Put(miss[j], b)
		use(at[j], b)
	})
}

// viewFile reads the vectors of labels with the store's strategy (view
// without the cache).
func (s *Store) viewFile(b *bufs, labels []int32, st *FetchStats, use func(i int, b []byte)) (err error) {
	switch s.strategy {
	case StrategyDirect:
		err = s.viewDirect(b, labels, st, use)
	case StrategyMmapWillneed, StrategyMmap:
		err = s.viewMmapGuarded(labels, st, use)
	case StrategyBatch:
		err = s.viewBatch(b, labels, st, use)
	default:
		err = s.viewPread(b, labels, st, use)
	}
	if cerr := s.checkFD(); cerr != nil {
		return cerr
	}
	return err
}

// checkFD is the per-query check that the vector file is the version
// opened (partial.FileChecker.CheckFD), which ends every view.
func (s *Store) checkFD() error {
	if err := s.checker().CheckFD(); err != nil {
		return fmt.Errorf("%w", err)
	}
	return nil
}

// viewMmapGuarded is viewMmap with faults on the mapping (a truncated
// file) turned into errors.
func (s *Store) viewMmapGuarded(labels []int32, st *FetchStats, use func(i int, b []byte)) (err error) {
	var fault error
	func() {
		defer partial.RecoverFault(s.mm, debug.SetPanicOnFault(true), &fault)
		err = s.viewMmap(labels, st, use)
	}()
	if fault != nil {
		return fmt.Errorf("%w", fault)
	}
	return err
}

// checker is the open vector file's change check.
func (s *Store) checker() partial.FileChecker {
	switch {
	case s.batch != nil:
		if fc, ok := s.batch.(partial.FileChecker); ok {
			return fc
		}
		return noCheck{}
	case s.direct != nil:
		return s.direct
	case s.mm != nil:
		return s.mm
	}
	return s.file
}

// CheckFile reports whether the vector file changed since it was opened,
// through its descriptor or at its path (partial.FileChecker.CheckFile):
// an error wrapping partial.ErrFileChanged, which stays. A request to an
// object store gives up when ctx ends.
func (s *Store) CheckFile(ctx context.Context) error { return s.checker().CheckFile(ctx) }

// noCheck is the change check of a storage without one.
type noCheck struct{}

func (noCheck) CheckFD() error                  { return nil }
func (noCheck) CheckFile(context.Context) error { return nil }

func decode(dst []float32, b []byte) {
	for j := range dst {
		dst[j] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:]))
	}
}

func (s *Store) viewPread(b *bufs, labels []int32, st *FetchStats, use func(int, []byte)) error {
	buf := s.rawN(b, 4*s.Dim)
	for i, l := range labels {
		off := s.Base + int64(l)*s.Stride
		if _, err := s.file.ReadAtContext(b.ctx, buf, off, nil); err != nil {
			return fmt.Errorf("%s: vector %d: %w", s.Path, l, err)
		}
		use(i, buf)
		if st != nil {
			st.Reads++
			st.BytesRead += int64(len(buf))
		}
	}
	return nil
}

func (s *Store) viewMmap(labels []int32, st *FetchStats, use func(int, []byte)) error {
	n := int64(4 * s.Dim)
	for _, l := range labels {
		if s.strategy == StrategyMmap {
			break
		}
		if err := s.mm.WillNeed(s.Base+int64(l)*s.Stride, n); err != nil {
			return fmt.Errorf("%s: madvise: %w", s.Path, err)
		}
	}
	if err := s.mm.Acquire(); err != nil {
		return err
	}
	defer s.mm.Release()
	// Vectors are loaded into the CPU caches a window ahead of their use,
	// so the misses of a warm shortlist overlap.
	ahead := prefetchAhead
	for i := 0; i < min(ahead, len(labels)); i++ {
		s.prefetch(labels[i], n)
	}
	for i, l := range labels {
		if j := i + ahead; j < len(labels) {
			s.prefetch(labels[j], n)
		}
		b, err := s.mm.View(s.Base+int64(l)*s.Stride, n)
		if err != nil {
			return fmt.Errorf("%s: vector %d: %w", s.Path, l, err)
		}
		use(i, b)
	}
	if st != nil {
		st.Reads += len(labels)
		st.BytesRead += int64(len(labels)) * n
	}
	return nil
}

// prefetchAhead is how many vectors ahead of the one in use viewMmap
// starts loading (a variable for BenchmarkRescoreWarm).
var prefetchAhead = 8

// prefetch starts loading vector l's bytes from the mapping (nothing when
// the range is not mapped: the view that follows reports it).
func (s *Store) prefetch(l int32, n int64) {
	if b, err := s.mm.View(s.Base+int64(l)*s.Stride, n); err == nil {
		distance.Prefetch(b)
	}
}

// span is one coalesced aligned read and the vectors it serves.
type span struct {
	lo, hi int64 // aligned [lo, hi)
	first  int   // index into the sorted order
	n      int
}

// spans sorts labels by offset (order) and groups their vectors into
// spans of align-byte blocks, overlapping and adjacent blocks coalesced,
// none past end; total is the spans' bytes. order and spans live in b.
func (s *Store) spans(b *bufs, labels []int32, align, end int64) (order []int, spans []span, total int64) {
	vlen := int64(4 * s.Dim)
	order = b.order[:0]
	for i := range labels {
		order = append(order, i)
	}
	spans = b.spans[:0]
	defer func() { b.order, b.spans = order, spans }()
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(labels[a], labels[b]) })
	for k, i := range order {
		off := s.Base + int64(labels[i])*s.Stride
		lo := off / align * align
		hi := min((off+vlen+align-1)/align*align, end)
		if n := len(spans); n > 0 && lo <= spans[n-1].hi {
			spans[n-1].hi = max(spans[n-1].hi, hi)
			spans[n-1].n++
			continue
		}
		spans = append(spans, span{lo: lo, hi: hi, first: k, n: 1})
	}
	for _, sp := range spans {
		total += sp.hi - sp.lo
	}
	return order, spans, total
}

// requests lays spans (of total bytes) out in b's read buffer, one read
// request each; the requests live in b.
func (s *Store) requests(b *bufs, spans []span, total int64) []partial.ReadReq {
	raw := s.rawN(b, int(total))
	reqs := b.reqs[:0]
	var at int64
	for _, sp := range spans {
		reqs = append(reqs, partial.ReadReq{Off: sp.lo, Buf: raw[at : at+sp.hi-sp.lo]})
		at += sp.hi - sp.lo
	}
	b.reqs = reqs
	return reqs
}

func (s *Store) viewDirect(b *bufs, labels []int32, st *FetchStats, use func(int, []byte)) error {
	align := s.direct.Alignment()
	vlen := int64(4 * s.Dim)
	size := s.direct.Size()
	order, spans, total := s.spans(b, labels, align, (size+align-1)/align*align)
	reqs := s.requests(b, spans, total)
	if n := len(reqs); n > 0 {
		reqs[n-1].ToEOF = true // the last block may be short at the end of the file
	}
	// Each span's distances are computed as soon as it arrives, while the
	// later reads are in flight.
	var failed error
	// Every request is handed over, with its Err set when it was not read
	// (a closed file's batch too); the batch's own error adds nothing.
	berr := s.direct.ReadBatchEach(b.ctx, reqs, func(j int) {
		q := &reqs[j]
		if q.Err != nil {
			failed = cmp.Or(failed, fmt.Errorf("%s: %w", s.Path, q.Err))
			return
		}
		sp := spans[j]
		for k := sp.first; k < sp.first+sp.n; k++ {
			i := order[k]
			off := s.Base + int64(labels[i])*s.Stride
			use(i, q.Buf[off-sp.lo:off-sp.lo+vlen])
		}
	})
	if berr != nil {
		// A ring that gave up may still write into the buffer later: it is
		// not given to another shortlist.
		b.raw, b.reqs = nil, nil
	}
	if failed != nil {
		return failed
	}
	if st != nil {
		st.Reads += len(spans)
		st.BytesRead += total
		st.Batches++
	}
	return nil
}

// BatchBlock is the block size strategy batch groups vectors by: vectors
// in one block, or in adjacent ones, are read together.
const BatchBlock = 4096

func (s *Store) viewBatch(b *bufs, labels []int32, st *FetchStats, use func(int, []byte)) error {
	vlen := int64(4 * s.Dim)
	order, spans, total := s.spans(b, labels, BatchBlock, s.batch.Size())
	reqs := s.requests(b, spans, total)
	var err error
	if br, ok := s.batch.(partial.BatchReader); ok {
		err = br.ReadBatch(b.ctx, reqs)
	} else { // a storage that does not batch (memory, mmap: no latency to hide)
		for j := range reqs {
			if _, err = s.batch.ReadAtContext(b.ctx, reqs[j].Buf, reqs[j].Off, nil); err != nil {
				break
			}
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", s.Path, err)
	}
	for j, sp := range spans {
		b := reqs[j].Buf
		for k := sp.first; k < sp.first+sp.n; k++ {
			i := order[k]
			off := s.Base + int64(labels[i])*s.Stride
			use(i, b[off-sp.lo:off-sp.lo+vlen])
		}
	}
	if st != nil {
		// What the storage did (coalesced GETs, cache hits), unless its
		// bytes are in memory (a Viewer's: no device read to count).
		reads, bytes := len(reqs), total
		if _, inMemory := s.batch.(partial.Viewer); !inMemory {
			reads, bytes = 0, 0
			for _, q := range reqs {
				reads += int(q.IO.DeviceReads)
				bytes += q.IO.DeviceBytes
			}
		}
		st.Reads += reads
		st.BytesRead += bytes
		if len(reqs) > 0 {
			st.Batches++
		}
	}
	return nil
}
