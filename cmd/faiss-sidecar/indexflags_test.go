package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/internal/testfixtures"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// indexEfFixture is FAISS 1.7.3's results with index.hnsw.efSearch set
// (NAME.index_ef.json, written by testdata/gen_fixtures.py).
type indexEfFixture struct {
	testfixtures.Search
	Runs []struct {
		testfixtures.Run
		IndexEf int `json:"index_ef_search"`
	} `json:"runs"`
}

// TestSearchIndexEfSearch: `search --index-ef-search N` with faiss-1.7.3
// semantics and the exact kernel prints FAISS 1.7.3's results with
// index.hnsw.efSearch = N, filtered or not, with --ef-search on top, in
// both loading modes.
func TestSearchIndexEfSearch(t *testing.T) {
	checked := 0
	for _, name := range []string{"hnsw_flat_l2", "idmap_hnsw"} {
		b, err := os.ReadFile(filepath.Join(fixtures, name+".index_ef.json"))
		require.NoError(t, err)
		var f indexEfFixture
		require.NoError(t, json.Unmarshal(b, &f))
		q := writeQueries(t, f.Search)
		for _, run := range f.Runs {
			filtered := run.AllowIDs != nil
			if !(run.IndexEf == 64 && run.K == 10 && !filtered) && !(run.IndexEf == 256 && run.K == 100 && filtered) && run.EfSearch == nil {
				continue // a sample: the hnswsearch parity test runs them all
			}
			for _, mode := range []string{"memory_efficient", "full"} {
				out := filepath.Join(t.TempDir(), "out.jsonl")
				args := []string{"search", filepath.Join(fixtures, name+".faiss"), "--queries", q, "--k", strconv.Itoa(run.K),
					"--semantics", "faiss-1.7.3", "--kernel", "exact", "--out", out, "--mode", mode,
					"--index-ef-search", strconv.Itoa(run.IndexEf)}
				if run.EfSearch != nil {
					args = append(args, "--ef-search", strconv.Itoa(*run.EfSearch))
				}
				if filtered {
					var ids strings.Builder
					for _, id := range run.AllowIDs {
						ids.WriteString(strconv.FormatInt(id, 10) + "\n")
					}
					p := filepath.Join(t.TempDir(), "allow.txt")
					require.NoError(t, os.WriteFile(p, []byte(ids.String()), 0o644))
					args = append(args, "--allow-ids", p)
				}
				code, _, errOut := runCLI(args...)
				require.Equal(t, 0, code, errOut)
				fh, err := os.Open(out)
				require.NoError(t, err)
				sc := bufio.NewScanner(fh)
				i := 0
				for ; sc.Scan(); i++ {
					var line struct {
						IDs       []int64   `json:"ids"`
						Distances []float64 `json:"distances"`
					}
					require.NoError(t, json.Unmarshal(sc.Bytes(), &line))
					require.Equal(t, run.IDs[i], line.IDs, "%s %v query %d", name, args, i)
					for j := range line.Distances {
						require.Equal(t, math.Float32bits(float32(run.Dist[i][j])), math.Float32bits(float32(line.Distances[j])), "%s query %d rank %d", name, i, j)
					}
				}
				fh.Close()
				require.Equal(t, len(f.Queries), i)
				checked++
			}
		}
	}
	require.GreaterOrEqual(t, checked, 12)
}

// TestIndexFlagErrors: a bad --index-ef-search is a usage error (exit 2);
// a footer CRC mismatch fails the load (exit 1) in mode full, and in
// memory_efficient with --verify-checksum, for search and bench alike.
func TestIndexFlagErrors(t *testing.T) {
	f := loadSearchFixture(t, "idmap_hnsw") // opensearch_0_165_vec is its copy with a footer
	q := writeQueries(t, f)
	idx := filepath.Join(fixtures, "opensearch_0_165_vec.faiss")
	for _, v := range []string{"0", "-3", "1048577", "many"} {
		for _, cmd := range []string{"search", "bench"} {
			code, out, errOut := runCLI(cmd, idx, "--queries", q, "--index-ef-search", v)
			want := fmt.Sprintf("index ef_search %s is out of range [1, 1048576]", v)
			if v == "many" {
				want = `"many" is not an integer`
			}
			assert.Equal(t, 2, code, "%s --index-ef-search %s: %s", cmd, v, errOut)
			assert.Contains(t, errOut, want)
			assert.Contains(t, errOut, "index-ef-search")
			assert.Empty(t, out)
		}
	}

	b, err := os.ReadFile(idx)
	require.NoError(t, err)
	pf, err := faissfmt.Open(strings.NewReader(string(b)), int64(len(b)))
	require.NoError(t, err)
	codes, _ := pf.Storage.Section("codes")
	b[codes.Offset+7] ^= 0x01
	bad := filepath.Join(t.TempDir(), "bad_crc.faiss")
	require.NoError(t, os.WriteFile(bad, b, 0o644))
	want := fmt.Sprintf("expects CRC-32 %#08x", pf.Footer.Checksum)
	for _, cmd := range []string{"search", "bench"} {
		extra := []string{"--duration", "10ms"}
		if cmd == "search" {
			extra = []string{"--out", filepath.Join(t.TempDir(), "o.jsonl")}
		}
		run := func(args ...string) (int, string) {
			code, _, errOut := runCLI(append(append([]string{cmd, bad, "--queries", q}, extra...), args...)...)
			return code, errOut
		}
		code, errOut := run()
		assert.Equal(t, 0, code, "%s without a check loads: %s", cmd, errOut)
		for _, args := range [][]string{{"--verify-checksum"}, {"--mode", "full"}, {"--backend", "pread", "--verify-checksum"}} {
			code, errOut := run(args...)
			assert.Equal(t, 1, code, "%s %v: %s", cmd, args, errOut)
			assert.Contains(t, errOut, want, "%s %v", cmd, args)
		}
		code, _, errOut = runCLI(append(append([]string{cmd, idx, "--queries", q}, extra...), "--verify-checksum", "--index-ef-search", "64")...)
		assert.Equal(t, 0, code, "%s: the intact file loads: %s", cmd, errOut)
	}
}

// TestSpecFlagsAreFlags: every flag an engine field error is worded with
// is a registered index or rerank flag.
func TestSpecFlagsAreFlags(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var ix indexFlags
	var rr rerankFlags
	ix.register(fs)
	rr.register(fs)
	for field, name := range specFlags {
		assert.NotNil(t, fs.Lookup(strings.TrimPrefix(name, "--")), "%s → %s", field, name)
	}
	err := (&indexFlags{mode: "memory_efficient", cacheBytes: -4}).validate()
	var ue *usageError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, "--cache-bytes -4 is negative", err.Error())
}

// TestCAGRASeedFlag: --cagra-seed reaches the engine's spec.
func TestCAGRASeedFlag(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var ix indexFlags
	ix.register(fs)
	require.NoError(t, fs.Parse([]string{"--cagra-seed", "42"}))
	assert.Equal(t, uint64(42), ix.spec("x.faiss", nil).CAGRASeed)
}
