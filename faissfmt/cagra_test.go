package faissfmt

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// faiss115Dir holds files written by FAISS v1.15.0 (see its README).
const faiss115Dir = "../testdata/faiss115"

// faiss115 is what FAISS 1.15 reported about one of its files (NAME.json).
type faiss115 struct {
	FourCCChain []string `json:"fourcc_chain"`
	D           int      `json:"d"`
	NTotal      int64    `json:"ntotal"`
	MetricType  int32    `json:"metric_type"`
	M           int      `json:"M"`
	EfC         int32    `json:"efConstruction"`
	EfS         int32    `json:"efSearch_stored"`
	EntryPoint  int32    `json:"entry_point"`
	MaxLevel    int32    `json:"max_level"`
	Cum         []int32  `json:"cum_nneighbor_per_level"`
	PerLevel    []int64  `json:"nodes_per_top_level"`
	CodeSize    *int64   `json:"code_size"`
	IOFlags     string   `json:"io_flags"`
	CAGRA       *struct {
		Keep        bool   `json:"keep_max_size_level0"`
		BaseOnly    bool   `json:"base_level_only"`
		Entrypoints int32  `json:"num_base_level_search_entrypoints"`
		NumericType *int32 `json:"numeric_type"`
	} `json:"cagra"`
}

var faiss115Files = []string{"hnsw_cagra_l2", "hnsw_cagra_ip", "binary_hnsw_cagra", "hnsw_flat_l2_skip_storage"}

func readFAISS115(t testing.TB, name string) ([]byte, faiss115) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(faiss115Dir, name+".faiss"))
	require.NoError(t, err)
	js, err := os.ReadFile(filepath.Join(faiss115Dir, name+".json"))
	require.NoError(t, err)
	var e faiss115
	require.NoError(t, json.Unmarshal(js, &e), name)
	return b, e
}

var allowNull = OpenOptions{AllowNullStorage: true}

func openWith(b []byte, o OpenOptions) (*File, error) {
	return OpenWith(bytes.NewReader(b), int64(len(b)), o)
}

// TestFAISS115Files compares what Open reports on the FAISS 1.15 files
// (CAGRA-built HNSW and an HNSW without its vectors) with what FAISS said,
// and runs inspect --verify's checks on them.
func TestFAISS115Files(t *testing.T) {
	for _, name := range faiss115Files {
		t.Run(name, func(t *testing.T) {
			b, e := readFAISS115(t, name)
			f, err := openWith(b, allowNull)
			require.NoError(t, err)
			var chain []string
			for x := f.Root; x != nil; x = x.Child {
				chain = append(chain, x.FourCC)
			}
			assert.Equal(t, e.FourCCChain, chain)
			assert.Equal(t, int64(len(b)), f.Root.End)
			assert.Nil(t, f.Footer)
			g := f.Graph
			require.NotNil(t, g)
			assert.Equal(t, e.D, g.D)
			assert.Equal(t, e.NTotal, g.NTotal)
			assert.Equal(t, e.MetricType, int32(g.Metric))
			if e.CodeSize != nil {
				assert.Equal(t, *e.CodeSize, g.CodeSize)
			}
			h := g.HNSW
			assert.Equal(t, e.M, h.M())
			assert.Equal(t, e.EfC, h.EfConstruction)
			assert.Equal(t, e.EfS, h.EfSearch)
			assert.Equal(t, e.EntryPoint, h.EntryPoint)
			assert.Equal(t, e.MaxLevel, h.MaxLevel)
			assert.Equal(t, e.Cum, h.CumNeighbors)
			assert.Equal(t, e.PerLevel, h.LevelsHistogram)
			if e.CAGRA == nil {
				assert.Nil(t, g.CAGRA)
			} else {
				require.NotNil(t, g.CAGRA)
				assert.Equal(t, e.CAGRA.Keep, g.CAGRA.KeepMaxSizeLevel0)
				assert.Equal(t, e.CAGRA.BaseOnly, g.CAGRA.BaseLevelOnly)
				assert.Equal(t, e.CAGRA.Entrypoints, g.CAGRA.NumBaseLevelSearchEntrypoints)
				assert.Equal(t, e.CAGRA.NumericType != nil, g.CAGRA.HasNumericType)
				if e.CAGRA.NumericType != nil {
					assert.Equal(t, *e.CAGRA.NumericType, int32(g.CAGRA.NumericType))
				}
			}
			rep, err := Verify(bytes.NewReader(b), f, VerifyOptions{Reachability: true})
			require.NoError(t, err)
			assert.True(t, rep.OK(), "%+v", rep.Violations)
			require.Len(t, rep.Levels, len(e.PerLevel))

			// Only the file written with IO_FLAG_SKIP_STORAGE lacks vectors,
			// and plain Open refuses exactly that one.
			missing := e.IOFlags == "IO_FLAG_SKIP_STORAGE"
			assert.Equal(t, missing, f.VectorsMissing())
			assert.Equal(t, missing, f.Storage == nil)
			_, err = Open(bytes.NewReader(b), int64(len(b)))
			if missing {
				require.ErrorIs(t, err, ErrUnsupported)
				require.ErrorContains(t, err, `"null" at byte 287949 (the vectors were left out of this file with IO_FLAG_SKIP_STORAGE`)
			} else {
				require.NoError(t, err)
			}
		})
	}
}

