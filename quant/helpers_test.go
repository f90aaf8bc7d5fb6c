package quant

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/binary"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/internal/distance"
)

const fixtureDir = "../testdata/fixtures"

// dataset is a set of float vectors with where they lie in a reader.
type dataset struct {
	name   string
	r      io.ReaderAt
	off    int64
	n, d   int
	metric faissfmt.Metric
	x      []float32 // the vectors, row-major
	q      [][]float32
	file   *faissfmt.File // for FAISS fixtures
	size   int64
	gt     [][]float64 // exact distances per query (truth)
	kth    []float64
}

// fixture opens a float HNSW-flat (or flat) fixture written by FAISS and
// reads its vectors from the storage's "codes" section.
// fastKernels are the float kernels the tests compare with.
var fastKernels = distance.Fast(true)

func fixture(t testing.TB, name string) *dataset {
	t.Helper()
	return faissFile(t, filepath.Join(fixtureDir, name+".faiss"))
}

// faissFile opens a FAISS float flat or HNSW-flat file and reads its
// vectors; queries are noisy copies of 100 of them.
func faissFile(t testing.TB, path string) *dataset {
	t.Helper()
	name := filepath.Base(path)
	fh, err := os.Open(path)
	if os.IsNotExist(err) && !strings.HasPrefix(path, fixtureDir) {
		t.Skipf("%s is absent (built by bench/gen_search_data.py)", path)
	}
	require.NoError(t, err)
	t.Cleanup(func() { fh.Close() })
	st, err := fh.Stat()
	require.NoError(t, err)
	f, err := faissfmt.Open(fh, st.Size())
	require.NoError(t, err)
	sec, ok := f.Storage.Section("codes")
	require.True(t, ok, "%s has a codes section", name)
	ds := &dataset{name: name, r: fh, off: sec.Offset, n: int(f.Storage.NTotal), d: f.Storage.D,
		metric: f.Storage.Metric, file: f, size: st.Size()}
	raw := make([]byte, sec.Len)
	_, err = fh.ReadAt(raw, sec.Offset)
	require.NoError(t, err)
	ds.x = make([]float32, ds.n*ds.d)
	distance.DecodeFloats(ds.x, raw)
	// Queries: the data's own vectors moved by noise of a tenth of each
	// dimension's spread, so the nearest neighbours are not the vector
	// itself at distance 0.
	rng := rand.New(rand.NewPCG(1, 2))
	sd := spread(ds.x, ds.d)
	for range 100 {
		i := rng.IntN(ds.n)
		q := slices.Clone(ds.x[i*ds.d : (i+1)*ds.d])
		for j := range q {
			q[j] += float32(rng.NormFloat64()) * 0.1 * sd[j]
		}
		ds.q = append(ds.q, q)
	}
	return ds
}

func spread(x []float32, d int) []float32 {
	n := len(x) / d
	sd := make([]float32, d)
	for j := range d {
		var s, s2 float64
		for i := range n {
			v := float64(x[i*d+j])
			s += v
			s2 += v * v
		}
		m := s / float64(n)
		sd[j] = float32(math.Sqrt(max(0, s2/float64(n)-m*m)))
	}
	return sd
}

// fashionMNIST reads Debian's dataset-fashion-mnist (60k train images as
// the base, the first nq test images as queries), or skips.
func fashionMNIST(t testing.TB, nq int, metric faissfmt.Metric) *dataset {
	t.Helper()
	const dir = "/usr/share/datasets/fashion-mnist"
	train := idxImages(t, filepath.Join(dir, "train-images-idx3-ubyte.gz"))
	test := idxImages(t, filepath.Join(dir, "t10k-images-idx3-ubyte.gz"))
	const d = 784
	raw := make([]byte, 4*len(train))
	for i, v := range train {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	ds := &dataset{name: "fashion-mnist", r: bytes.NewReader(raw), n: len(train) / d, d: d, metric: metric, x: train}
	for i := range nq {
		ds.q = append(ds.q, test[i*d:(i+1)*d])
	}
	return ds
}

func idxImages(t testing.TB, path string) []float32 {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		t.Skipf("%s is absent: apt-get install -y dataset-fashion-mnist to run this test", path)
	}
	require.NoError(t, err)
	defer f.Close()
	z, err := gzip.NewReader(f)
	require.NoError(t, err)
	b, err := io.ReadAll(z)
	require.NoError(t, err)
	require.Equal(t, uint32(2051), binary.BigEndian.Uint32(b), "idx image magic")
	b = b[16:]
	x := make([]float32, len(b))
	for i, v := range b {
		x[i] = float32(v)
	}
	return x
}

