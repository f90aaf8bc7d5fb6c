package sysmem

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParse(t *testing.T) {
	dir := t.TempDir()
	w := func(name, text string) string {
		p := filepath.Join(dir, name)
		assert.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		return p
	}
	assert.Equal(t, int64(16384000)<<10, memTotal(w("meminfo", "MemFree: 1 kB\nMemTotal:       16384000 kB\n")))
	assert.Zero(t, memTotal(w("bad", "MemTotal: lots\n")))
	assert.Zero(t, memTotal(filepath.Join(dir, "missing")))
	assert.Equal(t, int64(1<<30), limitFile(w("v2", "1073741824\n")))
	assert.Zero(t, limitFile(w("max", "max\n")))
	assert.Zero(t, limitFile(w("v1", "9223372036854771712\n")), "cgroup v1's no limit")
	if _, err := os.Stat("/proc/meminfo"); err == nil {
		assert.Positive(t, Total(), "this machine's memory")
	}
}

// TestLimitFiles: the limits that bind a process are its own cgroup's and
// its ancestors', in both hierarchies, read from /proc/self/cgroup's
// spelling; without that file, the root's.
func TestLimitFiles(t *testing.T) {
	dir := t.TempDir()
	cg := filepath.Join(dir, "cgroup")
	assert.NoError(t, os.WriteFile(cg, []byte("9:name=systemd:/\n4:cpu,memory:/bench/run-7\n0::/user.slice/x\n"), 0o644))
	assert.Equal(t, []string{
		"/cg/user.slice/x/memory.max", "/cg/user.slice/memory.max", "/cg/memory.max",
		"/cg/memory/bench/run-7/memory.limit_in_bytes", "/cg/memory/bench/memory.limit_in_bytes", "/cg/memory/memory.limit_in_bytes",
	}, limitFiles(cg, "/cg"))
	assert.Equal(t, []string{"/cg/memory.max", "/cg/memory/memory.limit_in_bytes"}, limitFiles(filepath.Join(dir, "missing"), "/cg"))

	// A child cgroup's limit below the root's is the one Total takes.
	root := filepath.Join(dir, "fs")
	assert.NoError(t, os.MkdirAll(filepath.Join(root, "memory", "bench", "run-7"), 0o755))
	assert.NoError(t, os.WriteFile(filepath.Join(root, "memory", "memory.limit_in_bytes"), []byte("9223372036854771712\n"), 0o644))
	assert.NoError(t, os.WriteFile(filepath.Join(root, "memory", "bench", "run-7", "memory.limit_in_bytes"), []byte("20971520\n"), 0o644))
	meminfo := filepath.Join(dir, "meminfo")
	assert.NoError(t, os.WriteFile(meminfo, []byte("MemTotal: 1048576 kB\n"), 0o644))
	assert.Equal(t, int64(20<<20), total(meminfo, cg, root))
	assert.Equal(t, int64(1<<30), total(meminfo, filepath.Join(dir, "missing"), root), "the root's files set no limit: RAM")
}