// TestFAISS115FloatStorage: the float CAGRA files' vectors are the base
// vectors FAISS wrote beside the skip-storage file (.fvecs, same order).
func TestFAISS115FloatStorage(t *testing.T) {
	fv, err := os.ReadFile(filepath.Join(faiss115Dir, "hnsw_flat_l2_skip_storage.fvecs"))
	require.NoError(t, err)
	const d = 32
	require.Len(t, fv, 2000*(4+4*d))
	for _, name := range []string{"hnsw_cagra_l2", "hnsw_cagra_ip"} {
		b, _ := readFAISS115(t, name)
		f, err := openWith(b, OpenOptions{})
		require.NoError(t, err)
		codes, ok := f.Storage.Section("codes")
		require.True(t, ok)
		require.Equal(t, int64(2000*4*d), codes.Len)
		for i := 0; i < 2000; i++ {
			row := fv[i*(4+4*d):]
			require.Equal(t, uint32(d), binary.LittleEndian.Uint32(row))
			require.Equal(t, row[4:4+4*d], b[codes.Offset+int64(i*4*d):codes.Offset+int64((i+1)*4*d)], "%s vector %d", name, i)
		}
	}
}

// TestSkipStorageGraph: what a caller that brings the vectors itself can
// read from a file without them.
func TestSkipStorageGraph(t *testing.T) {
	b, _ := readFAISS115(t, "hnsw_flat_l2_skip_storage")
	f, err := openWith(b, allowNull)
	require.NoError(t, err)
	require.True(t, f.VectorsMissing())
	assert.Nil(t, f.Storage)
	assert.Nil(t, f.IDMap)
	g := f.Graph
	assert.Equal(t, "IHNf", g.FourCC)
	assert.Equal(t, 32, g.D)
	assert.Equal(t, int64(2000), g.NTotal)
	assert.Equal(t, MetricL2, g.Metric)
	assert.Zero(t, g.CodeSize, "the storage that would give the code size is absent")
	n := g.Child
	require.NotNil(t, n)
	assert.Equal(t, Index{FourCC: "null", Off: 287949, End: 287953}, *n)
	assert.Equal(t, "no storage (vectors left out with IO_FLAG_SKIP_STORAGE)", n.TypeName())
	assert.Positive(t, f.ResidentBytes())
}

// cagraFields builds the CAGRA fields of an IHc2 (with numeric type) or an
// IHNc/IBHc (without).
func cagraFields(keep, baseOnly byte, entrypoints int32, numeric *int32) []byte {
	b := []byte{keep, baseOnly}
	b = binary.LittleEndian.AppendUint32(b, uint32(entrypoints))
	if numeric != nil {
		b = binary.LittleEndian.AppendUint32(b, uint32(*numeric))
	}
	return b
}

