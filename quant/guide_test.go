package quant

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
)

func srcOf(t testing.TB, ds *dataset) SourceID {
	t.Helper()
	id, err := IdentifyFile(ds.r, ds.file, 12345)
	require.NoError(t, err)
	return id
}

// TestGuideRoundTrip: Build → Write → Load gives the same distances bit
// for bit, and ReadInfo reports the parameters; a guide for another
// source is ErrStale.
func TestGuideRoundTrip(t *testing.T) {
	for _, name := range []string{"hnsw_flat_large", "hnsw_flat_ip"} {
		ds := fixture(t, name)
		src := srcOf(t, ds)
		for _, lvl := range Levels {
			c := ds.build(t, lvl)
			path := filepath.Join(t.TempDir(), name+".guide")
			require.NoError(t, Write(path, c, src))
			st, err := os.Stat(path)
			require.NoError(t, err)

			info, err := ReadInfo(path)
			require.NoError(t, err)
			assert.Equal(t, Info{Path: path, Version: int(c.header(src).version), Level: lvl, Metric: ds.metric, N: int64(ds.n), D: ds.d, Exact: c.Exact(),
				Centroids: c.Centroids(), Stride: lvl.BytesPerVector(ds.d), Bytes: c.Bytes(), FileSize: st.Size(), Source: src}, info)
			if lvl.codeBits() > 0 {
				assert.Greater(t, info.Centroids, 1, "32x centres %d vectors on several centroids", ds.n)
			} else {
				assert.Zero(t, info.Centroids)
			}

			l, err := Load(path, src)
			require.NoError(t, err)
			assert.Equal(t, c.Bytes(), l.Bytes())
			q1, q2 := c.NewQuery(true), l.NewQuery(true)
			ids := make([]int32, ds.n)
			for i := range ids {
				ids[i] = int32(i)
			}
			o1, o2 := make([]float32, ds.n), make([]float32, ds.n)
			for _, v := range ds.q[:10] {
				require.NoError(t, q1.Reset(v))
				require.NoError(t, q2.Reset(v))
				q1.DistBatch(ids, o1)
				q2.DistBatch(ids, o2)
				require.Equal(t, o1, o2, "%s %s: loaded codes give the built codes' distances", name, lvl)
			}
			require.NoError(t, l.Close())

			for _, other := range []SourceID{
				{Size: src.Size + 1, ModTime: src.ModTime, Hash: src.Hash},
				{Size: src.Size, ModTime: src.ModTime + 1, Hash: src.Hash},
				func() SourceID { s := src; s.Hash[31] ^= 1; return s }(),
			} {
				_, err := Load(path, other)
				require.ErrorIs(t, err, ErrStale)
				assert.NotErrorIs(t, err, ErrCorrupt)
				assert.ErrorContains(t, err, path)
			}
		}
	}
}

// TestGuideCorrupt: any flipped byte, a truncation or an extension is
// ErrCorrupt naming the file, never a usable Codes.
func TestGuideCorrupt(t *testing.T) {
	ds := fixture(t, "hnsw_flat_l2")
	src := srcOf(t, ds)
	for _, lvl := range Levels {
		c := ds.build(t, lvl)
		var buf bytes.Buffer
		_, err := c.Encode(&buf, src)
		require.NoError(t, err)
		good := buf.Bytes()
		dir := t.TempDir()
		try := func(what string, b []byte) {
			path := filepath.Join(dir, "g")
			require.NoError(t, os.WriteFile(path, b, 0o644))
			l, err := Load(path, src)
			require.ErrorIs(t, err, ErrCorrupt, "%s %s", lvl, what)
			assert.Nil(t, l)
			assert.ErrorContains(t, err, path)
		}
		// every header byte, and bytes across params, codes and trailer
		positions := []int{}
		for i := range headerLen {
			positions = append(positions, i)
		}
		for i := headerLen; i < len(good); i += 1 + len(good)/97 {
			positions = append(positions, i)
		}
		positions = append(positions, len(good)-1)
		for _, i := range positions {
			b := bytes.Clone(good)
			b[i] ^= 0x10
			try("flipped byte", b)
		}
		for _, n := range []int{0, 7, headerLen - 1, headerLen, headerLen + 5, len(good) - 1} {
			try("truncated", good[:n])
		}
		try("extended", append(bytes.Clone(good), 0))
		// A NaN in a row's float field (32x factors, 5x/6x ‖x̂‖²) with the
		// checksum redone, as a writer other than Build could leave it.
		if lvl.codeBits() > 0 || lvl.planes() > 0 {
			b := bytes.Clone(good)
			at := headerLen + int(paramLen(lvl, c.d, rotationRounds(c.d), c.k)) + 3*c.stride // row 3
			if lvl.planes() > 0 {
				at += c.stride - 4
			}
			binary.LittleEndian.PutUint32(b[at:], math.Float32bits(float32(math.NaN())))
			binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
			try("a NaN row field", b)
		}
		if lvl.codeBits() > 0 {
			// A row naming a centroid past the last, checksum redone.
			b := bytes.Clone(good)
			at := headerLen + int(paramLen(lvl, c.d, rotationRounds(c.d), c.k)) + 5*c.stride + 12 // row 5's centroid
			binary.LittleEndian.PutUint16(b[at:], uint16(c.k))
			binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
			try("a row naming centroid k", b)
			// A centroid count of 0 or past the maximum (the header's
			// checksum does not cover it; the sizes and the trailer do).
			// A negative centroid step, or one whose codes overflow float32
			// (params: the mean, then the centroids' min, then their step).
			for _, step := range []float32{-1, 3e36} {
				b := bytes.Clone(good)
				binary.LittleEndian.PutUint32(b[headerLen+8*c.d+4*3:], math.Float32bits(step)) // dimension 3
				binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
				try(fmt.Sprintf("centroid step %v", step), b)
			}
			for _, k := range []uint32{0, maxCentroids + 1, uint32(c.k + 1)} {
				b := bytes.Clone(good)
				binary.LittleEndian.PutUint32(b[100:], k)
				binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
				try(fmt.Sprintf("%d centroids in the header", k), b)
			}
		}
		_, err = ReadInfo(filepath.Join(dir, "missing"))
		assert.Error(t, err)
	}
}

