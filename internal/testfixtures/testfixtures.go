package testfixtures

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Search is FAISS 1.7.3's results for one fixture.
type Search struct {
	Fixture string      `json:"fixture"`
	Binary  bool        `json:"binary"`
	Queries [][]float64 `json:"queries"`
	Runs    []Run       `json:"runs"`
}

// Run is one configuration: k, an optional ef_search given as search
// parameters, an optional allow-list of external ids, FAISS's ids and
// distances per query, its hnsw_stats, and for filtered runs FAISS's brute
// force over the allowed ids.
type Run struct {
	K        int         `json:"k"`
	EfSearch *int        `json:"ef_search"`
	AllowIDs []int64     `json:"allow_ids"`
	IDs      [][]int64   `json:"ids"`
	Dist     [][]float64 `json:"distances"`
	Stats    struct {
		N1, N2, N3 int
	} `json:"faiss_stats"`
	Exact *struct {
		IDs  [][]int64   `json:"ids"`
		Dist [][]float64 `json:"distances"`
	} `json:"exact"`
}

// Load reads dir/name.search.json.
func Load(dir, name string) (Search, error) {
	var s Search
	b, err := os.ReadFile(filepath.Join(dir, name+".search.json"))
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s.search.json: %w", name, err)
	}
	return s, nil
}

// All reads every search fixture in dir, sorted by name.
func All(dir string) ([]Search, error) {
	paths, _ := filepath.Glob(filepath.Join(dir, "*.search.json"))
	if len(paths) == 0 {
		return nil, fmt.Errorf("no search fixtures in %s", dir)
	}
	sort.Strings(paths)
	var out []Search
	for _, p := range paths {
		s, err := Load(dir, strings.TrimSuffix(filepath.Base(p), ".search.json"))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// Query returns query i as float32 components (float fixtures) or bytes
// (binary fixtures); the other is nil.
func (s *Search) Query(i int) ([]float32, []byte) {
	if s.Binary {
		b := make([]byte, len(s.Queries[i]))
		for j, v := range s.Queries[i] {
			b[j] = byte(v)
		}
		return nil, b
	}
	q := make([]float32, len(s.Queries[i]))
	for j, v := range s.Queries[i] {
		q[j] = float32(v)
	}
	return q, nil
}
