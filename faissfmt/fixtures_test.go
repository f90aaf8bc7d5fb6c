package faissfmt

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const fixtureDir = "../testdata/fixtures"

// expected is what FAISS reported about a fixture (testdata/gen_fixtures.py).
type expected struct {
	FourCC     string    `json:"fourcc"`
	D          int       `json:"d"`
	NTotal     int64     `json:"ntotal"`
	IsTrained  bool      `json:"is_trained"`
	MetricType *int32    `json:"metric_type"`
	MetricArg  float32   `json:"metric_arg"`
	CodeSize   *int64    `json:"code_size"`
	CodesBytes *int64    `json:"codes_bytes"`
	CodesSHA   string    `json:"codes_sha256"`
	IDMap      []int64   `json:"id_map"`
	Child      *expected `json:"child"`
	SQ         *struct {
		QType        int32     `json:"qtype"`
		RangeStat    int32     `json:"rangestat"`
		RangeStatArg float32   `json:"rangestat_arg"`
		D            int64     `json:"d"`
		CodeSize     int64     `json:"code_size"`
		Trained      []float32 `json:"trained"`
	} `json:"sq"`
	HNSW *struct {
		AssignProbas []float64 `json:"assign_probas"`
		Cum          []int32   `json:"cum_nneighbor_per_level"`
		Levels       []int32   `json:"levels"`
		Offsets      []int64   `json:"offsets"`
		NeighborsN   int64     `json:"neighbors_count"`
		NeighborsSHA string    `json:"neighbors_sha256"`
		EntryPoint   int32     `json:"entry_point"`
		MaxLevel     int32     `json:"max_level"`
		EfC          int32     `json:"ef_construction"`
		EfS          int32     `json:"ef_search"`
		UpperBeam    int32     `json:"upper_beam"`
		M            int       `json:"M"`
		Histogram    []int64   `json:"levels_histogram"`
		Unreachable  int64     `json:"unreachable"`
	} `json:"hnsw"`
	// Top level only.
	FileSize     int64 `json:"file_size"`
	FaissSize    int64 `json:"faiss_size"`
	Unsupported  string
	LuceneFooter *struct {
		CRC32 uint32 `json:"crc32"`
	} `json:"lucene_footer"`
}

type fixture struct {
	name string
	data []byte
	exp  expected
}

func loadFixtures(t testing.TB) []fixture {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(fixtureDir, "*.faiss"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures in %s: %v", fixtureDir, err)
	}
	var out []fixture
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		js, err := os.ReadFile(strings.TrimSuffix(p, ".faiss") + ".json")
		if err != nil {
			t.Fatal(err)
		}
		fx := fixture{name: strings.TrimSuffix(filepath.Base(p), ".faiss"), data: data}
		var raw map[string]any
		if err := json.Unmarshal(js, &raw); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if err := json.Unmarshal(js, &fx.exp); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if u, ok := raw["unsupported"].(string); ok {
			fx.exp.Unsupported = u
		}
		out = append(out, fx)
	}
	return out
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func sectionBytes(t *testing.T, data []byte, x *Index, name string) []byte {
	t.Helper()
	s, ok := x.Section(name)
	if !ok {
		t.Fatalf("%s has no %s section", x.FourCC, name)
	}
	return data[s.Offset : s.Offset+s.Len]
}

// TestFixturesMatchFAISS compares every field Open reports with what FAISS
// 1.7.3 reported for the same file.
func TestFixturesMatchFAISS(t *testing.T) {
	for _, fx := range loadFixtures(t) {
		t.Run(fx.name, func(t *testing.T) {
			f, err := Open(bytes.NewReader(fx.data), int64(len(fx.data)))
			if fx.exp.Unsupported != "" {
				want := `unsupported FAISS index type "` + fx.exp.Unsupported + `" at byte 0`
				if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), want) {
					t.Fatalf("err = %v, want %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(fx.data)) != fx.exp.FileSize {
				t.Fatalf("file size %d, FAISS wrote %d", len(fx.data), fx.exp.FileSize)
			}
			if fx.exp.LuceneFooter != nil {
				if f.Footer == nil || f.Footer.Off != fx.exp.FaissSize || f.Footer.Checksum != uint64(fx.exp.LuceneFooter.CRC32) {
					t.Fatalf("footer %+v, want off %d crc %#x", f.Footer, fx.exp.FaissSize, fx.exp.LuceneFooter.CRC32)
				}
				crc, ok, err := VerifyFooterCRC(bytes.NewReader(fx.data), f)
				if err != nil || !ok || crc != fx.exp.LuceneFooter.CRC32 {
					t.Fatalf("VerifyFooterCRC = %#x %v %v", crc, ok, err)
				}
			} else if f.Footer != nil {
				t.Fatalf("unexpected footer %+v", f.Footer)
			}
			compareNode(t, fx.data, f.Root, &fx.exp)
			rep, err := Verify(bytes.NewReader(fx.data), f, VerifyOptions{Reachability: true})
			if err != nil || !rep.OK() {
				t.Fatalf("Verify of a FAISS-written file: %v %+v", err, rep.Violations)
			}
			for e := &fx.exp; e != nil; e = e.Child {
				if e.HNSW != nil && rep.Unreachable != e.HNSW.Unreachable {
					t.Fatalf("Verify counts %d unreachable nodes, FAISS's arrays give %d", rep.Unreachable, e.HNSW.Unreachable)
				}
			}
		})
	}
}

