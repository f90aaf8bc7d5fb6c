package quant

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
)

// floatQueryDist is the 32x estimate with the rotated query kept in float
// (no query quantization): the reference the popcount path is measured
// against.
func floatQueryDist(q *Query, v int32) float32 {
	row := q.c.row(v)
	bits := row[factorBytes:]
	var g float32
	for j, y := range q.y {
		s := float32(int(bits[j>>3]>>(j&7)&1)*2 - 1)
		g += s * y
	}
	return q.est32(row, g)
}

// TestRecallFashionMNIST measures recall@10 of "top R by estimate, exact
// rerank" against exact brute force on fashion-mnist (60k × 784, 200 test
// images as queries) for both levels and metrics, and prints the table in
// docs/quantization.md:
//
//	go test -run RecallFashionMNIST -v ./quant/
func TestRecallFashionMNIST(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("brute force over fashion-mnist takes a minute (more under -race)")
	}
	rs := []int{10, 20, 30, 50, 100}
	var tab strings.Builder
	fmt.Fprintf(&tab, "| metric | level | R=10 | R=20 | R=30 | R=50 | R=100 |\n|---|---|---|---|---|---|---|\n")
	row := func(m faissfmt.Metric, name string, rec []float64) {
		fmt.Fprintf(&tab, "| %s | %s |", m, name)
		for _, r := range rec {
			fmt.Fprintf(&tab, " %.3f |", r)
		}
		tab.WriteString("\n")
	}
	for _, m := range []faissfmt.Metric{faissfmt.MetricL2, faissfmt.MetricInnerProduct} {
		ds := fashionMNIST(t, 200, m)
		for _, lvl := range Levels {
			c := ds.build(t, lvl)
			rec := rerankRecall(ds, c, 10, rs, ds.exactFast)
			row(m, lvl.String(), rec)
			switch lvl {
			case Level4x:
				assert.GreaterOrEqual(t, rec[0], 0.9, "%s 4x R=10", m)
				assert.GreaterOrEqual(t, rec[3], 0.99, "%s 4x R=50", m)
			case Level5x, Level6x, Level8x: // 6, 5 and 4 bits a dimension
				assert.GreaterOrEqual(t, rec[0], 0.85, "%s %s R=10", m, lvl)
				assert.GreaterOrEqual(t, rec[3], 0.99, "%s %s R=50", m, lvl)
			case Level16x: // measured 0.938 (L2) and 0.879 (IP) at R=10
				assert.GreaterOrEqual(t, rec[0], 0.85, "%s 16x R=10", m)
				assert.GreaterOrEqual(t, rec[3], 0.99, "%s 16x R=50", m)
			default: // one centroid for all gave 0.71 (L2) and 0.67 (IP) at R=10
				assert.GreaterOrEqual(t, rec[0], 0.74, "%s 32x R=10", m)
				assert.GreaterOrEqual(t, rec[3], 0.95, "%s 32x R=50", m)
				assert.GreaterOrEqual(t, rec[4], 0.97, "%s 32x R=100", m)
				fq := floatRecall(ds, c, rs)
				row(m, "32x, float query", fq)
				assert.InDelta(t, fq[3], rec[3], 0.02, "4-bit query ≈ float query at R=50")
			}
		}
	}
	t.Logf("recall@10, fashion-mnist, 200 queries:\n%s", tab.String())
}

// floatRecall is rerankRecall with floatQueryDist as the estimate.
func floatRecall(ds *dataset, c *Codes, rs []int) []float64 {
	fc := *c
	shim := &floatCodes{c: &fc}
	return shim.recall(ds, rs)
}

type floatCodes struct{ c *Codes }

func (f *floatCodes) recall(ds *dataset, rs []int) []float64 {
	q := f.c.NewQuery(true)
	est := func(v []float32, i int) float32 { return floatQueryDist(q, int32(i)) }
	return rerankRecallWith(ds, 10, rs, ds.exactFast, func(v []float32) { _ = q.Reset(v) }, est)
}

