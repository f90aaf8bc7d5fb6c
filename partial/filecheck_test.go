package partial_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/partialtest"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
	"github.com/faiss-sidecar/faiss-sidecar/partial/zstd"
)

// Tests of a file changed under its storage: every backend that reads a
// file as it is on disk reports a change since it was opened
// (partial.FileChecker, errors wrapping partial.ErrFileChanged), reads that
// fail because of it say so, and a fault on a mapping becomes an error.

// changeOpeners open a file of the test with each backend.
var changeOpeners = []struct {
	name string
	o    storage.Options
	zstd bool
}{
	{"mmap", storage.Options{Backend: "mmap"}, false},
	{"pread", storage.Options{Backend: "pread", CacheBytes: 4 << 20}, false},
	{"pread tiny cache", storage.Options{Backend: "pread", CacheBytes: 64 << 10, BlockSize: 512}, false},
	{"direct", storage.Options{Backend: "direct"}, false},
	{"direct cached", storage.Options{Backend: "direct", CacheBytes: 4 << 20}, false},
	{"zstd", storage.Options{Backend: "zstd", CacheBytes: 4 << 20}, true},
}

// changes are the ways a file changes under a storage: in place (the
// descriptor sees it) or by rename (only the path does).
var changes = []struct {
	name    string
	inPlace bool
	apply   func(t *testing.T, path string, data []byte)
}{
	{"truncate to 0", true, func(t *testing.T, path string, _ []byte) {
		require.NoError(t, os.Truncate(path, 0))
	}},
	{"cp small big", true, func(t *testing.T, path string, data []byte) {
		require.NoError(t, os.WriteFile(path, data[:len(data)/3], 0o600))
	}},
	{"same size, other bytes", true, func(t *testing.T, path string, data []byte) {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		require.NoError(t, err)
		defer f.Close()
		_, err = f.WriteAt([]byte{data[100] ^ 0xff}, 100)
		require.NoError(t, err)
	}},
	{"replaced by rename", false, func(t *testing.T, path string, data []byte) {
		require.NoError(t, os.WriteFile(path+".new", data, 0o600))
		require.NoError(t, os.Rename(path+".new", path))
	}},
}

// changeable writes a 1 MiB pattern file (compressed when compressed is
// set) and opens it with o; it returns the storage, the path and the bytes
// on disk.
func changeable(t *testing.T, o storage.Options, compressed bool) (partial.Storage, string, []byte) {
	t.Helper()
	path, data := partialtest.PatternFile(t, 1<<20+123)
	if compressed {
		if !zstd.Supported {
			t.Skip("zstd needs cgo")
		}
		in, err := os.Open(path)
		require.NoError(t, err)
		defer in.Close()
		path = filepath.Join(t.TempDir(), "data.zst")
		f, err := os.Create(path)
		require.NoError(t, err)
		_, err = zstd.CompressSeekable(f, in, 64<<10, 3, nil)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		data, err = os.ReadFile(path)
		require.NoError(t, err)
	}
	s, err := storage.Open(context.Background(), path, o)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s, path, data
}

func leaseModes(t *testing.T, fn func(t *testing.T)) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("leases=%v", on), func(t *testing.T) {
			defer partial.SetFileLeases(partial.SetFileLeases(on))
			fn(t)
		})
	}
}

func TestFileChecks(t *testing.T) {
	leaseModes(t, func(t *testing.T) {
		for _, op := range changeOpeners {
			for _, ch := range changes {
				t.Run(op.name+"/"+ch.name, func(t *testing.T) {
					s, path, data := changeable(t, op.o, op.zstd)
					c, ok := s.(partial.FileChecker)
					require.True(t, ok, "%T is not a FileChecker", s)
					buf := make([]byte, 4096)
					_, err := s.ReadAtContext(context.Background(), buf, 0, nil)
					require.NoError(t, err)
					require.NoError(t, c.CheckFD())
					require.NoError(t, c.CheckFile(context.Background()))
					ch.apply(t, path, data)
					err = c.CheckFD()
					if ch.inPlace {
						require.ErrorIs(t, err, partial.ErrFileChanged)
					} else {
						// The descriptor reads the old file, intact; its ctime
						// changed when it was unlinked, which fstat sees (ext4,
						// tmpfs) but a lease does not.
						t.Logf("CheckFD after rename: %v", err)
					}
					err = c.CheckFile(context.Background())
					require.ErrorIs(t, err, partial.ErrFileChanged)
					assert.Contains(t, err.Error(), "file changed: "+path+": ")
					assert.Contains(t, err.Error(), "since it was opened")
					// Sticky, the same error everywhere.
					require.NoError(t, os.WriteFile(path, data, 0o600))
					assert.Equal(t, err.Error(), c.CheckFD().Error())
					assert.Equal(t, err.Error(), c.CheckFile(context.Background()).Error())
					t.Log(err)
				})
			}
		}
	})
}