// TestWriteAtomic: a failed write leaves the old guide and no temp file.
func TestWriteAtomic(t *testing.T) {
	ds := fixture(t, "flat_l2")
	src := srcOf(t, ds)
	c := ds.build(t, Level4x)
	dir := t.TempDir()
	path := filepath.Join(dir, "x.guide")
	require.NoError(t, Write(path, c, src))
	require.NoError(t, Write(path, c, src), "overwrite")
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), st.Mode().Perm(), "readable as an index file is")
	err = Write(filepath.Join(dir, "nodir", "x.guide"), c, src)
	require.Error(t, err)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 1, "only the guide; no temporary left")
}

// TestNamedGuide: LoadAs and WriteAs name the guide, and files beside it,
// as their caller does, not by the path they open; errors keep their kinds.
func TestNamedGuide(t *testing.T) {
	ds := fixture(t, "flat_l2")
	src := srcOf(t, ds)
	c := ds.build(t, Level4x)
	dir := t.TempDir()
	_, err := LoadAs(filepath.Join(dir, "missing.guide"), "guides/missing.guide", src)
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), "guides/missing.guide")
	assert.NotContains(t, err.Error(), dir)
	junk := filepath.Join(dir, "junk.guide")
	require.NoError(t, os.WriteFile(junk, bytes.Repeat([]byte("junk"), 64), 0o644))
	_, err = LoadAs(junk, "guides/junk.guide", src)
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), "guides/junk.guide: ")
	assert.NotContains(t, err.Error(), dir)
	err = WriteAs(filepath.Join(dir, "nodir", "x.guide"), "guides/nodir/x.guide", c, src)
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), "writing guide guides/nodir/x.guide: ")
	assert.Contains(t, err.Error(), "guides/nodir/.x.guide.tmp", "the temporary file, in the caller's directory")
	assert.NotContains(t, err.Error(), dir)
}

// TestIdentify: the identity changes with any sampled byte, the size or
// the mtime, and ranges outside the file are refused.
func TestIdentify(t *testing.T) {
	ds := fixture(t, "hnsw_flat_large")
	raw := make([]byte, ds.size)
	_, err := ds.r.ReadAt(raw, 0)
	require.NoError(t, err)
	rs := IdentityRanges(ds.file)
	a, err := Identify(bytes.NewReader(raw), ds.size, 1, rs)
	require.NoError(t, err)
	b, err := Identify(bytes.NewReader(raw), ds.size, 1, rs)
	require.NoError(t, err)
	require.Equal(t, a, b)
	// a byte in the header, and the first byte of the vectors
	for _, off := range []int64{10, ds.off} {
		m := bytes.Clone(raw)
		m[off] ^= 1
		c, err := Identify(bytes.NewReader(m), ds.size, 1, rs)
		require.NoError(t, err)
		assert.NotEqual(t, a.Hash, c.Hash, "byte %d", off)
	}
	_, err = Identify(bytes.NewReader(raw), ds.size, 1, []Range{{ds.size - 2, 4}})
	assert.ErrorContains(t, err, "outside")
	var hashed int64
	for _, r := range rs {
		hashed += r.Len
	}
	assert.Less(t, hashed, ds.size/2, "identity samples the sections")
}

