package partial_test

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/partialtest"
)

// TestMmapWarm: after Warm every page of the range is resident
// (mincore) and the bytes are the file's, also for a range that is not
// page-aligned and one already cached. How much of it ended up on 2 MiB
// pages depends on the kernel and file system, and is logged.
func TestMmapWarm(t *testing.T) {
	path, data := partialtest.PatternFile(t, 9<<20)
	m, all := mapWhole(t, path)
	for _, r := range [][2]int64{{3<<20 + 100, 5<<20 + 7}, {0, int64(len(data))}} {
		if err := m.Warm(context.Background(), r[0], r[1]); err != nil {
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
				t.Fatalf("range %v: page %d not resident after Warm", r, int64(i)+start/page)
			}
		}
		if !bytes.Equal(all[r[0]:r[0]+r[1]], data[r[0]:r[0]+r[1]]) {
			t.Fatalf("range %v: mapped bytes differ from the file", r)
		}
	}
	if err := m.Warm(context.Background(), int64(len(data)), 1); err == nil {
		t.Error("Populate past the end succeeded")
	}
	t.Logf("mapped on huge pages: %d KiB", pmdMapped(t, uintptr(unsafe.Pointer(&all[0]))))
}

// mapWhole maps the file at path and views all of it; the mapping closes
// with the test.
func mapWhole(t *testing.T, path string) (*partial.Mmap, []byte) {
	t.Helper()
	m, err := partial.OpenMmap(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	all, err := m.View(0, m.Size())
	if err != nil {
		t.Fatal(err)
	}
	return m, all
}

// pmdMapped reads FilePmdMapped of the mapping at addr from smaps.
func pmdMapped(t *testing.T, addr uintptr) int { return pmdMappedIn(t, addr, addr+1) }

// pmdMappedIn sums FilePmdMapped (KiB) over the mappings that start in
// [lo, hi): madvise splits one mapping into several.
func pmdMappedIn(t *testing.T, lo, hi uintptr) int {
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return -1
	}
	in, total := false, 0
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			start, _ := strconv.ParseUint(strings.Split(f[0], "-")[0], 16, 64)
			in = uintptr(start) >= lo && uintptr(start) < hi
		}
		if in && strings.HasPrefix(l, "FilePmdMapped:") {
			n, _ := strconv.Atoi(strings.Fields(l)[1])
			total += n
		}
	}
	return total
}

// TestMmapPopulateWholeHugePages: a range that starts and ends inside 2 MiB
// regions, some of whose pages are already mapped 4 KiB at a time (the
// header a parse read), still lands on 2 MiB pages from the region holding
// its first byte to the one holding its last: a FAISS file's neighbor
// lists begin and end mid-region, and a fifth of a 100k-node graph's lists
// stayed on 4 KiB pages.
var sink byte

func TestMmapWarmWholeHugePages(t *testing.T) {
	path, data := partialtest.PatternFile(t, 10<<20)
	// Leave the page cache with single 4 KiB pages at the range's two edge
	// regions, as a parse's small reads do.
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	unix.Fdatasync(int(f.Fd()))
	unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM)
	for _, off := range []int64{100, 7<<20 + 5} {
		f.ReadAt(make([]byte, 1), off)
	}
	f.Close()
	m, all := mapWhole(t, path)
	base := uintptr(unsafe.Pointer(&all[0]))
	if base%(2<<20) != 0 {
		t.Skipf("the kernel placed the mapping at %#x, off a 2 MiB boundary: no huge pages possible", base)
	}
	sink += all[100] + all[7<<20+5] // and maps them, as a parse through the mapping would
	if err := m.Warm(context.Background(), 1<<20+100, 6<<20); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(all, data) {
		t.Fatal("mapped bytes differ from the file")
	}
	got := pmdMappedIn(t, base, base+uintptr(len(all)))
	if got == 0 {
		t.Skip("this kernel maps no file pages 2 MiB at a time")
	}
	if got < 8<<10 {
		t.Errorf("%d KiB on 2 MiB pages; want the 8 MiB of the four regions the range touches", got)
	}
}
