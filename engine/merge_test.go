package engine

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMergeHitsOrderAndTies(t *testing.T) {
	per := [][]Hit{
		{{ID: 1, Score: 0.9}, {ID: 2, Score: 0.5}, {ID: 3, Score: 0.5}},
		{{ID: 7, Score: 0.95}, {ID: 8, Score: 0.5}},
		nil,
		{{ID: 4, Score: 0.5}, {ID: 5, Score: 0.1}},
	}
	got := MergeHits(nil, per, 5)
	want := []TargetHit{
		{Hit{ID: 7, Score: 0.95}, 1},
		{Hit{ID: 1, Score: 0.9}, 0},
		{Hit{ID: 2, Score: 0.5}, 0}, // equal scores: the first target, in its own order
		{Hit{ID: 3, Score: 0.5}, 0},
		{Hit{ID: 8, Score: 0.5}, 1},
	}
	assert.Equal(t, want, got)

	all := MergeHits([]TargetHit{{Hit{ID: 99}, 9}}, per, -1)
	require.Len(t, all, 8, "k < 0 keeps every hit after what dst held")
	assert.Equal(t, int64(99), all[0].ID, "dst's own entries are kept")
	assert.Equal(t, int64(5), all[7].ID)

	assert.Empty(t, MergeHits(nil, [][]Hit{nil, {}}, 10))
}
