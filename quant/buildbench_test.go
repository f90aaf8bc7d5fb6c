package quant

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
)

// BenchmarkBuildFile: build throughput (MB/s of vectors read and encoded)
// on bench-data/fmnist.faiss (196 MB, 60k × 784), with the file's pages
// dropped from the page cache before each build (posix_fadvise
// DONTNEED: cold, as at first start), and warm.
//
//	go test -run XXX -bench BuildFile -benchtime 3x ./quant/
func BenchmarkBuildFile(b *testing.B) {
	path := "../bench-data/fmnist.faiss"
	fh, err := os.Open(path)
	if err != nil {
		b.Skipf("%s: %v (built by bench/gen_search_data.py)", path, err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	require.NoError(b, err)
	f, err := faissfmt.Open(fh, st.Size())
	require.NoError(b, err)
	sec, ok := f.Storage.Section("codes")
	require.True(b, ok)
	for _, cold := range []bool{true, false} {
		for _, lvl := range Levels {
			b.Run(fmt.Sprintf("%s/cold=%v", lvl, cold), func(b *testing.B) {
				for b.Loop() {
					if cold {
						b.StopTimer()
						require.NoError(b, unix.Fadvise(int(fh.Fd()), 0, 0, unix.FADV_DONTNEED))
						b.StartTimer()
					}
					c, err := Build(fh, sec.Offset, int(f.Storage.NTotal), f.Storage.D, f.Storage.Metric, lvl, BuildOptions{})
					require.NoError(b, err)
					c.Close()
				}
				b.SetBytes(sec.Len)
			})
		}
	}
}
