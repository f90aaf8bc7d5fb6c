package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCorruptVectorFiles: a query, ground-truth, id or --vectors file
// whose records disagree with the first (record 5; a record past
// --max-queries too), whose last record is cut short, or an .npy whose
// header does not fit it, is exit 1 with one line naming the file as
// given and the record; a file of a format the flag does not take is
// named with the formats it takes.
func TestCorruptVectorFiles(t *testing.T) {
	queries, err := os.ReadFile(skipQueries)
	require.NoError(t, err)
	require.Len(t, queries, 50*132)
	base, err := os.ReadFile(skipFvecsPath)
	require.NoError(t, err)
	graph, err := filepath.Abs(skipGraphPath)
	require.NoError(t, err)
	dir := t.TempDir()
	t.Chdir(dir) // files named as the user typed them, relative
	write := func(name string, b []byte, dims map[int]uint32, rec int) string {
		b = bytes.Clone(b)
		for i, d := range dims {
			binary.LittleEndian.PutUint32(b[i*rec:], d)
		}
		require.NoError(t, os.WriteFile(name, b, 0o644))
		return name
	}
	require.NoError(t, os.WriteFile("q.fvecs", queries, 0o644))
	require.NoError(t, os.WriteFile("v.fvecs", base, 0o644))
	var gt []byte // 50 rows of 10 ids
	for range 50 {
		gt = binary.LittleEndian.AppendUint32(gt, 10)
		for j := range 10 {
			gt = binary.LittleEndian.AppendUint32(gt, uint32(j))
		}
	}
	require.NoError(t, os.WriteFile("gt.ivecs", gt, 0o644))
	hdr := "{'descr': '<f4', 'fortran_order': True, 'shape': (50, 32), }\n"
	npy := append(binary.LittleEndian.AppendUint16([]byte("\x93NUMPY\x01\x00"), uint16(len(hdr))), hdr...)
	require.NoError(t, os.WriteFile("fortran.npy", append(npy, make([]byte, 50*32*4)...), 0o644))
	require.NoError(t, os.WriteFile("q.txt", []byte("1\n"), 0o644))

	search := func(extra ...string) []string {
		return append([]string{"search", graph, "--k", "3"}, extra...)
	}
	bench := func(extra ...string) []string {
		return append([]string{"bench", graph, "--k", "3", "--duration", "10ms"}, extra...)
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{search("--queries", write("bad-q.fvecs", queries, map[int]uint32{5: 31}, 132), "--vectors", "v.fvecs"),
			"bad-q.fvecs: record 5 says d=31, the first says d=32"},
		{bench("--queries", write("late-q.fvecs", queries, map[int]uint32{49: 33}, 132), "--max-queries", "2", "--vectors", "v.fvecs"),
			"late-q.fvecs: record 49 says d=33, the first says d=32"},
		{search("--queries", write("cut-q.fvecs", queries[:len(queries)-2], nil, 132), "--vectors", "v.fvecs"),
			"cut-q.fvecs: record 49 is cut short: 130 of its 132 bytes (truncated?)"},
		{search("--queries", "fortran.npy", "--vectors", "v.fvecs"),
			"fortran.npy: Fortran-order (column-major) arrays are not supported"},
		{search("--queries", "q.txt", "--vectors", "v.fvecs"),
			"q.txt: queries are read from .fvecs, .bvecs or .npy files, not .txt"},
		{bench("--queries", "q.fvecs", "--vectors", "v.fvecs", "--gt", write("bad-gt.ivecs", gt, map[int]uint32{5: 9}, 44)),
			"bad-gt.ivecs: record 5 says d=9, the first says d=10"},
		{bench("--queries", "q.fvecs", "--vectors", "v.fvecs", "--gt", "q.fvecs"),
			"q.fvecs: ground-truth ids are read from .ivecs or integer .npy files, not .fvecs"},
		{search("--queries", "q.fvecs", "--vectors", "v.fvecs", "--allow-ids", write("bad-ids.ivecs", gt, map[int]uint32{49: 11}, 44)),
			"bad-ids.ivecs: record 49 says d=11, the first says d=10"},
		{search("--queries", "q.fvecs", "--vectors", write("bad-v.fvecs", base, map[int]uint32{5: 31, 1999: 33}, 132)),
			"bad-v.fvecs: record 5 says d=31, the first says d=32"},
		{search("--queries", "q.fvecs", "--vectors", write("last-v.fvecs", base, map[int]uint32{1999: 33}, 132), "--mode", "full"),
			"last-v.fvecs: record 1999 says d=33, the first says d=32"},
		{[]string{"export-vectors", "bad-v.fvecs", "out.vec"}, "bad-v.fvecs: record 5 says d=31, the first says d=32"},
		{[]string{"export-vectors", "fortran.npy", "out.vec"}, "fortran.npy: Fortran-order (column-major) arrays are not supported"},
		{[]string{"search", graph, "--k", "3", "--queries", "q.fvecs", "--vectors", "v.fvecs", "--rerank-vectors", "last-v.fvecs"},
			"last-v.fvecs: record 1999 says d=33, the first says d=32"},
		{[]string{"bench", "rerank", "--vectors", "last-v.fvecs"}, "last-v.fvecs: record 1999 says d=33, the first says d=32"},
	} {
		code, stdout, stderr := runCLI(c.args...)
		assert.Equal(t, 1, code, "%v: %s", c.args, stderr)
		assert.Contains(t, stderr, c.msg, c.args)
		assert.Equal(t, 1, strings.Count(stderr, "\n"), "%v: %s", c.args, stderr)
		assert.NotContains(t, stderr, "vecio", c.args)
		assert.NotContains(t, stderr, dir, "%v: the user's relative name", c.args)
		assert.Empty(t, stdout, c.args)
	}
	code, _, stderr := runCLI(search("--queries", "q.fvecs", "--vectors", "v.fvecs", "--out", "out.jsonl")...)
	require.Equal(t, 0, code, stderr)
}
