package quant

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestDrainWriter: what a drainWriter wrote more than drainBytes ago is on
// the device and out of the page cache while the writing goes on; what it
// wrote since is still cached.
func TestDrainWriter(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "g"))
	require.NoError(t, err)
	defer f.Close()
	w := &drainWriter{f: f}
	chunk := make([]byte, 64<<10)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	const total = 2*drainBytes + drainBytes/2
	for w.off < total {
		_, err := w.Write(chunk)
		require.NoError(t, err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, total, unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (total+page-1)/page)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
	require.Zero(t, errno, "mincore")
	cached := func(from, to int) (n int) {
		for _, v := range vec[from/page : to/page] {
			n += int(v & 1)
		}
		return n
	}
	assert.Zero(t, cached(0, 2*drainBytes), "written back and dropped")
	assert.Positive(t, cached(2*drainBytes, total), "the last part, not yet drained, is cached")
	assert.Equal(t, int64(2*drainBytes), w.synced)
}
