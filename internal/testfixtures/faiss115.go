package testfixtures

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/faiss-sidecar/faiss-sidecar/internal/vecio"
)

// FAISS115 is what FAISS v1.15.0 recorded for one file of testdata/faiss115
// (NAME.json; that folder's README says how), with its queries read.
type FAISS115 struct {
	Queries string   `json:"queries"` // the query file beside NAME.json (.fvecs or .bvecs)
	NQ      int      `json:"nq"`
	KNN     []KNN115 `json:"knn"`
	// Filter is the allow-list of the filtered range runs.
	Filter struct {
		IDs []int64 `json:"ids"`
	} `json:"filter"`
	Range []Range115 `json:"range"`
	// QF and QB are the queries: float (QF) or binary codes (QB); the
	// other is nil.
	QF [][]float32 `json:"-"`
	QB [][]byte    `json:"-"`
}

// KNN115 is one k-NN run.
type KNN115 struct {
	K             int         `json:"k"`
	EfSearch      int         `json:"efSearch"`
	BaseLevelOnly *bool       `json:"base_level_only"`
	Call          string      `json:"call"`
	Deterministic bool        `json:"deterministic"`
	IDs           [][]int64   `json:"ids"`
	Dist          [][]float64 `json:"distances"`
}

// Range115 is one range-search run: query i's hits are IDs[Lims[i]:Lims[i+1]].
type Range115 struct {
	Radius    float64   `json:"radius"`
	EfSearch  int       `json:"efSearch"`
	Effective int       `json:"effective_efSearch"` // the efSearch FAISS searched with
	Filtered  bool      `json:"filtered"`
	Lims      []int     `json:"lims"`
	IDs       []int64   `json:"ids"`
	Dist      []float64 `json:"distances"`
}

// Load115 reads dir/name.json and the queries it names.
func Load115(dir, name string) (FAISS115, error) {
	var f FAISS115
	b, err := os.ReadFile(filepath.Join(dir, name+".json"))
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("%s.json: %w", name, err)
	}
	m, err := vecio.ReadFile(filepath.Join(dir, f.Queries))
	if err != nil {
		return f, err
	}
	for i := range m.N {
		if m.F32 != nil {
			f.QF = append(f.QF, m.RowF32(i))
		} else {
			f.QB = append(f.QB, m.RowU8(i))
		}
	}
	if len(f.QF)+len(f.QB) != f.NQ {
		return f, fmt.Errorf("%s: %d queries, %s.json says %d", f.Queries, len(f.QF)+len(f.QB), name, f.NQ)
	}
	return f, nil
}

// Float64s is q widened, for APIs that take float64 vectors.
func Float64s(q []float32) []float64 {
	out := make([]float64, len(q))
	for i, v := range q {
		out[i] = float64(v)
	}
	return out
}

// ULPs is how many float32 values lie between a and b (same sign): FAISS
// 1.15 builds sum in another order than our kernels, so its distances are
// compared within a few ULPs rather than bit for bit.
func ULPs(a, b float32) int64 {
	d := int64(math.Float32bits(a)) - int64(math.Float32bits(b))
	if d < 0 {
		d = -d
	}
	return d
}