// toCAGRA turns the HNSW index at g in b into fourcc fcc, inserting fields
// after its header (float: 33 bytes, binary: 21, neither with metric_arg).
func toCAGRA(b []byte, g *Index, fcc string, fields []byte) []byte {
	at := g.Off + 4 + 33
	if g.Binary {
		at = g.Off + 4 + 21
	}
	out := append(append(append([]byte{}, b[:at]...), fields...), b[at:]...)
	copy(out[g.Off:], fcc)
	return out
}

// withNullStorage replaces the storage of b's HNSW index by "null", as
// FAISS writes with IO_FLAG_SKIP_STORAGE; what follows it (an id map) stays.
func withNullStorage(b []byte, f *File) []byte {
	s := f.Graph.Child
	return append(append(append([]byte{}, b[:s.Off]...), "null"...), b[s.End:]...)
}

func i32p(v int32) *int32 { return &v }

// TestCAGRAVariants covers the layouts FAISS 1.15 did not write for the
// fixtures: IHNc (1.9–1.11, no numeric type), IHc2 with fp16 storage, and
// "null" storage under id maps and binary HNSW (OpenSearch writes both).
func TestCAGRAVariants(t *testing.T) {
	l2, _ := readFAISS115(t, "hnsw_cagra_l2")
	l2f, err := openWith(l2, OpenOptions{})
	require.NoError(t, err)

	t.Run("IHNc", func(t *testing.T) {
		// IHc2 less its numeric type is IHNc.
		b := append(append([]byte("IHNc"), l2[4:43]...), l2[47:]...)
		f, err := openWith(b, OpenOptions{})
		require.NoError(t, err)
		g := f.Graph
		assert.Equal(t, "IHNc", g.FourCC)
		assert.Equal(t, &CAGRA{KeepMaxSizeLevel0: true, NumBaseLevelSearchEntrypoints: 32, NumericType: NumericFloat32}, g.CAGRA)
		assert.Equal(t, l2f.Graph.HNSW.Neighbors.Offset-4, g.HNSW.Neighbors.Offset)
		assert.Equal(t, "IxF2", f.Storage.FourCC)
		assert.Equal(t, int64(128), g.CodeSize)
		rep, err := Verify(bytes.NewReader(b), f, VerifyOptions{Reachability: true})
		require.NoError(t, err)
		assert.True(t, rep.OK())
	})

	fp16 := readFixture(t, "hnsw_sq_fp16") // IHNs > IxSQ fp16, FAISS 1.7.3
	fp16f := mustOpen(t, fp16)
	t.Run("IHc2 Float16", func(t *testing.T) {
		b := toCAGRA(fp16, fp16f.Graph, "IHc2", cagraFields(1, 0, 32, i32p(1)))
		f, err := openWith(b, OpenOptions{})
		require.NoError(t, err)
		assert.Equal(t, NumericFloat16, f.Graph.CAGRA.NumericType)
		assert.Equal(t, QTFP16, f.Storage.SQ.QType)
		assert.Equal(t, fp16f.Storage.CodeSize, f.Graph.CodeSize)
	})
	t.Run("IHc2 Float16 over flat storage", func(t *testing.T) {
		b := append([]byte{}, l2...)
		putU32(b, 43, 1)
		_, err := openWith(b, OpenOptions{})
		requireFormatError(t, err, ErrInvalid, "cagra.numeric_type",
			"IHc2 at byte 0 has numeric type Float16 but its storage at byte 287959 is IxF2; Float16 needs an fp16 IxSQ")
	})
	t.Run("IHc2 Float32 over SQ storage", func(t *testing.T) {
		b := toCAGRA(fp16, fp16f.Graph, "IHc2", cagraFields(1, 0, 32, i32p(0)))
		_, err := openWith(b, OpenOptions{})
		requireFormatError(t, err, ErrInvalid, "cagra.numeric_type", "has numeric type Float32 but its storage at byte")
		require.ErrorContains(t, err, "is an IxSQ of type fp16; Float32 needs IxF2, IxFI or IxFl")
	})

	t.Run("IxMp > IHNf > null", func(t *testing.T) {
		ex := readFixture(t, "worked_example")
		b := withNullStorage(ex, mustOpen(t, ex))
		_, err := openWith(b, OpenOptions{})
		require.ErrorIs(t, err, ErrUnsupported)
		f, err := openWith(b, allowNull)
		require.NoError(t, err)
		assert.True(t, f.VectorsMissing())
		assert.Nil(t, f.Storage)
		require.NotNil(t, f.IDMap)
		assert.Equal(t, int64(len(b)), f.Root.End)
		assert.Equal(t, int64(3), f.Graph.NTotal)
		assert.Equal(t, MetricL2, f.Graph.Metric)
		ids, ok := f.IDMap.Section("id_map")
		require.True(t, ok)
		assert.Equal(t, int64(3), ids.Count())
	})

	bin := readFixture(t, "bin_idmap_hnsw")
	binf := mustOpen(t, bin)
	t.Run("IBMp > IBHc > IBxF", func(t *testing.T) {
		b := toCAGRA(bin, binf.Graph, "IBHc", cagraFields(0, 1, 7, nil))
		f, err := openWith(b, OpenOptions{})
		require.NoError(t, err)
		assert.Equal(t, &CAGRA{BaseLevelOnly: true, NumBaseLevelSearchEntrypoints: 7}, f.Graph.CAGRA)
		assert.Equal(t, "IBxF", f.Storage.FourCC)
	})
	t.Run("IBMp > IBHf > null", func(t *testing.T) {
		b := withNullStorage(bin, binf)
		f, err := openWith(b, allowNull)
		require.NoError(t, err)
		assert.True(t, f.VectorsMissing())
		assert.True(t, f.Graph.Child.Binary)
		assert.Equal(t, binf.Graph.CodeSize, f.Graph.CodeSize, "a binary header keeps its code size")
		rep, err := Verify(bytes.NewReader(b), f, VerifyOptions{Reachability: true})
		require.NoError(t, err)
		assert.True(t, rep.OK())
	})

	t.Run("null where FAISS never writes it", func(t *testing.T) {
		ex := readFixture(t, "worked_example")
		b := append(append([]byte{}, ex[:37]...), "null"...) // IxMp > null
		_, err := openWith(b, allowNull)
		requireFormatError(t, err, ErrUnsupported, "fourcc", `"null" at byte 37 (an index left out of the file, which FAISS writes only in place of an HNSW index's storage)`)
		_, err = openWith([]byte("null"), allowNull)
		requireFormatError(t, err, ErrUnsupported, "fourcc", `"null" at byte 0`)
	})
}