func (ds *dataset) vec(i int) []float32 { return ds.x[i*ds.d : (i+1)*ds.d] }

// exact is the exact distance in the search's convention (smaller is
// nearer), computed in float64: ground truth for estimator tests only.
func (ds *dataset) exact(q []float32, i int) float64 {
	x := ds.vec(i)
	var s float64
	if ds.metric == faissfmt.MetricL2 {
		for j, v := range q {
			t := float64(v) - float64(x[j])
			s += t * t
		}
		return s
	}
	for j, v := range q {
		s += float64(v) * float64(x[j])
	}
	return -s
}

// exactFast is the same with the SIMD float kernel (fast enough for
// fashion-mnist brute force; results differ from exact in the last bits,
// which recall tolerates by counting ties).
func (ds *dataset) exactFast(q []float32, i int) float64 {
	if ds.metric == faissfmt.MetricL2 {
		return float64(fastKernels.L2F(q, ds.vec(i)))
	}
	return -float64(fastKernels.IPF(q, ds.vec(i)))
}

func (ds *dataset) build(t testing.TB, lvl Level) *Codes {
	t.Helper()
	c, err := Build(ds.r, ds.off, ds.n, ds.d, ds.metric, lvl, BuildOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

type idDist struct {
	id int32
	d  float64
}

// rerankRecall returns recall@k, averaged over queries, of "the R nearest
// by estimate, reranked by exact distance" against exact brute force. A
// returned id counts when its exact distance is within the true k-th's
// (ties count as hits).
func rerankRecall(ds *dataset, c *Codes, k int, rs []int, exact func([]float32, int) float64) []float64 {
	qs := c.NewQuery(true)
	return rerankRecallWith(ds, k, rs, exact, func(v []float32) {
		if err := qs.Reset(v); err != nil {
			panic(err)
		}
	}, func(_ []float32, i int) float32 { return qs.Dist(int32(i)) })
}

// rerankRecallWith is rerankRecall over any estimate (reset prepares the
// query, estimate returns the estimated distance to vector i).
func rerankRecallWith(ds *dataset, k int, rs []int, exact func([]float32, int) float64,
	reset func([]float32), estimate func([]float32, int) float32) []float64 {
	byEst := make([]idDist, ds.n)
	out := make([]float64, len(rs))
	for qi, q := range ds.q {
		ex, kth := ds.truth(qi, k, exact)
		reset(q)
		for i := range byEst {
			byEst[i] = idDist{int32(i), float64(estimate(q, i))}
		}
		slices.SortFunc(byEst, func(a, b idDist) int { return cmp.Compare(a.d, b.d) })
		for ri, r := range rs {
			cand := make([]float64, min(r, ds.n))
			for i := range cand {
				cand[i] = ex[byEst[i].id]
			}
			slices.Sort(cand)
			hits := 0
			for i := 0; i < k && i < len(cand); i++ {
				if cand[i] <= kth {
					hits++
				}
			}
			out[ri] += float64(hits) / float64(k)
		}
	}
	for i := range out {
		out[i] /= float64(len(ds.q))
	}
	return out
}

// truth returns the exact distances from query qi to every vector and the
// k-th smallest, computed once per dataset.
func (ds *dataset) truth(qi, k int, exact func([]float32, int) float64) ([]float64, float64) {
	if ds.gt == nil {
		ds.gt = make([][]float64, len(ds.q))
		ds.kth = make([]float64, len(ds.q))
	}
	if ds.gt[qi] == nil {
		ex := make([]float64, ds.n)
		for i := range ex {
			ex[i] = exact(ds.q[qi], i)
		}
		s := slices.Clone(ex)
		slices.Sort(s)
		ds.gt[qi], ds.kth[qi] = ex, s[min(k, ds.n)-1]
	}
	return ds.gt[qi], ds.kth[qi]
}
