package hnswsearch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
)

// TestDeadline: a query past its deadline stops with ErrDeadline, in the
// graph search and in the exact scan of a small filter; one with time left
// answers as without a deadline.
func TestDeadline(t *testing.T) {
	x := openIndex(t, openFixture(t, "hnsw_flat_large", storage.Options{Backend: "mmap"}), Options{})
	q := make([]float32, x.Dim())
	q[0] = 1
	want, _, err := x.Search(q, Params{K: 10, EfSearch: 256}, nil)
	require.NoError(t, err)
	got, _, err := x.Search(q, Params{K: 10, EfSearch: 256, Deadline: time.Now().Add(time.Minute)}, nil)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	past := time.Now().Add(-time.Millisecond)
	_, _, err = x.Search(q, Params{K: 10, EfSearch: 256, Deadline: past}, nil)
	assert.ErrorIs(t, err, ErrDeadline)
	filter := make([]int64, 0, 200)
	for i := range int64(200) {
		filter = append(filter, i*7)
	}
	_, st, err := x.Search(q, Params{K: 10, Filter: filter, Deadline: past}, nil)
	assert.ErrorIs(t, err, ErrDeadline)
	assert.True(t, st.ExactScan, "the exact scan checked the deadline")
	// The index keeps answering after a stopped query.
	got, _, err = x.Search(q, Params{K: 10, EfSearch: 256}, nil)
	require.NoError(t, err)
	assert.Equal(t, want, got)
}
