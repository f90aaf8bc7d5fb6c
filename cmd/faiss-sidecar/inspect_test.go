package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
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
	if !partial.ZstdSupported {
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
