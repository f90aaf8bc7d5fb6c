package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/faiss-sidecar/faiss-sidecar/internal/testfixtures"
	"github.com/faiss-sidecar/faiss-sidecar/rerank"
	"github.com/stretchr/testify/assert"
)

type searchFixture = testfixtures.Search

func loadSearchFixture(t *testing.T, name string) searchFixture {
	t.Helper()
	f, err := testfixtures.Load(fixtures, name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// writeQueries writes the fixture's queries as .fvecs or .bvecs.
func writeQueries(t *testing.T, f searchFixture) string {
	var b bytes.Buffer
	for _, q := range f.Queries {
		binary.Write(&b, binary.LittleEndian, int32(len(q)))
		for _, v := range q {
			if f.Binary {
				b.WriteByte(byte(v))
			} else {
				binary.Write(&b, binary.LittleEndian, float32(v))
			}
		}
	}
	ext := ".fvecs"
	if f.Binary {
		ext = ".bvecs"
	}
	p := filepath.Join(t.TempDir(), "q"+ext)
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSearchCLIMatchesFAISS runs the `search` contract and compares every
// line with FAISS 1.7.3's results: ids equal, distances the same float32.
func TestSearchCLIMatchesFAISS(t *testing.T) {
	for _, c := range []struct {
		fixture string
		run     int
		args    []string
	}{
		{"hnsw_flat_l2", 1, []string{"--mode", "full"}},
		{"hnsw_flat_l2", 5, []string{"--backend", "pread"}},
		// The bounded-memory policy: compacted lists, a vector cache,
		// batched direct reads with read-ahead.
		{"hnsw_flat_l2", 5, []string{"--memory-budget", "12000000"}},
		{"idmap_hnsw", 1, []string{"--memory-budget", "12000000", "--warmup"}},
		{"idmap_hnsw", 7, []string{"--backend", "direct"}}, // filtered, ef from the file
		{"hnsw_flat_ip", 2, []string{"--backend", "mmap"}},
		{"bin_idmap_hnsw", 1, []string{"--mode", "full"}},
		{"hnsw_sq_8bit_direct", 1, nil},
	} {
		f := loadSearchFixture(t, c.fixture)
		run := f.Runs[c.run]
		out := filepath.Join(t.TempDir(), "out.jsonl")
		args := []string{"search", filepath.Join(fixtures, c.fixture+".faiss"), "--queries", writeQueries(t, f),
			"--k", strconv.Itoa(run.K), "--semantics", "faiss-1.7.3", "--kernel", "exact", "--out", out}
		if run.EfSearch != nil {
			args = append(args, "--ef-search", strconv.Itoa(*run.EfSearch))
		}
		if run.AllowIDs != nil {
			var ids strings.Builder
			for _, id := range run.AllowIDs {
				ids.WriteString(strconv.FormatInt(id, 10) + "\n")
			}
			p := filepath.Join(t.TempDir(), "allow.txt")
			os.WriteFile(p, []byte(ids.String()), 0o644)
			args = append(args, "--allow-ids", p)
		}
		code, _, errOut := runCLI(append(args, c.args...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.fixture, code, errOut)
		}
		fh, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		i := 0
		for ; sc.Scan(); i++ {
			var line struct {
				Query     int       `json:"query"`
				IDs       []int64   `json:"ids"`
				Distances []float64 `json:"distances"`
			}
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				t.Fatal(err)
			}
			if line.Query != i || len(line.IDs) != run.K {
				t.Fatalf("%s line %d: %s", c.fixture, i, sc.Text())
			}
			for j := range line.IDs {
				if line.IDs[j] != run.IDs[i][j] || math.Float32bits(float32(line.Distances[j])) != math.Float32bits(float32(run.Dist[i][j])) {
					t.Fatalf("%s query %d rank %d: (%d, %v), FAISS (%d, %v)", c.fixture, i, j, line.IDs[j], line.Distances[j], run.IDs[i][j], run.Dist[i][j])
				}
			}
		}
		fh.Close()
		if i != len(f.Queries) {
			t.Fatalf("%s: %d lines for %d queries", c.fixture, i, len(f.Queries))
		}
	}
}

func TestSearchCLIErrors(t *testing.T) {
	f := loadSearchFixture(t, "hnsw_flat_l2")
	q := writeQueries(t, f)
	idx := filepath.Join(fixtures, "hnsw_flat_l2.faiss")
	short := filepath.Join(t.TempDir(), "short.fvecs")
	os.WriteFile(short, []byte{1, 0, 0, 0, 0, 0, 128, 63}, 0o644)
	nan := filepath.Join(t.TempDir(), "nan.fvecs")
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, int32(32))
	for j := range 32 {
		v := float32(0)
		if j == 3 {
			v = float32(math.NaN())
		}
		binary.Write(&b, binary.LittleEndian, v)
	}
	os.WriteFile(nan, b.Bytes(), 0o644)
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"search", idx, "--queries", short}, 1, "queries have 1 values, the index expects 32 components"},
		{[]string{"search", idx, "--queries", nan}, 1, "query component 3 is NaN"},
		{[]string{"search", idx, "--queries", q, "--k", "0"}, 2, "k=0 is out of range"},
		{[]string{"search", idx, "--queries", q, "--k", "100000"}, 2, "k=100000 is out of range"},
		{[]string{"search", idx, "--queries", q, "--mode", "full", "--backend", "mmap"}, 2, "mode full reads the whole file"},
		{[]string{"search", idx, "--queries", q, "--mode", "warm"}, 2, `unknown mode "warm"`},
		{[]string{"search", idx, "--queries", q, "--semantics", "faiss-2"}, 2, `unknown semantics "faiss-2"`},
		{[]string{"search", filepath.Join(fixtures, "flat_l2.faiss"), "--queries", q}, 1, "has no HNSW graph"},
		{[]string{"search", idx}, 2, "usage: faiss-sidecar search"},
		{[]string{"search", idx, "--queries", q, "--memory-budget", "100000"}, 1, "memory budget too small: 100000 bytes; this index needs at least"},
		{[]string{"search", idx, "--queries", q, "--memory-budget", "12000000", "--mode", "full"}, 2, "--memory-budget applies to --mode memory_efficient"},
	} {
		code, out, errOut := runCLI(c.args...)
		if code != c.code || !strings.Contains(errOut, c.msg) || strings.Count(errOut, "\n") != 1 || out != "" {
			t.Errorf("%v: exit %d stdout %q stderr %q, want exit %d and %q", c.args, code, out, errOut, c.code, c.msg)
		}
		// A user reads these: no Go package names them.
		for _, p := range []string{"hnswsearch:", "engine:", "quant:", "rerank:", "partial:", "faissfmt:", "vecio:", "s3:"} {
			assert.NotContains(t, errOut, p, "%v", c.args)
		}
	}
}