func requireFormatError(t *testing.T, err error, kind error, field, msg string) {
	t.Helper()
	require.ErrorIs(t, err, kind)
	require.ErrorIs(t, err, ErrFormat)
	require.ErrorContains(t, err, msg)
	var fe *FormatError
	require.True(t, errors.As(err, &fe))
	assert.Equal(t, field, fe.Field)
}

// TestCorruptCAGRAFields patches each CAGRA field of the FAISS 1.15 files.
func TestCorruptCAGRAFields(t *testing.T) {
	l2, _ := readFAISS115(t, "hnsw_cagra_l2")      // fields at 37: keep, base_only, entrypoints (39), numeric (43)
	bin, _ := readFAISS115(t, "binary_hnsw_cagra") // fields at 25: keep, base_only, entrypoints (27)
	cases := []struct {
		name  string
		src   []byte
		patch func(b []byte)
		kind  error
		field string
		msg   string
	}{
		{"keep 2", l2, func(b []byte) { b[37] = 2 }, ErrInvalid, "cagra.keep_max_size_level0", "IHc2 keep_max_size_level0 at byte 37 is 2, expected a bool (0 or 1)"},
		{"base only 255", l2, func(b []byte) { b[38] = 255 }, ErrInvalid, "cagra.base_level_only", "IHc2 base_level_only at byte 38 is 255"},
		{"entrypoints 0", l2, func(b []byte) { putU32(b, 39, 0) }, ErrInvalid, "cagra.num_base_level_search_entrypoints", "num_base_level_search_entrypoints 0 at byte 39 is out of range [1, 65536]"},
		{"entrypoints negative", l2, func(b []byte) { putU32(b, 39, 0xffffffff) }, ErrInvalid, "cagra.num_base_level_search_entrypoints", "num_base_level_search_entrypoints -1 at byte 39"},
		{"entrypoints huge", l2, func(b []byte) { putU32(b, 39, 1<<16+1) }, ErrInvalid, "cagra.num_base_level_search_entrypoints", "65537 at byte 39 is out of range"},
		{"numeric 4", l2, func(b []byte) { putU32(b, 43, 4) }, ErrInvalid, "cagra.numeric_type", "IHc2 numeric_type 4 at byte 43 is not a FAISS numeric type (0–3)"},
		{"numeric negative", l2, func(b []byte) { putU32(b, 43, 0x80000000) }, ErrInvalid, "cagra.numeric_type", "numeric_type -2147483648 at byte 43"},
		{"numeric UInt8", l2, func(b []byte) { putU32(b, 43, 2) }, ErrUnsupported, "cagra.numeric_type", "IHc2 numeric_type UInt8 at byte 43 is not supported"},
		{"numeric Int8", l2, func(b []byte) { putU32(b, 43, 3) }, ErrUnsupported, "cagra.numeric_type", "numeric_type Int8"},
		{"binary keep 3", bin, func(b []byte) { b[25] = 3 }, ErrInvalid, "cagra.keep_max_size_level0", "IBHc keep_max_size_level0 at byte 25 is 3"},
		{"binary entrypoints 0", bin, func(b []byte) { putU32(b, 27, 0) }, ErrInvalid, "cagra.num_base_level_search_entrypoints", "IBHc num_base_level_search_entrypoints 0 at byte 27"},
		{"binary storage float", bin, func(b []byte) { copy(b[287943:], "IxF2") }, ErrUnsupported, "fourcc", `"IxF2" at byte 287943`},
		{"float storage binary", l2, func(b []byte) { copy(b[287959:], "IBxF") }, ErrUnsupported, "fourcc", `"IBxF" at byte 287959 (a binary index cannot be nested in a float index)`},
		{"graph levels count", l2, func(b []byte) { putU64(b, 47+8+8*8+8+9*4, 1999) }, ErrInvalid, "levels", "expected ntotal = 2000"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Clone(tc.src)
			tc.patch(b)
			_, err := openWith(b, allowNull)
			requireFormatError(t, err, tc.kind, tc.field, tc.msg)
		})
	}
}

