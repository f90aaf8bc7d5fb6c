package par

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestFor: every index is visited exactly once, whatever the worker count.
func TestFor(t *testing.T) {
	for _, workers := range []int{-1, 0, 1, 3, 100} {
		var seen [57]atomic.Int32
		For(len(seen), workers, func(i int) { seen[i].Add(1) })
		for i := range seen {
			assert.EqualValues(t, 1, seen[i].Load(), "workers %d index %d", workers, i)
		}
	}
	For(0, 4, func(int) { t.Fatal("no iteration for n = 0") })
}
