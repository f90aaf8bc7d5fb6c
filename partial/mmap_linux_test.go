package partial_test

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// TestMmapPopulate: after Populate every page of the range is resident
// (mincore) and the bytes are the file's, also for a range that is not
// page-aligned and one already cached. How much of it ended up on 2 MiB
// pages depends on the kernel and file system, and is logged.
func TestMmapPopulate(t *testing.T) {
	path, data := patternFile(t, 9<<20)
	m, err := partial.OpenMmap(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	all, err := m.View(0, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int64{{3<<20 + 100, 5<<20 + 7}, {0, int64(len(data))}} {
		if err := m.Populate(r[0], r[1]); err != nil {
			t.Fatal(err)
		}
		page := int64(os.Getpagesize())
		start := r[0] &^ (page - 1)
		span := all[start : r[0]+r[1]]
		vec := make([]byte, (len(span)+int(page)-1)/int(page))
		if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&span[0])), uintptr(len(span)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
			t.Fatal(e)
		}
		for i, v := range vec {
			if v&1 == 0 {
				t.Fatalf("range %v: page %d not resident after Populate", r, int64(i)+start/page)
			}
		}
		if !bytes.Equal(all[r[0]:r[0]+r[1]], data[r[0]:r[0]+r[1]]) {
			t.Fatalf("range %v: mapped bytes differ from the file", r)
		}
	}
	if err := m.Populate(int64(len(data)), 1); err == nil {
		t.Error("Populate past the end succeeded")
	}
	t.Logf("mapped on huge pages: %d KiB", pmdMapped(t, uintptr(unsafe.Pointer(&all[0]))))
}

// pmdMapped reads FilePmdMapped of the mapping at addr from smaps.
func pmdMapped(t *testing.T, addr uintptr) int {
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return -1
	}
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			lo, _ := strconv.ParseUint(strings.Split(f[0], "-")[0], 16, 64)
			in = uintptr(lo) == addr
		}
		if in && strings.HasPrefix(l, "FilePmdMapped:") {
			n, _ := strconv.Atoi(strings.Fields(l)[1])
			return n
		}
	}
	return -1
}