// TestFileCheckMessages: the error says what changed.
func TestFileCheckMessages(t *testing.T) {
	s, path, data := changeable(t, storage.Options{Backend: "mmap"}, false)
	require.NoError(t, os.Truncate(path, 0))
	assert.ErrorContains(t, s.(partial.FileChecker).CheckFD(),
		fmt.Sprintf("file changed: %s: truncated from %d to 0 bytes since it was opened", path, len(data)))

	s, path, _ = changeable(t, storage.Options{Backend: "pread"}, false)
	require.NoError(t, os.Remove(path))
	assert.ErrorContains(t, s.(partial.FileChecker).CheckFile(context.Background()), "the path no longer names a file")

	s, path, data = changeable(t, storage.Options{Backend: "pread"}, false)
	require.NoError(t, os.WriteFile(path+".new", data, 0o600))
	require.NoError(t, os.Rename(path+".new", path))
	err := s.(partial.FileChecker).CheckFile(context.Background())
	assert.ErrorContains(t, err, "replaced: the path names another file now")
	// The numbers are for the server's log, not the message.
	assert.NotContains(t, err.Error(), "inode")
	assert.Contains(t, partial.ChangeDetail(err), "inode ")

	s, path, data = changeable(t, storage.Options{Backend: "pread"}, false)
	time.Sleep(10 * time.Millisecond) // a later mtime on coarse clocks
	require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte{7}, len(data)), 0o600))
	err = s.(partial.FileChecker).CheckFile(context.Background())
	assert.ErrorContains(t, err, "modified in place since it was opened")
	assert.NotContains(t, err.Error(), "mtime")
	assert.Contains(t, partial.ChangeDetail(err), "mtime ")
}

// TestFileChangedShortReads: a read of a range the file had at open but no
// longer has fails with the change, not a bare unexpected EOF.
func TestFileChangedShortReads(t *testing.T) {
	leaseModes(t, func(t *testing.T) {
		for _, op := range changeOpeners {
			t.Run(op.name, func(t *testing.T) {
				s, path, _ := changeable(t, op.o, op.zstd)
				require.NoError(t, os.Truncate(path, 0))
				_, err := s.ReadAtContext(context.Background(), make([]byte, 4096), s.Size()/2, nil)
				require.ErrorIs(t, err, partial.ErrFileChanged)
				if d, ok := s.(partial.BatchReader); ok {
					reqs := []partial.ReadReq{{Off: 8192, Buf: make([]byte, 4096)}, {Off: 1 << 19, Buf: make([]byte, 100)}}
					require.ErrorIs(t, d.ReadBatch(context.Background(), reqs), partial.ErrFileChanged)
				}
			})
		}
	})
}

// TestMmapFaults: on a truncated mapping ReadAt fails with the change
// instead of faulting the process, Warm (the warm-up) fails instead
// of succeeding, and a fault on a view becomes the change through
// FaultError.
func TestMmapFaults(t *testing.T) {
	path, data := partialtest.PatternFile(t, 4<<20)
	m, all := mapWhole(t, path)
	require.NoError(t, m.Warm(context.Background(), 0, int64(len(data))))
	require.NoError(t, os.Truncate(path, 4096))
	_, err := m.ReadAtContext(context.Background(), make([]byte, 100), 1<<20, nil)
	require.ErrorIs(t, err, partial.ErrFileChanged)
	assert.ErrorContains(t, err, fmt.Sprintf("truncated from %d to 4096 bytes", len(data)))

	path2, data2 := partialtest.PatternFile(t, 4<<20)
	m2, all2 := mapWhole(t, path2)
	require.NoError(t, os.Truncate(path2, 0))
	err = m2.Warm(context.Background(), 0, int64(len(data2)))
	require.ErrorIs(t, err, partial.ErrFileChanged, "warm-up of a truncated file")

	err = touch(m, all, 3<<20)
	require.ErrorIs(t, err, partial.ErrFileChanged)
	_ = all2

	// A fault outside the mapping, or another panic, is not the file's.
	_, ok := partial.FaultError(m, errors.New("boom"))
	assert.False(t, ok)
	var other []byte
	r := func() (r any) {
		defer func() { r = recover() }()
		prev := debug.SetPanicOnFault(true)
		defer debug.SetPanicOnFault(prev)
		return other[5]
	}()
	_, ok = partial.FaultError(m, r)
	assert.False(t, ok, "index out of range: %v", r)
}

