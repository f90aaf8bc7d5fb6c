package hnswsearch

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/internal/distance"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
)

// exactGuide is a "guide" holding the vectors uncompressed and computing
// FAISS's exact distances: a search on it must return exactly what FAISS
// returns, which tests the guide's plumbing apart from any quantizer.
type exactGuide struct {
	codes []byte
	n     int64
	d     int
	ip    bool
}

func (g *exactGuide) Shape() (int64, int)      { return g.n, g.d }
func (g *exactGuide) NewQuery(bool) GuideQuery { return &exactGuideQuery{g: g} }

type exactGuideQuery struct {
	g *exactGuide
	q []float32
}

func (e *exactGuideQuery) Reset(q []float32) error {
	e.q = append(e.q[:0], q...)
	return nil
}

func (e *exactGuideQuery) Dist(v int32) float32 {
	cs := int64(e.g.d) * 4
	c := e.g.codes[int64(v)*cs : int64(v+1)*cs]
	if e.g.ip {
		return -distance.IPExact(e.q, c)
	}
	return distance.L2Exact(e.q, c)
}

func (e *exactGuideQuery) DistBatch(ids []int32, out []float32) {
	for i, v := range ids {
		out[i] = e.Dist(v)
	}
}

// newExactGuide reads a fixture's vectors into an exactGuide.
func newExactGuide(t *testing.T, s partial.Storage) *exactGuide {
	f, err := faissfmt.Open(partial.ReaderAt(context.Background(), s), s.Size())
	require.NoError(t, err)
	sec, ok := f.Storage.Section("codes")
	require.True(t, ok)
	g := &exactGuide{codes: make([]byte, sec.Len), n: f.Graph.NTotal, d: f.Graph.D, ip: f.Graph.Metric == faissfmt.MetricInnerProduct}
	_, err = s.ReadAtContext(context.Background(), g.codes, sec.Offset, nil)
	require.NoError(t, err)
	return g
}

// TestGuideParity: with an exact guide, searches return FAISS's ids and
// distances bit for bit, compute every distance on the guide, and read no
// vector from storage (lists and id map pinned: nothing at all).
func TestGuideParity(t *testing.T) {
	for _, fx := range []string{"hnsw_flat_l2", "hnsw_flat_ip", "hnsw_flat_large", "idmap_hnsw"} {
		t.Run(fx, func(t *testing.T) {
			fr := runsOf(t, fx)
			for _, backend := range []string{"memory", "direct"} {
				s := openFixture(t, fx, storage.Options{Backend: storage.Backend(backend)})
				o := Options{Semantics: FAISS173, Kernel: Exact, Guide: newExactGuide(t, s)}
				if backend == "direct" {
					o.BatchReads, o.HeldBytes = true, 1<<20
				}
				x := openIndex(t, s, o)
				if backend == "direct" {
					require.True(t, x.AllListsPinned(), "1 MiB holds the fixture's lists")
				}
				for ri, run := range fr.Runs {
					p := runParams(run)
					for qi := range fr.Queries {
						q, _ := fr.Query(qi)
						res, st, err := x.Search(q, p, nil)
						require.NoError(t, err)
						requireFAISSHits(t, run, qi, res, fmt.Sprintf("%s run %d query %d", backend, ri, qi))
						require.Equal(t, st.NDis, st.GuideDistances, "every distance on the guide")
						if backend == "direct" {
							assert.Zero(t, st.Reads, "lists and id map pinned, vectors on the guide: nothing to read: %+v", st)
							assert.Zero(t, st.IO.DeviceReads)
						}
					}
				}
			}
		})
	}
}

// TestGuideRefused: a guide of another shape, or on a binary or SQ index, is
// refused at New.
func TestGuideRefused(t *testing.T) {
	s := openFixture(t, "hnsw_flat_l2", storage.Options{Backend: "memory"})
	g := newExactGuide(t, s)
	f, err := faissfmt.Open(partial.ReaderAt(context.Background(), s), s.Size())
	require.NoError(t, err)
	_, err = New(context.Background(), f, s, Options{Guide: &exactGuide{codes: g.codes, n: g.n - 1, d: g.d}})
	require.ErrorIs(t, err, ErrBadOption)
	assert.Contains(t, err.Error(), "dimension")
	for _, fx := range []string{"bin_hnsw", "hnsw_sq_8bit"} {
		s := openFixture(t, fx, storage.Options{Backend: "memory"})
		f, err := faissfmt.Open(partial.ReaderAt(context.Background(), s), s.Size())
		require.NoError(t, err)
		_, err = New(context.Background(), f, s, Options{Guide: &exactGuide{n: f.Graph.NTotal, d: f.Graph.D}})
		require.ErrorIs(t, err, ErrBadOption, fx)
	}
}
