package quant

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"unsafe"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/internal/distance"
	"github.com/faiss-sidecar/faiss-sidecar/internal/par"
)

// BuildOptions tunes Build; the zero value is the default.
type BuildOptions struct {
	// Ctx cancels the build (checked between reads); nil never cancels.
	Ctx context.Context
	// Progress, when set, is called from Build's goroutine after each
	// read with the bytes read so far and the total Build will read
	// (training sample plus the full vectors).
	Progress func(done, total int64)
	// ReadSize is the size of each sequential read (default 8 MiB, at
	// least one vector); two are in flight.
	ReadSize int
	// SampleBytes bounds the training read: the value ranges (4x, 5x,
	// 6x, 8x) or the mean and centroids (16x, 32x) come from up to this many
	// bytes of vectors taken as evenly spread runs (default 16 MiB; the
	// whole section when smaller). All but 4x keep the sample in memory
	// while they train.
	SampleBytes int64
	// MemoryBytes, when positive, bounds what the build holds beside the
	// codes it has written: each read to an eighth of it; the training
	// sample of the levels that keep theirs (all but 4x), kept before any
	// code is written (the codes' pages take memory only then), to a third
	// of it plus the codes' bytes (at least one vector each). The sample
	// is given back to the system before encoding starts; its centroids
	// (at most half its bytes) stay until the build ends, and are given
	// back then. The defaults (16 MiB of sample, two 8 MiB reads) can
	// outgrow a small memory budget on their own. A reader's own buffers
	// (an object's read-ahead) are the reader's.
	MemoryBytes int64
	// Seed chooses the 32x random rotation (default a fixed constant, so
	// builds of one file are reproducible).
	Seed uint64
	// Workers encode in parallel (default GOMAXPROCS).
	Workers int
	// NoAVX512 keeps the 16x and 32x training's distance kernel on AVX2
	// where the CPU has AVX-512 (distance.Fast: the same codes).
	NoAVX512 bool
}

// DefaultBuildBytes bounds what a build with the default options holds
// beside the codes: the training sample, its centroids (at most half its
// bytes) and two reads in flight.
const DefaultBuildBytes = defaultSampleBytes*3/2 + 2*defaultReadSize

const (
	defaultReadSize    = 8 << 20
	defaultSampleBytes = 16 << 20
	defaultSeed        = 0x5eed_f00d_c0de_0018
	sampleRuns         = 64
)

