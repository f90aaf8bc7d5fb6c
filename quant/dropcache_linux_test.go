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
// Writes of 64 KiB and one of several times drainBytes (as Encode writes
// its rows) both drain.
func TestDrainWriter(t *testing.T) {
	for _, piece := range []int{64 << 10, 2*drainBytes + drainBytes/2} {
		drainWrites(t, piece)
	}
}

func drainWrites(t *testing.T, piece int) {
	f, err := os.Create(filepath.Join(t.TempDir(), "g"))
	require.NoError(t, err)
	defer f.Close()
	var fs unix.Statfs_t
	require.NoError(t, unix.Fstatfs(int(f.Fd()), &fs))
	if fs.Type == unix.TMPFS_MAGIC {
		t.Skip("tmpfs keeps its pages whatever fadvise says; set TMPDIR to a disk")
	}
	w := &drainWriter{f: f}
	chunk := make([]byte, piece)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	const total = 2*drainBytes + drainBytes/2
	for w.off < total {
		n, err := w.Write(chunk[:min(len(chunk), total-int(w.off))])
		require.NoError(t, err)
		require.Positive(t, n)
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
	assert.Zero(t, cached(0, 2*drainBytes), "written back and dropped (writes of %d)", piece)
	assert.Positive(t, cached(2*drainBytes, total), "the last part, not yet drained, is cached (writes of %d)", piece)
	assert.Equal(t, int64(2*drainBytes), w.synced)
}

// TestWriteBackErrors: a file that cannot be synced by range (a pipe) is
// left to the final sync; any other failure is returned (the kernel counts
// it reported: the final sync would not report it again).
func TestWriteBackErrors(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	assert.NoError(t, writeBack(w, 0, 4096), "a pipe: not supported, not a failure")

	f, err := os.Create(filepath.Join(t.TempDir(), "g"))
	require.NoError(t, err)
	_, err = f.Write(make([]byte, 4096))
	require.NoError(t, err)
	assert.NoError(t, writeBack(f, 0, 4096))
	require.NoError(t, f.Close())
	assert.ErrorIs(t, writeBack(f, 0, 4096), unix.EBADF, "a closed file: returned")
}
