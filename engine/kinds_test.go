package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/internal/testfixtures"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// TestReexportedKindsMatch: a front end's errors.Is on engine's names must
// match the errors the lower packages return.
func TestReexportedKindsMatch(t *testing.T) {
	x, _, err := engine.Open(engine.Spec{Path: fixture("hnsw_flat_l2.faiss")})
	require.NoError(t, err)
	defer x.Close()
	qp, err := x.Plan(engine.Request{K: 10})
	require.NoError(t, err)
	_, _, err = x.Search(&qp, engine.Query{Vector: make([]float32, x.Dim()+1)}, nil) // hnswsearch's check of the vector
	assert.ErrorIs(t, err, engine.ErrBadQuery)
	_, _, err = engine.ParseS3URL("s3://")
	assert.ErrorIs(t, err, engine.ErrBadStorageOption)
	assert.ErrorIs(t, err, partial.ErrBadOption)
	assert.True(t, engine.IsRemote("s3://bucket/key"))
	assert.False(t, engine.IsRemote("/data/x.faiss"))
}

// TestCheckSearchMatchesSearch: a check query gives Search's hits, −1
// fills included, and two handles of one file agree.
func TestCheckSearchMatchesSearch(t *testing.T) {
	open := func() *engine.Index {
		x, _, err := engine.Open(engine.Spec{Path: fixture("hnsw_flat_l2.faiss")})
		require.NoError(t, err)
		t.Cleanup(x.Close)
		return x
	}
	a, b := open(), open()
	f, err := testfixtures.Load(fixtures, "hnsw_flat_l2")
	require.NoError(t, err)
	q, _ := f.Query(0)
	qp, err := a.Plan(engine.Request{K: 10})
	require.NoError(t, err)
	want, _, err := a.Search(&qp, engine.Query{Vector: q}, nil)
	require.NoError(t, err)
	ra, err := a.CheckSearch(context.Background(), q, nil, 10, nil)
	require.NoError(t, err)
	require.Len(t, ra, len(want))
	for i, w := range want {
		assert.Equal(t, engine.Neighbor{ID: w.ID, Distance: w.Distance, Label: w.Label}, ra[i])
	}
	rb, err := b.CheckSearch(context.Background(), q, nil, 10, nil)
	require.NoError(t, err)
	assert.Equal(t, ra, rb)
}