func TestBenchCLI(t *testing.T) {
	f := loadSearchFixture(t, "hnsw_flat_l2")
	q := writeQueries(t, f)
	// Ground truth: FAISS's own top-10 as .ivecs, so recall must be 1.
	var gt bytes.Buffer
	for _, row := range f.Runs[1].IDs {
		binary.Write(&gt, binary.LittleEndian, int32(len(row)))
		for _, id := range row {
			binary.Write(&gt, binary.LittleEndian, int32(id))
		}
	}
	gtPath := filepath.Join(t.TempDir(), "gt.ivecs")
	os.WriteFile(gtPath, gt.Bytes(), 0o644)
	code, out, errOut := runCLI("bench", filepath.Join(fixtures, "hnsw_flat_l2.faiss"), "--queries", q, "--k", "10",
		"--semantics", "faiss-1.7.3", "--kernel", "exact", "--threads", "2", "--duration", "50ms", "--gt", gtPath, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"qps", "p50_us", "p99_us", "recall", "ndis_mean", "bytes_read_per_query"} {
		if _, ok := r[key]; !ok {
			t.Errorf("bench --json lacks %q: %s", key, out)
		}
	}
	if r["recall"].(float64) != 1 || r["qps"].(float64) <= 0 || r["ndis_mean"].(float64) <= 0 {
		t.Errorf("recall %v qps %v ndis %v", r["recall"], r["qps"], r["ndis_mean"])
	}
}

// TestSearchRerank: rescoring a 100-long shortlist with the index's own flat
// vectors (exported to .vec) returns FAISS's top 10, up to near ties, with
// every read strategy; mismatched vectors are a clear error.
func TestSearchRerank(t *testing.T) {
	f := loadSearchFixture(t, "idmap_hnsw")
	run := f.Runs[1]
	idx := filepath.Join(fixtures, "idmap_hnsw.faiss")
	vec := filepath.Join(t.TempDir(), "v.vec")
	if code, _, errOut := runCLI("export-vectors", idx, vec); code != 0 {
		t.Fatalf("export-vectors: %s", errOut)
	}
	for _, strat := range rerank.Strategies {
		out := filepath.Join(t.TempDir(), "out.jsonl")
		code, _, errOut := runCLI("search", idx, "--queries", writeQueries(t, f), "--k", "10", "--rerank-vectors", vec,
			"--rerank-strategy", strat, "--oversample", "10", "--out", out)
		if code != 0 {
			t.Fatalf("%s: %s", strat, errOut)
		}
		b, _ := os.ReadFile(out)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != len(f.Queries) {
			t.Fatalf("%s: %d lines for %d queries", strat, len(lines), len(f.Queries))
		}
		for i, ln := range lines {
			var got struct {
				IDs  []int64   `json:"ids"`
				Dist []float64 `json:"distances"`
			}
			if err := json.Unmarshal([]byte(ln), &got); err != nil {
				t.Fatal(err)
			}
			for j := range got.IDs {
				w := run.Dist[i][j]
				if math.Abs(got.Dist[j]-w) > 1e-4*math.Max(1, w) {
					t.Fatalf("%s query %d rank %d: distance %v, FAISS %v", strat, i, j, got.Dist[j], w)
				}
				tie := (j > 0 && math.Abs(run.Dist[i][j-1]-w) <= 1e-5*w) || (j+1 < len(got.IDs) && math.Abs(run.Dist[i][j+1]-w) <= 1e-5*w)
				if got.IDs[j] != run.IDs[i][j] && !tie {
					t.Fatalf("%s query %d rank %d: id %d, FAISS %d", strat, i, j, got.IDs[j], run.IDs[i][j])
				}
			}
		}
	}
	other := filepath.Join(t.TempDir(), "o.vec")
	runCLI("export-vectors", filepath.Join(fixtures, "hnsw_flat_l2.faiss"), other)
	code, _, errOut := runCLI("search", idx, "--queries", writeQueries(t, f), "--rerank-vectors", other)
	if code != 1 || !strings.Contains(errOut, "o.vec holds 32-dimensional vectors, the index has dimension 20") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
