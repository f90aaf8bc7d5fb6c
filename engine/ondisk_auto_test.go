package engine_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/hnswsearch"
)

// TestOnDiskAutoRule: compression auto, over budgets from the smallest
// that serves to one that holds everything, on testdata/ondisk's
// clustered_l2 (2000 × 32, FAISS's HNSW M 8: a 4x guide of 64 KB, 5x of
// 56 KB, 6x of 48 KB, 8x of 32 KB, 32x of 50 KB — at d = 32 the 1-bit
// codes' factors and centroids make them larger than 8x's — and ~100 KB
// of lists).
// Budgets step by 1 KiB. The choice runs: refused (naming the smallest
// guide, 8x's), then 8x, 6x, 5x and 4x as each guide alone comes to fit
// (no level's lists do), then 8x again (the 8x guide and every list fit,
// the 6x guide and the lists do not), 6x, 5x and 4x with their lists.
// Opening at each run's middle budget shows the rule's point: where it
// says the lists fit, every list is pinned.
func TestOnDiskAutoRule(t *testing.T) {
	index := filepath.Join("..", "testdata", "ondisk", "clustered_l2.faiss")
	pf, err := engine.Probe(index, "direct")
	require.NoError(t, err)
	bp, err := hnswsearch.PlanBudget(pf, true, 1<<30, 1)
	require.NoError(t, err)
	spec := func(budget int64) engine.Spec {
		return engine.Spec{Path: index, Mode: engine.ModeOnDisk, MemoryBudget: budget, Workers: 1, GuideDir: t.TempDir()}
	}
	type run struct {
		choice     string
		from, to   int64 // budgets [from, to]
		refusalMsg string
	}
	var runs []run
	for b := bp.HeapBytes; b <= bp.HeapBytes+400<<10; b += 1 << 10 {
		p, err := engine.Prepare(spec(b))
		choice, msg := "", ""
		if err != nil {
			require.True(t, errors.Is(err, hnswsearch.ErrBudget), "%d: %v", b, err)
			choice, msg = "refused", err.Error()
		} else {
			choice = p.Spec().Compression
		}
		if len(runs) > 0 && runs[len(runs)-1].choice == choice {
			runs[len(runs)-1].to = b
			continue
		}
		runs = append(runs, run{choice, b, b, msg})
	}
	var seq []string
	for _, r := range runs {
		seq = append(seq, r.choice)
		t.Logf("budget heap+[%d, %d] KiB: %s", (r.from-bp.HeapBytes)>>10, (r.to-bp.HeapBytes)>>10, r.choice)
	}
	require.Equal(t, []string{"refused", "8x", "6x", "5x", "4x", "8x", "6x", "5x", "4x"}, seq)
	assert.Contains(t, runs[0].refusalMsg, "on_disk at 8x needs a guide of", "the refusal names the smallest guide")

	// Every list, as a budget far above the rest pins them.
	all := func() int64 {
		x, _, err := engine.Open(spec(1 << 30))
		require.NoError(t, err)
		defer x.Close()
		return x.PinnedBytes()
	}()
	require.Positive(t, all)
	t.Logf("every list pinned: %d bytes", all)
	for i, r := range runs[1:] {
		mid := (r.from + r.to) / 2
		x, _, err := engine.Open(spec(mid))
		require.NoError(t, err)
		gi, _ := x.Guide()
		pinned := x.PinnedBytes()
		x.Close()
		require.Equal(t, r.choice, gi.Level)
		withLists := i >= 4 // the last four runs
		if withLists {
			assert.Equal(t, all, pinned, "%s at %d: every list pinned", r.choice, mid)
		} else {
			assert.Less(t, pinned, all, "%s at %d: the guide alone fits", r.choice, mid)
		}
	}

	// A named level is taken whenever its guide fits, lists or not.
	p, err := engine.Prepare(func() engine.Spec { s := spec(runs[3].from); s.Compression = "32x"; return s }())
	require.NoError(t, err)
	assert.Equal(t, "32x", p.Spec().Compression)
	_, err = engine.Prepare(func() engine.Spec { s := spec(runs[1].from); s.Compression = "4x"; return s }())
	require.ErrorIs(t, err, hnswsearch.ErrBudget)
	assert.Contains(t, err.Error(), "on_disk at 4x needs a guide of")
}