// TestBuildErrors: bad shapes, a non-finite component, a short reader and
// cancellation are clear errors; progress reaches the total.
func TestBuildErrors(t *testing.T) {
	ds := fixture(t, "hnsw_flat_l2")
	_, err := Build(ds.r, ds.off, ds.n, 0, ds.metric, Level4x, BuildOptions{})
	assert.ErrorContains(t, err, "dimension 0")
	_, err = Build(ds.r, ds.off, ds.n, ds.d, 2, Level4x, BuildOptions{})
	assert.ErrorContains(t, err, "metric L1 is not supported")
	_, err = Build(ds.r, ds.off, ds.n, ds.d, ds.metric, 12, BuildOptions{})
	assert.ErrorContains(t, err, "level")
	_, err = Build(ds.r, ds.size-100, ds.n, ds.d, ds.metric, Level32x, BuildOptions{})
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)

	raw := make([]byte, 4*len(ds.x))
	for i, v := range ds.x {
		putF32(raw[4*i:], v)
	}
	putF32(raw[4*(7*ds.d+3):], float32(math.NaN()))
	for _, lvl := range Levels {
		_, err = Build(bytes.NewReader(raw), 0, ds.n, ds.d, ds.metric, lvl, BuildOptions{})
		assert.ErrorContains(t, err, "vector 7 component 3 is NaN")
	}

	var last, total int64
	calls := 0
	c, err := Build(ds.r, ds.off, ds.n, ds.d, ds.metric, Level4x, BuildOptions{ReadSize: 1000,
		Progress: func(done, tot int64) { assert.Greater(t, done, last); last, total = done, tot; calls++ }})
	require.NoError(t, err)
	c.Close()
	assert.Equal(t, total, last)
	assert.Equal(t, int64(2*4*ds.n*ds.d), total, "sample (all of it) plus the pass")
	assert.Greater(t, calls, 10)

	ctx, cancel := context.WithCancel(context.Background())
	_, err = Build(ds.r, ds.off, ds.n, ds.d, ds.metric, Level32x, BuildOptions{Ctx: ctx, ReadSize: 1000,
		Progress: func(done, _ int64) {
			if done > 10000 {
				cancel()
			}
		}})
	assert.ErrorIs(t, err, context.Canceled)
}

// TestBuildMemoryBytes: MemoryBytes bounds each read to an eighth of it
// and the training sample of a level that keeps it (all but 4x) to a
// third of it and the codes' bytes (whole vectors, at least one), and
// every level builds from so small a sample.
func TestBuildMemoryBytes(t *testing.T) {
	ds := fixture(t, "hnsw_flat_l2")
	row := int64(4 * ds.d)
	for _, mem := range []int64{1, 40 * row, 400 * row} {
		for _, lvl := range Levels {
			r := &maxRead{r: ds.r}
			var total int64
			c, err := Build(r, ds.off, ds.n, ds.d, ds.metric, lvl, BuildOptions{MemoryBytes: mem,
				Progress: func(_, tot int64) { total = tot }})
			require.NoError(t, err, "%s at %d", lvl, mem)
			readRows := max(1, mem/8/row)
			sampleRows := max(1, (mem+int64(ds.n*lvl.BytesPerVector(ds.d)))/3/row)
			if lvl == Level4x { // a sample streamed, not kept: the default's
				sampleRows = min(int64(ds.n), defaultSampleBytes/row)
			}
			assert.LessOrEqual(t, r.max, readRows*row, "%s at %d: each read", lvl, mem)
			if lvl == Level4x {
				assert.Equal(t, sampleRows*row, total-int64(ds.n)*row, "%s at %d: the whole sample", lvl, mem)
			} else {
				assert.LessOrEqual(t, total-int64(ds.n)*row, sampleRows*row, "%s at %d: the sample", lvl, mem)
			}
			assert.Positive(t, total-int64(ds.n)*row, "%s at %d: a sample", lvl, mem)
			c.Close()
		}
	}
}

// maxRead records the largest read through it.
type maxRead struct {
	r   io.ReaderAt
	mu  sync.Mutex
	max int64
}

func (m *maxRead) ReadAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	m.max = max(m.max, int64(len(p)))
	m.mu.Unlock()
	return m.r.ReadAt(p, off)
}