func compareNode(t *testing.T, data []byte, x *Index, e *expected) {
	t.Helper()
	if x.FourCC != e.FourCC || x.D != e.D || x.NTotal != e.NTotal || x.IsTrained != e.IsTrained {
		t.Fatalf("%s: got fourcc %s d %d ntotal %d trained %v, FAISS says %s %d %d %v",
			e.FourCC, x.FourCC, x.D, x.NTotal, x.IsTrained, e.FourCC, e.D, e.NTotal, e.IsTrained)
	}
	if e.MetricType != nil {
		if int32(x.Metric) != *e.MetricType {
			t.Fatalf("%s metric %d, FAISS %d", x.FourCC, x.Metric, *e.MetricType)
		}
		if x.Metric > MetricL2 && x.MetricArg != e.MetricArg {
			t.Fatalf("%s metric_arg %v, FAISS %v", x.FourCC, x.MetricArg, e.MetricArg)
		}
	}
	if x.Binary && e.CodeSize != nil && x.CodeSize != *e.CodeSize {
		t.Fatalf("%s code_size %d, FAISS %d", x.FourCC, x.CodeSize, *e.CodeSize)
	}
	if e.CodesBytes != nil {
		b := sectionBytes(t, data, x, "codes")
		if int64(len(b)) != *e.CodesBytes || sha(b) != e.CodesSHA {
			t.Fatalf("%s codes: %d bytes sha %s, FAISS %d bytes sha %s", x.FourCC, len(b), sha(b), *e.CodesBytes, e.CodesSHA)
		}
	}
	if e.IDMap != nil {
		b := sectionBytes(t, data, x, "id_map")
		if len(b) != 8*len(e.IDMap) {
			t.Fatalf("id_map has %d bytes, FAISS %d ids", len(b), len(e.IDMap))
		}
		for i, want := range e.IDMap {
			if got := int64(binary.LittleEndian.Uint64(b[8*i:])); got != want {
				t.Fatalf("id_map[%d] = %d, FAISS %d", i, got, want)
			}
		}
	}
	if e.SQ != nil {
		q := x.SQ
		if q == nil || int32(q.QType) != e.SQ.QType || q.RangeStat != e.SQ.RangeStat || q.RangeStatArg != e.SQ.RangeStatArg ||
			q.D != e.SQ.D || q.CodeSize != e.SQ.CodeSize || len(q.Trained) != len(e.SQ.Trained) {
			t.Fatalf("sq %+v, FAISS %+v", q, e.SQ)
		}
		for i := range q.Trained {
			if q.Trained[i] != e.SQ.Trained[i] {
				t.Fatalf("sq.trained[%d] = %v, FAISS %v", i, q.Trained[i], e.SQ.Trained[i])
			}
		}
	}
	if e.HNSW != nil {
		compareHNSW(t, data, x, e)
	}
	if (x.Child == nil) != (e.Child == nil) {
		t.Fatalf("%s: child %v, FAISS child %v", x.FourCC, x.Child != nil, e.Child != nil)
	}
	if x.Child != nil {
		compareNode(t, data, x.Child, e.Child)
	}
}