// TestRecallClustered is TestRecallFashionMNIST on bench-data/clustered.faiss
// (100k × 128 Gaussian clusters, real-valued so 4x is lossy), when present:
//
//	go test -run RecallClustered -v ./quant/
func TestRecallClustered(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("brute force takes seconds (more under -race)")
	}
	rs := []int{10, 20, 30, 50, 100}
	var tab strings.Builder
	for _, m := range []faissfmt.Metric{faissfmt.MetricL2, faissfmt.MetricInnerProduct} {
		ds := faissFile(t, "../bench-data/clustered.faiss")
		ds.metric = m
		for _, lvl := range Levels {
			c := ds.build(t, lvl)
			rec := rerankRecall(ds, c, 10, rs, ds.exactFast)
			fmt.Fprintf(&tab, "| %s | %s |", m, lvl)
			for _, r := range rec {
				fmt.Fprintf(&tab, " %.3f |", r)
			}
			tab.WriteString("\n")
			if lvl.sqBits() > 0 {
				assert.GreaterOrEqual(t, rec[3], 0.99, "%s %s R=50", m, lvl)
			} else if lvl == Level16x { // measured 0.785 (L2) and 0.909 (IP) at R=10
				assert.GreaterOrEqual(t, rec[0], 0.75, "%s 16x R=10", m)
				assert.GreaterOrEqual(t, rec[3], 0.99, "%s 16x R=50", m)
			} else { // one centroid for all gave 0.30 (L2) and 0.53 (IP) at R=10
				assert.GreaterOrEqual(t, rec[0], 0.55, "%s 32x R=10", m)
				assert.GreaterOrEqual(t, rec[3], 0.98, "%s 32x R=50", m)
			}
		}
	}
	t.Logf("recall@10, clustered 100k × 128, 100 queries:\n%s", tab.String())
}

// TestRanges8x compares 8x's trained ranges (least squared error of the
// sample, clipRange) with plain [min, max] ranges, by recall@10 of "top R
// by estimate, exact rerank" on the clustered 100k × 128 set and
// fashion-mnist (L2), and prints the table in docs/quantization.md:
//
//	go test -run Ranges8x -v ./quant/
func TestRanges8x(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("brute force takes seconds (more under -race)")
	}
	rs := []int{10, 20, 50, 100}
	var tab strings.Builder
	for _, name := range []string{"clustered", "fashion-mnist"} {
		var ds *dataset
		if name == "clustered" {
			ds = faissFile(t, "../bench-data/clustered.faiss")
		} else {
			ds = fashionMNIST(t, 100, faissfmt.MetricL2)
		}
		trained := ds.build(t, Level8x)
		minmax := ds.build(t, Level8x)
		for j := range ds.d { // the whole set's [min, max], every vector re-coded
			lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
			for i := range ds.n {
				lo, hi = min(lo, ds.x[i*ds.d+j]), max(hi, ds.x[i*ds.d+j])
			}
			minmax.vmin[j], minmax.delta[j] = lo, (hi-lo)/15
		}
		for i := range ds.n {
			minmax.encode8(minmax.row(int32(i)), ds.vec(i))
		}
		rt := rerankRecall(ds, trained, 10, rs, ds.exactFast)
		rm := rerankRecall(ds, minmax, 10, rs, ds.exactFast)
		for _, row := range []struct {
			what string
			rec  []float64
		}{{"min/max", rm}, {"trained", rt}} {
			fmt.Fprintf(&tab, "| %s | %s |", name, row.what)
			for _, r := range row.rec {
				fmt.Fprintf(&tab, " %.3f |", r)
			}
			tab.WriteString("\n")
		}
		assert.GreaterOrEqual(t, rt[0], rm[0]-0.01, "%s: trained ranges are no worse at R=10", name)
		if name == "clustered" {
			assert.Greater(t, rt[0], rm[0]+0.03, "clustered: trained ranges beat min/max at R=10")
		}
	}
	t.Logf("8x recall@10 by range, R=10/20/50/100:\n%s", tab.String())
}