// Build reads n little-endian float32 vectors of dimension d stored
// contiguously at [off, off+n·d·4) of r (a FAISS flat storage's codes
// section) and returns their codes at level lvl for metric (L2 or inner
// product). It makes two passes: a training read of a sample, then one
// sequential pass in large reads that encodes every vector. A non-finite
// component is an error naming the vector.
func Build(r io.ReaderAt, off int64, n, d int, metric faissfmt.Metric, lvl Level, opt BuildOptions) (*Codes, error) {
	c, err := newCodes(int64(n), d, metric, lvl)
	if err != nil {
		return nil, err
	}
	b := builder{c: c, r: r, off: off, opt: opt, rowBytes: 4 * int64(d)}
	b.defaults()
	if err := b.run(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

type builder struct {
	c        *Codes
	r        io.ReaderAt
	off      int64
	opt      BuildOptions
	rowBytes int64
	rows     int // rows per read
	done     int64
	total    int64
}

func (b *builder) defaults() {
	o := &b.opt
	if o.Ctx == nil {
		o.Ctx = context.Background()
	}
	if o.ReadSize <= 0 {
		o.ReadSize = defaultReadSize
	}
	if o.SampleBytes <= 0 {
		o.SampleBytes = defaultSampleBytes
	}
	if m := o.MemoryBytes; m > 0 {
		o.ReadSize = int(min(int64(o.ReadSize), max(m/8, b.rowBytes)))
		if b.c.level != Level4x { // 4x streams its sample: nothing kept
			o.SampleBytes = min(o.SampleBytes, max((m+b.c.n*int64(b.c.stride))/3, b.rowBytes))
		}
	}
	if o.Seed == 0 {
		o.Seed = defaultSeed
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	b.rows = int(max(1, int64(o.ReadSize)/b.rowBytes))
}

// span is a run of rows [first, first+n).
type span struct{ first, n int64 }

// sampleSpans spreads up to SampleBytes of rows over sampleRuns evenly
// spaced runs (the whole range when it fits).
func (b *builder) sampleSpans() []span {
	n := b.c.n
	want := max(1, b.opt.SampleBytes/b.rowBytes)
	if want >= n {
		return []span{{0, n}}
	}
	runs := min(int64(sampleRuns), want)
	per := want / runs
	var out []span
	for g := range runs {
		first := g * (n - per) / max(1, runs-1)
		if len(out) > 0 {
			if last := &out[len(out)-1]; first < last.first+last.n {
				first = last.first + last.n
			}
		}
		if first+per > n {
			break
		}
		out = append(out, span{first, per})
	}
	return out
}

func (b *builder) run() error {
	c := b.c
	if c.n == 0 {
		b.train(nil, nil, nil, nil, nil, 0)
		c.dropBuild()
		return nil
	}
	spans := b.sampleSpans()
	var sampled int64
	for _, s := range spans {
		sampled += s.n
	}
	b.total = (sampled + c.n) * b.rowBytes

	// Training pass: streaming statistics of the sample.
	d := c.d
	lo := make([]float32, d)
	hi := make([]float32, d)
	sum := make([]float64, d)
	var integral []bool // 4x: whether every sampled value of a dimension is an integer
	if c.level == Level4x {
		integral = make([]bool, d)
		for j := range integral {
			integral[j] = true
		}
	}
	var kept []float32 // 5x, 6x, 8x, 16x, 32x: the sample itself
	if c.level != Level4x {
		kept = make([]float32, 0, sampled*int64(d))
	}
	for j := range d {
		lo[j], hi[j] = float32(math.Inf(1)), float32(math.Inf(-1))
	}
	for _, s := range spans {
		err := b.stream(s, func(first int64, x []float32) error {
			for i := range len(x) / d {
				v := x[i*d : (i+1)*d]
				if err := finite(v, first+int64(i)); err != nil {
					return err
				}
				for j, f := range v {
					lo[j], hi[j] = min(lo[j], f), max(hi[j], f)
					sum[j] += float64(f)
				}
				for j, f := range integral {
					integral[j] = f && v[j] == float32(math.Round(float64(v[j])))
				}
			}
			if kept != nil {
				kept = append(kept, x...)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	b.train(lo, hi, sum, integral, kept, sampled)
	kept = nil
	if b.opt.MemoryBytes > 0 && c.level != Level4x {
		debug.FreeOSMemory() // the sample's pages, before the codes' are written
	}

	// Encoding pass. 4x checks, until a vector fails, that every vector
	// decodes to itself (Codes.Exact).
	workers := b.opt.Workers
	scratch := make([][]float32, workers)
	var lossy [64]bool // per worker (w % 64)
	err := b.stream(span{0, c.n}, func(first int64, x []float32) error {
		rows := len(x) / d
		var bad [64]error
		par.For(workers, workers, func(w int) {
			if scratch[w] == nil && c.level.codeBits() > 0 {
				scratch[w] = make([]float32, d)
			}
			for i := w * rows / workers; i < (w+1)*rows/workers; i++ {
				v := x[i*d : (i+1)*d]
				id := first + int64(i)
				if err := finite(v, id); err != nil {
					bad[w%len(bad)] = err
					return
				}
				dst := c.rows[id*int64(c.stride) : (id+1)*int64(c.stride)]
				switch c.level {
				case Level4x:
					c.encode4(dst, v)
					if !lossy[w%len(lossy)] && !c.exact4(dst, v) {
						lossy[w%len(lossy)] = true
					}
				case Level8x:
					c.encode8(dst, v)
				case Level5x, Level6x:
					c.encodePlanes(dst, v)
				case Level16x:
					c.encode16(dst, v, scratch[w])
				default:
					c.encode32(dst, v, scratch[w])
				}
			}
		})
		return errors.Join(bad[:]...)
	})
	c.exact = err == nil && c.level == Level4x && !slices.Contains(lossy[:], true)
	c.dropBuild()
	if b.opt.MemoryBytes > 0 {
		debug.FreeOSMemory() // the centroids' build copies and the reads, before the budget's other holders fill
	}
	return err
}

// ErrNonFinite marks a source vector with a NaN or infinite component:
// the file cannot have a guide.
var ErrNonFinite = errors.New("non-finite vector component")

func finite(v []float32, id int64) error {
	for j, f := range v {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return fmt.Errorf("%w: vector %d component %d is %v; compressed codes need finite vectors", ErrNonFinite, id, j, f)
		}
	}
	return nil
}

// train sets the codes' parameters from the training pass's statistics
// of count sampled vectors: the per-dimension minima and maxima, sums,
// and (5x, 6x, 8x, 16x, 32x) the sample itself.
func (b *builder) train(lo, hi []float32, sum []float64, integral []bool, sample []float32, count int64) {
	c := b.c
	switch c.level {
	case Level4x:
		if count == 0 {
			lo, hi = make([]float32, c.d), make([]float32, c.d)
		}
		c.train4(lo, hi, integral)
	case Level5x, Level6x, Level8x:
		c.train8(sample, int(count), b.opt.Workers)
	case Level16x, Level32x:
		c.train32(sample, sum, int(count), b.opt.Seed, b.opt.Workers, distance.Fast(!b.opt.NoAVX512).L2F)
	}
}

// stream reads the rows of s in ReadSize pieces, two in flight, and calls
// fn with each piece decoded to float32 (fn must not keep x).
func (b *builder) stream(s span, fn func(first int64, x []float32) error) error {
	type piece struct {
		first int64
		buf   []float32
		err   error
	}
	ctx, cancel := context.WithCancel(b.opt.Ctx)
	defer cancel()
	d := int64(b.c.d)
	per := int64(b.rows)
	free := make(chan []float32, 2)
	for range 2 {
		free <- make([]float32, min(per, s.n)*d)
	}
	full := make(chan piece, 1)
	go func() {
		defer close(full)
		for first := s.first; first < s.first+s.n; first += per {
			var buf []float32
			select {
			case buf = <-free:
			case <-ctx.Done():
				return
			}
			rows := min(per, s.first+s.n-first)
			buf = buf[:rows*d]
			err := b.read(buf, first)
			select {
			case full <- piece{first, buf, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for want := s.first; want < s.first+s.n; {
		var p piece
		var ok bool
		select {
		case p, ok = <-full:
		case <-ctx.Done():
			return fmt.Errorf("build cancelled: %w", ctx.Err())
		}
		if !ok {
			return fmt.Errorf("build cancelled: %w", context.Cause(ctx))
		}
		if p.err != nil {
			return p.err
		}
		if err := fn(p.first, p.buf); err != nil {
			return err
		}
		rows := int64(len(p.buf)) / d
		want += rows
		b.done += rows * b.rowBytes
		if b.opt.Progress != nil {
			b.opt.Progress(b.done, b.total)
		}
		free <- p.buf
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("build cancelled: %w", err)
		}
	}
	return nil
}

// read fills x with the rows starting at first.
func (b *builder) read(x []float32, first int64) error {
	raw := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 4*len(x))
	at := b.off + first*b.rowBytes
	k, err := b.r.ReadAt(raw, at)
	if k < len(raw) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("reading vectors at byte %d (%d bytes): %w", at, len(raw), err)
	}
	if bigEndian {
		for i, v := range x {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			_ = v
		}
	}
	return nil
}

var bigEndian = binary.NativeEndian.Uint16([]byte{1, 0}) != 1