// TestEmpty: zero vectors build, write and load.
func TestEmpty(t *testing.T) {
	for _, lvl := range Levels {
		c, err := Build(bytes.NewReader(nil), 0, 0, 8, 1, lvl, BuildOptions{})
		require.NoError(t, err)
		path := filepath.Join(t.TempDir(), "g")
		require.NoError(t, Write(path, c, SourceID{}))
		l, err := Load(path, SourceID{})
		require.NoError(t, err)
		n, d := l.Shape()
		assert.Equal(t, int64(0), n)
		assert.Equal(t, 8, d)
		require.NoError(t, l.Close())
		require.NoError(t, l.Close(), "twice")
	}
}

// FuzzLoad: arbitrary bytes never panic the guide parser nor make it
// allocate beyond the input's size; anything but a valid guide is an
// error, and a corrupt one ErrCorrupt.
func FuzzLoad(f *testing.F) {
	ds := fixture(f, "hnsw_flat_ip")
	for _, lvl := range Levels {
		c := ds.build(f, lvl)
		var buf bytes.Buffer
		_, err := c.Encode(&buf, SourceID{Size: 1})
		require.NoError(f, err)
		f.Add(buf.Bytes())
	}
	// an exact 4x guide (flag, version 4)
	x := integerVectors(20, 8, false)
	raw := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 4*len(x))
	c, err := Build(bytes.NewReader(raw), 0, 20, 8, faissfmt.MetricL2, Level4x, BuildOptions{})
	require.NoError(f, err)
	require.True(f, c.Exact())
	var buf bytes.Buffer
	_, err = c.Encode(&buf, SourceID{Size: 1})
	require.NoError(f, err)
	f.Add(buf.Bytes())
	c.Close()
	f.Add([]byte("FSQGUIDE"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decode(bytes.NewReader(b), int64(len(b)), "fuzz", nil)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		defer c.Close()
		n, d := c.Shape()
		if n*int64(c.stride)+int64(d) > int64(len(b)) {
			t.Fatalf("%d vectors of dimension %d from %d bytes", n, d, len(b))
		}
		q := c.NewQuery(true)
		if err := q.Reset(make([]float32, d)); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			q.Dist(int32(n - 1))
			if c.Level() == Level4x {
				c.Decode(int32(n-1), make([]float32, d))
			}
		}
	})
}

// TestGuideVersions: 4x guides are still written as version 1 (a build
// that reads only version 1 keeps loading them), 8x as version 2, 5x and
// 6x as 3, 32x (many centroids) as 5; this build refuses as ErrCorrupt a
// guide claiming a version before its level's (a 32x before 5 had one
// centroid and another layout) and a version it does not know, naming
// the version.
func TestGuideVersions(t *testing.T) {
	ds := fixture(t, "hnsw_flat_l2")
	src := srcOf(t, ds)
	dir := t.TempDir()
	for lvl, want := range map[Level]uint32{Level4x: 1, Level16x: 5, Level32x: 5, Level8x: 2, Level5x: 3, Level6x: 3} {
		c := ds.build(t, lvl)
		var buf bytes.Buffer
		_, err := c.Encode(&buf, src)
		require.NoError(t, err)
		good := buf.Bytes()
		require.Equal(t, want, binary.LittleEndian.Uint32(good[8:]), "%s is written as version %d", lvl, want)
		path := filepath.Join(dir, lvl.String())
		require.NoError(t, os.WriteFile(path, good, 0o644))
		info, err := ReadInfo(path)
		require.NoError(t, err)
		assert.Equal(t, int(want), info.Version)

		// Another version, with the header's checksum and the trailer's
		// redone so only the version is wrong.
		for _, v := range []uint32{0, want - 1, 2, 3, 4, 5, 6, 1 << 31} {
			if v == want {
				continue
			}
			b := bytes.Clone(good)
			binary.LittleEndian.PutUint32(b[8:], v)
			binary.LittleEndian.PutUint32(b[96:], crc32.Checksum(b[:96], castagnoli))
			binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
			require.NoError(t, os.WriteFile(path, b, 0o644))
			_, err := Load(path, src)
			if v >= want && v <= guideVersion { // a later version knows the level too
				require.NoError(t, err, "%s as version %d", lvl, v)
				continue
			}
			require.ErrorIs(t, err, ErrCorrupt, "%s as version %d", lvl, v)
			assert.ErrorContains(t, err, "version")
		}
	}
	// A 4x guide relabelled version 2 still loads (version 2 knows 4x).
	c := ds.build(t, Level4x)
	var buf bytes.Buffer
	_, err := c.Encode(&buf, src)
	require.NoError(t, err)
	b := buf.Bytes()
	binary.LittleEndian.PutUint32(b[8:], 2)
	binary.LittleEndian.PutUint32(b[96:], crc32.Checksum(b[:96], castagnoli))
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
	l, err := decode(bytes.NewReader(b), int64(len(b)), "v2", &src)
	require.NoError(t, err)
	l.Close()
}