// touch reads the mapped byte at off with faults recovered, as a query
// does.
func touch(m *partial.Mmap, all []byte, off int) (err error) {
	prev := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(prev)
		if r := recover(); r != nil {
			ferr, ok := partial.FaultError(m, r)
			if !ok {
				panic(r)
			}
			err = ferr
		}
	}()
	faultSink = all[off]
	return nil
}

var faultSink byte

// TestMemoryIgnoresChanges: a Memory's copy never changes.
func TestMemoryIgnoresChanges(t *testing.T) {
	s, path, data := changeable(t, storage.Options{Backend: "memory"}, false)
	require.NoError(t, os.Truncate(path, 0))
	c := s.(partial.FileChecker)
	require.NoError(t, c.CheckFD())
	require.NoError(t, c.CheckFile(context.Background()))
	buf := make([]byte, 100)
	_, err := s.ReadAtContext(context.Background(), buf, 1<<20, nil)
	require.NoError(t, err)
	assert.Equal(t, data[1<<20:1<<20+100], buf)
}

// TestLeaseWriterNotHeld: under a lease a writer of the file waits only
// for the storage to give the lease up, and the storage then checks with
// fstat; closing a storage gives its lease up.
func TestLeaseWriterNotHeld(t *testing.T) {
	defer partial.SetFileLeases(partial.SetFileLeases(true))
	s, path, _ := changeable(t, storage.Options{Backend: "mmap"}, false)
	c := s.(partial.FileChecker)
	start := time.Now()
	f, err := os.OpenFile(path, os.O_WRONLY, 0) // breaks the lease
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
	require.NoError(t, c.CheckFD(), "opened for writing, nothing written")
	_, err = f.WriteAt([]byte("x"), 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.ErrorIs(t, c.CheckFD(), partial.ErrFileChanged)

	s2, path2, _ := changeable(t, storage.Options{Backend: "pread"}, false)
	require.NoError(t, s2.Close())
	start = time.Now()
	require.NoError(t, os.Truncate(path2, 0))
	assert.Less(t, time.Since(start), 5*time.Second)
}

// TestFileCheckAfterClose: checks of a closed storage fail without
// touching its (closed) descriptor.
func TestFileCheckAfterClose(t *testing.T) {
	for _, op := range changeOpeners {
		s, _, _ := changeable(t, op.o, op.zstd)
		require.NoError(t, s.Close())
		require.ErrorIs(t, s.(partial.FileChecker).CheckFile(context.Background()), partial.ErrClosed, op.name)
		require.ErrorIs(t, s.(partial.FileChecker).CheckFD(), partial.ErrClosed, op.name)
	}
}

// TestZstdRewrittenFrame: a frame rewritten in place no longer checks out
// against the seek table; the read reports the change, not the checksum.
func TestZstdRewrittenFrame(t *testing.T) {
	defer partial.SetFileLeases(partial.SetFileLeases(false))
	s, path, data := changeable(t, storage.Options{Backend: "zstd", CacheBytes: 4 << 20}, true)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	bad := make([]byte, len(data)/2)
	for i := range bad {
		bad[i] = data[i] ^ 0x5a
	}
	_, err = f.WriteAt(bad[100:], 100) // past the first frame's header
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, err = s.ReadAtContext(context.Background(), make([]byte, 100), 0, nil)
	require.ErrorIs(t, err, partial.ErrFileChanged)
}

// TestLeaseNonBlockingWriter pins down what a lease does to a writer that
// opens with O_NONBLOCK (coreutils truncate): the first open fails with
// EAGAIN, a retry succeeds, and the change is then seen.
func TestLeaseNonBlockingWriter(t *testing.T) {
	defer partial.SetFileLeases(partial.SetFileLeases(true))
	s, path, _ := changeable(t, storage.Options{Backend: "mmap"}, false)
	c := s.(partial.FileChecker)
	_, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err == nil {
		t.Skip("no lease granted here (not the file's owner, or no lease support): nothing to pin down")
	}
	require.ErrorIs(t, err, syscall.EAGAIN)
	var f *os.File
	require.Eventually(t, func() bool {
		f, err = os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		return err == nil
	}, 5*time.Second, time.Millisecond)
	require.NoError(t, f.Truncate(0))
	require.NoError(t, f.Close())
	require.ErrorIs(t, c.CheckFD(), partial.ErrFileChanged)
}