// TestTruncatedFAISS115: a FAISS 1.15 file cut anywhere is a truncation
// error, whatever the options.
func TestTruncatedFAISS115(t *testing.T) {
	for _, name := range faiss115Files {
		b, _ := readFAISS115(t, name)
		f, err := openWith(b, allowNull)
		require.NoError(t, err)
		cuts := cutPoints(f, int64(len(b)))
		for x := f.Root; x != nil; x = x.Child {
			for n := x.Off; n < x.Off+60 && n < int64(len(b)); n++ { // header and CAGRA fields byte by byte
				cuts = append(cuts, n)
			}
		}
		for _, n := range cuts {
			if n < 0 || n >= int64(len(b)) {
				continue
			}
			for _, o := range []OpenOptions{{}, allowNull} {
				_, err := openWith(b[:n], o)
				require.ErrorIs(t, err, ErrTruncated, "%s cut at %d (%+v)", name, n, o)
			}
		}
	}
}

// TestNullRefusedByOpen: plain Open refuses a file without vectors and says
// why.
func TestNullRefusedByOpen(t *testing.T) {
	b, _ := readFAISS115(t, "hnsw_flat_l2_skip_storage")
	_, err := Open(bytes.NewReader(b), int64(len(b)))
	requireFormatError(t, err, ErrUnsupported, "fourcc", "the graph alone cannot be searched")
	assert.True(t, strings.HasPrefix(err.Error(), `unsupported FAISS index type "null" at byte 287949`))
}
