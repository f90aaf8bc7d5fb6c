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
