package httpapi

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// watchedChanges are changes the file watcher's notifications report:
// fileChanges, and the file removed, written through a hard link in
// another directory, and the directory holding it renamed away with
// another file put in its place.
var watchedChanges = map[string]func(t *testing.T, path string){
	"remove": func(t *testing.T, path string) { require.NoError(t, os.Remove(path)) },
	"write-through-link": func(t *testing.T, path string) {
		link := filepath.Join(t.TempDir(), "link.faiss")
		require.NoError(t, os.Link(path, link))
		f, err := os.OpenFile(link, os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte{1, 2, 3, 4}, 100)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	},
	"dir-replaced": func(t *testing.T, path string) {
		dir := filepath.Dir(path)
		src, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NoError(t, os.Rename(dir, dir+".old"))
		require.NoError(t, os.Mkdir(dir, 0o755))
		require.NoError(t, os.WriteFile(path, src, 0o644))
	},
}

// TestWatchSeesChangesAtOnce: on Linux a served local file is watched
// (inotify), not polled, and every kind of change marks its index failed
// within a moment, long before the sweep would have come to it (-v logs
// how long); an index beside it stays serving, and an unloaded index's
// watches are let go.
func TestWatchSeesChangesAtOnce(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("notifications: Linux only")
	}
	src, err := os.ReadFile(filepath.Join(fixtures, "hnsw_flat_l2.faiss"))
	require.NoError(t, err)
	all := map[string]func(t *testing.T, path string){}
	for k, v := range fileChanges {
		all[k] = v
	}
	for k, v := range watchedChanges {
		all[k] = v
	}
	for change, apply := range all {
		t.Run(change, func(t *testing.T) {
			root := t.TempDir()
			require.NoError(t, os.Mkdir(filepath.Join(root, "sub"), 0o755))
			path := filepath.Join(root, "sub", "v.faiss")
			require.NoError(t, os.WriteFile(path, src, 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(root, "steady.faiss"), src, 0o644))
			s, ts := newTestServer(t, Config{DataRoots: []string{root}})
			s.files.mu.Lock()
			require.NotNil(t, s.files.n, "inotify")
			s.files.mu.Unlock()
			for n, p := range map[string]string{"v": "sub/v.faiss", "steady": "steady.faiss"} {
				r := call(t, ts, "PUT", "/indexes/"+n, `{"path":"`+p+`"}`)
				require.Equal(t, 200, r.Status, r.Raw)
			}
			// Watched, not polled: the sweep comes to a file every
			// sweepInterval, so a failure within two seconds came from a
			// notification.
			require.Eventually(t, func() bool {
				s.files.mu.Lock()
				defer s.files.mu.Unlock()
				return len(s.files.recs) == 2 && len(s.files.polled) == 0 && len(s.files.swept) == 2
			}, 3*fileCheckInterval, 10*time.Millisecond)
			failed := func(name string) bool {
				h := s.Reg.get(name).cur.Load()
				return h != nil && h.failed.Load() != nil
			}
			start := time.Now()
			apply(t, path)
			require.Eventually(t, func() bool { return failed("v") }, 2*time.Second, time.Millisecond)
			t.Logf("failed %v after the change began", time.Since(start).Round(100*time.Microsecond))
			assert.False(t, failed("steady"))
			assert.Contains(t, call(t, ts, "GET", "/metrics", ``).Raw, `faiss_sidecar_index_failed{index="v"} 1`)
			// Unloaded: its watches go (its file's, sub's), those of the
			// directories above stay for steady.
			require.Equal(t, 200, call(t, ts, "DELETE", "/indexes/v", ``).Status)
			require.Eventually(t, func() bool {
				s.files.mu.Lock()
				defer s.files.mu.Unlock()
				for _, users := range s.files.targets {
					if len(users) != 1 {
						return false
					}
				}
				return len(s.files.recs) == 1
			}, 3*fileCheckInterval, 10*time.Millisecond)
		})
	}
}

// TestWatchRecheck: a change reported while a check of the same index
// runs is checked again after it, not dropped.
func TestWatchRecheck(t *testing.T) {
	e := &entry{name: "x"}
	w := &watcher{s: &Server{Reg: &Registry{}}}
	e.checking.Store(true) // a check runs
	w.check(e)
	assert.True(t, e.recheck.Load(), "asked of the running check")
	assert.True(t, e.checking.Load())
}