func compareHNSW(t *testing.T, data []byte, x *Index, e *expected) {
	h, w := x.HNSW, e.HNSW
	if h == nil {
		t.Fatalf("%s has no HNSW block", x.FourCC)
	}
	if h.EntryPoint != w.EntryPoint || h.MaxLevel != w.MaxLevel || h.EfConstruction != w.EfC ||
		h.EfSearch != w.EfS || h.UpperBeam != w.UpperBeam || h.M() != w.M {
		t.Fatalf("hnsw %v upper_beam %d, FAISS %+v", h, h.UpperBeam, w)
	}
	if len(h.AssignProbas) != len(w.AssignProbas) || len(h.CumNeighbors) != len(w.Cum) {
		t.Fatalf("small arrays: %d probas %d cum, FAISS %d %d", len(h.AssignProbas), len(h.CumNeighbors), len(w.AssignProbas), len(w.Cum))
	}
	for i := range w.AssignProbas {
		if h.AssignProbas[i] != w.AssignProbas[i] {
			t.Fatalf("assign_probas[%d] = %v, FAISS %v", i, h.AssignProbas[i], w.AssignProbas[i])
		}
	}
	for i := range w.Cum {
		if h.CumNeighbors[i] != w.Cum[i] {
			t.Fatalf("cum[%d] = %v, FAISS %v", i, h.CumNeighbors[i], w.Cum[i])
		}
	}
	if len(w.Histogram) != len(h.LevelsHistogram) && !(x.NTotal == 0 && len(h.LevelsHistogram) == 0) {
		t.Fatalf("histogram %v, FAISS %v", h.LevelsHistogram, w.Histogram)
	}
	for l := range h.LevelsHistogram {
		if h.LevelsHistogram[l] != w.Histogram[l] {
			t.Fatalf("histogram %v, FAISS %v", h.LevelsHistogram, w.Histogram)
		}
	}
	// levels and offsets: both the on-disk bytes and the compact table.
	lv := data[h.Levels.Offset : h.Levels.Offset+h.Levels.Len]
	if len(lv) != 4*len(w.Levels) || len(w.Offsets) != int(x.NTotal)+1 {
		t.Fatalf("levels %d bytes for %d FAISS levels", len(lv), len(w.Levels))
	}
	for i, want := range w.Levels {
		if got := int32(binary.LittleEndian.Uint32(lv[4*i:])); got != want || h.NumLevels(int32(i)) != int(want) {
			t.Fatalf("levels[%d] = %d (table %d), FAISS %d", i, got, h.NumLevels(int32(i)), want)
		}
	}
	for i, want := range w.Offsets {
		if got := h.NodeOffset(int64(i)); got != want {
			t.Fatalf("offsets[%d] = %d, FAISS %d", i, got, want)
		}
	}
	nb := data[h.Neighbors.Offset : h.Neighbors.Offset+h.Neighbors.Len]
	if h.Neighbors.Count() != w.NeighborsN || sha(nb) != w.NeighborsSHA {
		t.Fatalf("neighbors %d sha %s, FAISS %d sha %s", h.Neighbors.Count(), sha(nb), w.NeighborsN, w.NeighborsSHA)
	}
}

// TestWorkedExample checks the byte positions of docs/faiss-format.md §5 on the
// same index built by FAISS.
func TestWorkedExample(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(fixtureDir, "worked_example.faiss"))
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 727 {
		t.Fatalf("worked example is %d bytes, the format doc says 727", len(data))
	}
	f, err := Open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	h := f.Graph.HNSW
	want := map[string][2]int64{"levels": {450, 12}, "offsets": {470, 32}, "neighbors": {510, 96}}
	for _, s := range f.Graph.Sections {
		if w, ok := want[s.Name]; ok && (s.Offset != w[0] || s.Len != w[1]) {
			t.Errorf("%s at %d len %d, doc says %d len %d", s.Name, s.Offset, s.Len, w[0], w[1])
		}
	}
	codes, _ := f.Storage.Section("codes")
	ids, _ := f.IDMap.Section("id_map")
	if codes.Offset != 671 || codes.Len != 24 || ids.Offset != 703 || ids.Len != 24 {
		t.Errorf("codes %+v id_map %+v", codes, ids)
	}
	if f.Root.End != 727 || f.Graph.Off != 37 || f.Storage.Off != 626 || h.EntryPoint != 1 || h.MaxLevel != 3 {
		t.Errorf("root end %d graph at %d storage at %d ep %d ml %d", f.Root.End, f.Graph.Off, f.Storage.Off, h.EntryPoint, h.MaxLevel)
	}
}
