package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial/zstd"
)

const fixtures = "../../testdata/fixtures"

func runCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

// TestInspectJSONContract checks the keys a checker reads against FAISS's own
// values (fixture JSON) and the byte map of docs/faiss-format.md §5.
func TestInspectJSONContract(t *testing.T) {
	code, out, errOut := runCLI("inspect", filepath.Join(fixtures, "worked_example.faiss"), "--json")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var got struct {
		FourCC   string `json:"fourcc"`
		D        int    `json:"d"`
		NTotal   int64  `json:"ntotal"`
		Metric   string `json:"metric"`
		Sections []struct {
			Name           string
			Offset, Length int64
		} `json:"sections"`
		Child *struct {
			FourCC   string `json:"fourcc"`
			Sections []struct {
				Name           string
				Offset, Length int64
			} `json:"sections"`
			HNSW struct {
				EntryPoint int     `json:"entry_point"`
				MaxLevel   int     `json:"max_level"`
				EfC        int     `json:"ef_construction"`
				EfS        int     `json:"ef_search"`
				M          int     `json:"M"`
				Hist       []int64 `json:"levels_histogram"`
			} `json:"hnsw"`
			Child *struct {
				FourCC   string `json:"fourcc"`
				Sections []struct {
					Name           string
					Offset, Length int64
				} `json:"sections"`
			} `json:"child"`
		} `json:"child"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.FourCC != "IxMp" || got.D != 2 || got.NTotal != 3 || got.Metric != "L2" {
		t.Fatalf("root %+v", got)
	}
	if len(got.Sections) != 1 || got.Sections[0].Name != "id_map" || got.Sections[0].Offset != 703 || got.Sections[0].Length != 24 {
		t.Fatalf("root sections %+v", got.Sections)
	}
	c := got.Child
	want := map[string][2]int64{"levels": {450, 12}, "offsets": {470, 32}, "neighbors": {510, 96}}
	for _, s := range c.Sections {
		if w, ok := want[s.Name]; ok {
			if s.Offset != w[0] || s.Length != w[1] {
				t.Errorf("%s at %d len %d, format doc: %d len %d", s.Name, s.Offset, s.Length, w[0], w[1])
			}
			delete(want, s.Name)
		}
	}
	if len(want) != 0 || c.FourCC != "IHNf" {
		t.Fatalf("child %s missing sections %v", c.FourCC, want)
	}
	// HNSW fields as FAISS reported them.
	var exp struct {
		Child struct {
			HNSW struct {
				EntryPoint int     `json:"entry_point"`
				MaxLevel   int     `json:"max_level"`
				EfC        int     `json:"ef_construction"`
				EfS        int     `json:"ef_search"`
				M          int     `json:"M"`
				Hist       []int64 `json:"levels_histogram"`
			} `json:"hnsw"`
		} `json:"child"`
	}
	js, _ := os.ReadFile(filepath.Join(fixtures, "worked_example.json"))
	if err := json.Unmarshal(js, &exp); err != nil {
		t.Fatal(err)
	}
	h, e := c.HNSW, exp.Child.HNSW
	if h.EntryPoint != e.EntryPoint || h.MaxLevel != e.MaxLevel || h.EfC != e.EfC || h.EfS != e.EfS || h.M != e.M || len(h.Hist) != len(e.Hist) {
		t.Fatalf("hnsw %+v, FAISS %+v", h, e)
	}
	for i := range h.Hist {
		if h.Hist[i] != e.Hist[i] {
			t.Fatalf("levels_histogram %v, FAISS %v", h.Hist, e.Hist)
		}
	}
	if c.Child == nil || c.Child.FourCC != "IxF2" || len(c.Child.Sections) != 1 || c.Child.Sections[0].Name != "codes" ||
		c.Child.Sections[0].Offset != 671 || c.Child.Sections[0].Length != 24 {
		t.Fatalf("storage %+v", c.Child)
	}
}

func TestInspectHumanAndVerify(t *testing.T) {
	code, out, errOut := runCLI("inspect", "--verify", filepath.Join(fixtures, "opensearch_0_165_vec.faiss"))
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d stderr %q", code, errOut)
	}
	for _, want := range []string{"IxMp IndexIDMap", "IHNf IndexHNSWFlat", "hnsw: M=8", "nodes per top level:", "section neighbors",
		"CRC ok", "mode memory_efficient needs", "level 0: 400 nodes", "unreachable from the entry point: 0", "verify: 0 violations"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestInspectBadFiles: a bad file exits non-zero with exactly one stderr line
// naming the problem, and nothing on stdout.
func TestInspectBadFiles(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile(filepath.Join(fixtures, "hnsw_flat_l2.faiss"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	badNeighbor := bytes.Clone(good)
	copy(badNeighbor[6185:], []byte{0xff, 0xff, 0xff, 0x7f}) // first neighbor slot of node 0
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"inspect", write("trunc.faiss", good[:5000])}, 1, "file truncated: offsets needs 4008 bytes at offset 2169, 2831 left"},
		{[]string{"inspect", "--json", filepath.Join(fixtures, "unsupported_ivf.faiss")}, 1, `unsupported FAISS index type "IwFl" at byte 0`},
		{[]string{"inspect", write("empty.faiss", nil)}, 1, "file truncated"},
		{[]string{"inspect", filepath.Join(dir, "missing.faiss")}, 1, "no such file"},
		{[]string{"inspect", "--verify", write("nb.faiss", badNeighbor)}, 1, "neighbor id 2147483647 at node 0 level 0 is out of range [0, 500)"},
		{[]string{"inspect"}, 2, "usage: faiss-sidecar inspect FILE"},
		{[]string{"inspect", "a", "--nope"}, 2, "flag provided but not defined"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
	}
	for _, tc := range cases {
		code, out, errOut := runCLI(tc.args...)
		lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
		if code != tc.code || len(lines) != 1 || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%v: exit %d (want %d), stderr %q (want one line with %q)", tc.args, code, tc.code, errOut, tc.msg)
		}
		if tc.code != 0 && !strings.Contains(strings.Join(tc.args, " "), "--verify") && out != "" {
			t.Errorf("%v: stdout %q on failure", tc.args, out)
		}
	}
}

// TestInspectEveryBackend: the same file read through every backend, and
// its compressed copy recognised by its seek table, inspect identically.
func TestInspectEveryBackend(t *testing.T) {
	if !zstd.Supported {
		t.Skip("built without cgo: no zstd")
	}
	src := filepath.Join(fixtures, "opensearch_0_165_vec.faiss")
	zst := filepath.Join(t.TempDir(), "idx.faiss.zst")
	code, out, errOut := runCLI("compress", src, zst, "--frame-size", "4096")
	if code != 0 || !strings.Contains(out, "ratio") {
		t.Fatalf("compress: exit %d %q %q", code, out, errOut)
	}
	strip := func(s string) map[string]any {
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "file")
		delete(m, "backend")
		return m
	}
	_, ref, _ := runCLI("inspect", src, "--json", "--verify")
	want, _ := json.Marshal(strip(ref))
	for _, args := range [][]string{
		{src, "--backend", "memory"}, {src, "--backend", "mmap"}, {src, "--backend", "pread"},
		{src, "--backend", "direct"}, {zst, "--backend", "zstd"}, {zst},
	} {
		code, out, errOut := runCLI(append([]string{"inspect", "--json", "--verify"}, args...)...)
		got, _ := json.Marshal(strip(out))
		if code != 0 || string(got) != string(want) {
			t.Errorf("inspect %v: exit %d stderr %q\n got %s\nwant %s", args, code, errOut, got, want)
		}
	}
}

const faiss115 = "../../testdata/faiss115" // files written by FAISS 1.15

// inspectCAGRA is the part of inspect --json a reader of CAGRA and
// skip-storage files looks at.
type inspectCAGRA struct {
	FourCC string `json:"fourcc"`
	CAGRA  *struct {
		Keep        bool   `json:"keep_max_size_level0"`
		BaseOnly    bool   `json:"base_level_only"`
		Entrypoints int32  `json:"num_base_level_search_entrypoints"`
		Numeric     string `json:"numeric_type"`
		NumericID   *int32 `json:"numeric_type_id"`
		Implied     bool   `json:"numeric_type_implied"`
	} `json:"cagra"`
	Child *struct {
		FourCC string `json:"fourcc"`
		Type   string `json:"type"`
		Offset int64  `json:"offset"`
		End    int64  `json:"end"`
	} `json:"child"`
	Missing *struct {
		Offset int64  `json:"offset"`
		D      int    `json:"d"`
		NTotal int64  `json:"ntotal"`
		Metric string `json:"metric"`
	} `json:"vectors_missing"`
	Verify *struct {
		Total int64 `json:"violations_total"`
	} `json:"verify"`
}

func inspectJSON(t *testing.T, path string) inspectCAGRA {
	t.Helper()
	code, out, errOut := runCLI("inspect", path, "--json", "--verify")
	require.Equal(t, 0, code, errOut)
	require.Empty(t, errOut)
	var got inspectCAGRA
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.NotNil(t, got.Verify)
	assert.Zero(t, got.Verify.Total)
	return got
}

// TestInspectCAGRA: inspect shows the CAGRA fields FAISS 1.15 wrote, in
// JSON and text, and --verify passes.
func TestInspectCAGRA(t *testing.T) {
	for _, c := range []struct {
		name, fourcc, child, numeric, text string
	}{
		{"hnsw_cagra_l2", "IHc2", "IxF2", "Float32", "numeric_type=Float32\n"},
		{"hnsw_cagra_ip", "IHc2", "IxFI", "Float32", "numeric_type=Float32\n"},
		{"binary_hnsw_cagra", "IBHc", "IBxF", "", "num_base_level_search_entrypoints=32\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(faiss115, c.name+".faiss")
			got := inspectJSON(t, path)
			assert.Equal(t, c.fourcc, got.FourCC)
			require.NotNil(t, got.CAGRA)
			assert.True(t, got.CAGRA.Keep)
			assert.False(t, got.CAGRA.BaseOnly)
			assert.Equal(t, int32(32), got.CAGRA.Entrypoints)
			assert.Equal(t, c.numeric, got.CAGRA.Numeric)
			assert.Equal(t, c.numeric != "", got.CAGRA.NumericID != nil)
			assert.False(t, got.CAGRA.Implied)
			assert.Equal(t, c.child, got.Child.FourCC)
			assert.Nil(t, got.Missing)

			code, out, errOut := runCLI("inspect", path)
			require.Equal(t, 0, code, errOut)
			assert.Contains(t, out, "  cagra: keep_max_size_level0=true base_level_only=false num_base_level_search_entrypoints=32")
			assert.Contains(t, out, c.text)
			assert.NotContains(t, out, "vectors: MISSING")
		})
	}
	// A plain HNSW file has no cagra key.
	_, out, _ := runCLI("inspect", filepath.Join(fixtures, "hnsw_flat_l2.faiss"), "--json")
	assert.NotContains(t, out, `"cagra"`)
	assert.NotContains(t, out, `"vectors_missing"`)
}

// TestInspectIHNc: the FAISS 1.9–1.11 layout (IHc2 less its numeric type)
// says the numeric type is implied, and base_level_only is explained.
func TestInspectIHNc(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(faiss115, "hnsw_cagra_l2.faiss"))
	require.NoError(t, err)
	// IHc2: fourcc, 33-byte header, keep (37), base_level_only (38),
	// entrypoints (39), numeric type (43–46), then the HNSW block.
	ihnc := append(append([]byte("IHNc"), b[4:43]...), b[47:]...)
	ihnc[38] = 1
	path := filepath.Join(t.TempDir(), "ihnc.faiss")
	require.NoError(t, os.WriteFile(path, ihnc, 0o644))
	got := inspectJSON(t, path)
	assert.Equal(t, "IHNc", got.FourCC)
	require.NotNil(t, got.CAGRA)
	assert.True(t, got.CAGRA.BaseOnly)
	assert.Equal(t, "Float32", got.CAGRA.Numeric)
	assert.True(t, got.CAGRA.Implied)
	code, out, errOut := runCLI("inspect", path)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "numeric_type=Float32 (not stored; FAISS assumes it)\n")
	assert.Contains(t, out, "FAISS searches level 0 only, from the best of 32 random nodes per query\n")
}

// TestInspectSkipStorage: a file FAISS wrote without its vectors shows its
// graph and says the vectors are missing.
func TestInspectSkipStorage(t *testing.T) {
	path := filepath.Join(faiss115, "hnsw_flat_l2_skip_storage.faiss")
	got := inspectJSON(t, path)
	assert.Equal(t, "IHNf", got.FourCC)
	require.NotNil(t, got.Missing)
	assert.Equal(t, int64(287949), got.Missing.Offset)
	assert.Equal(t, 32, got.Missing.D)
	assert.Equal(t, int64(2000), got.Missing.NTotal)
	assert.Equal(t, "L2", got.Missing.Metric)
	require.NotNil(t, got.Child)
	assert.Equal(t, "null", got.Child.FourCC)
	assert.Equal(t, int64(287949), got.Child.Offset)
	assert.Equal(t, int64(287953), got.Child.End)

	code, out, errOut := runCLI("inspect", path)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "hnsw: M=16 efConstruction=40 efSearch=16 max_level=3 entry_point=1751")
	assert.Contains(t, out, "  null no storage (vectors left out with IO_FLAG_SKIP_STORAGE)  bytes [287949, 287953)\n")
	assert.Contains(t, out, `vectors: MISSING: FAISS wrote "null" at byte 287949 in place of the storage (IO_FLAG_SKIP_STORAGE); searching needs the 2000 vectors (d=32, metric L2): give them with --vectors FILE`)
}
