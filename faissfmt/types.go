package faissfmt

import "fmt"

// Section locates one large array in the file without loading it.
type Section struct {
	Name   string // "levels", "offsets", "neighbors", "codes", "id_map"
	Offset int64  // first byte of the data (after the vec's 8-byte count)
	Len    int64  // data length in bytes
	Elem   int    // bytes per element
}

// Count is the number of elements in the section.
func (s Section) Count() int64 { return s.Len / int64(s.Elem) }

// Metric is FAISS's MetricType.
type Metric int32

// The metric types FAISS files can carry (docs/faiss-format.md §6).
const (
	MetricInnerProduct  Metric = 0
	MetricL2            Metric = 1
	MetricL1            Metric = 2
	MetricLinf          Metric = 3
	MetricLp            Metric = 4
	MetricCanberra      Metric = 20
	MetricBrayCurtis    Metric = 21
	MetricJensenShannon Metric = 22
	MetricJaccard       Metric = 23
	MetricNaNEuclidean  Metric = 24
	MetricABSIPOrGower  Metric = 25 // ABS_INNER_PRODUCT in 1.9–1.11, GOWER from 1.12
)

var metricNames = map[Metric]string{
	MetricInnerProduct: "IP", MetricL2: "L2", MetricL1: "L1", MetricLinf: "Linf", MetricLp: "Lp",
	MetricCanberra: "Canberra", MetricBrayCurtis: "BrayCurtis", MetricJensenShannon: "JensenShannon",
	MetricJaccard: "Jaccard", MetricNaNEuclidean: "NaNEuclidean", MetricABSIPOrGower: "ABS_IP_or_Gower",
}

func (m Metric) String() string {
	if s, ok := metricNames[m]; ok {
		return s
	}
	return fmt.Sprintf("metric(%d)", int32(m))
}

func (m Metric) known() bool { _, ok := metricNames[m]; return ok }

// QType is a ScalarQuantizer quantizer type.
type QType int32

// The scalar quantizer types faissfmt reads (docs/faiss-format.md §3, IxSQ).
const (
	QT8bit             QType = 0
	QT4bit             QType = 1
	QT8bitUniform      QType = 2
	QT4bitUniform      QType = 3
	QTFP16             QType = 4
	QT8bitDirect       QType = 5
	QT6bit             QType = 6
	QTBF16             QType = 7 // FAISS ≥ 1.9
	QT8bitDirectSigned QType = 8 // FAISS ≥ 1.9
	numQTypes                = 9
)

var qtypeNames = [numQTypes]string{"8bit", "4bit", "8bit_uniform", "4bit_uniform", "fp16",
	"8bit_direct", "6bit", "bf16", "8bit_direct_signed"}

func (q QType) String() string {
	if q >= 0 && q < numQTypes {
		return qtypeNames[q]
	}
	return fmt.Sprintf("qtype(%d)", int32(q))
}

// CodeSize is the number of bytes one vector of dimension d takes.
func (q QType) CodeSize(d int64) int64 {
	switch q {
	case QT4bit, QT4bitUniform:
		return (d + 1) / 2
	case QT6bit:
		return (d*6 + 7) / 8
	case QTFP16, QTBF16:
		return 2 * d
	}
	return d
}

// TrainedLen is the number of float32 training values the quantizer stores:
// vmin and vdiff per component, once for uniform types, none for the others.
func (q QType) TrainedLen(d int64) int64 {
	switch q {
	case QT8bit, QT4bit, QT6bit:
		return 2 * d
	case QT8bitUniform, QT4bitUniform:
		return 2
	}
	return 0
}

// SQ holds a ScalarQuantizer's parameters (all small; loaded at open).
type SQ struct {
	QType        QType
	RangeStat    int32
	RangeStatArg float32
	D            int64
	CodeSize     int64
	Trained      []float32 // vmin then vdiff, per component or shared
}

// Index is one node of the index tree: a fourcc with its header, its own
// sections and, for composite types, the child index it wraps.
type Index struct {
	FourCC    string
	Off       int64 // byte offset of the fourcc
	End       int64 // byte offset just past the node's last field
	Binary    bool
	D         int   // dimension; bits for binary indexes
	NTotal    int64 // number of vectors
	IsTrained bool
	Metric    Metric
	MetricArg float32 // stored only for metrics > 1
	// CodeSize is bytes per stored vector: d·4 for flat, the SQ code size,
	// the storage's for float HNSW and id-map wrappers (which store none; 0
	// when the storage is "null"), and for
	// binary indexes the header's code_size as stored (0 in FAISS 1.7.x
	// IBMp/IBM2 headers; File.Storage.CodeSize is always the real one).
	CodeSize int64
	Sections []Section
	HNSW     *HNSW  // IHNf, IHNs, IBHf, IHc2, IHNc, IBHc
	CAGRA    *CAGRA // IHc2, IHNc, IBHc
	SQ       *SQ    // IxSQ
	// Child is the wrapped index: the storage of an HNSW index, the index
	// an id map maps. An HNSW whose vectors were left out of the file
	// (IO_FLAG_SKIP_STORAGE, accepted by OpenWith with AllowNullStorage)
	// has a Child with FourCC "null": 4 bytes, no header (D, NTotal and
	// CodeSize 0), no sections, no child.
	Child *Index
}

// Section returns the node's section called name.
func (x *Index) Section(name string) (Section, bool) {
	for _, s := range x.Sections {
		if s.Name == name {
			return s, true
		}
	}
	return Section{}, false
}

// TypeName is a short human description of the fourcc.
func (x *Index) TypeName() string { return typeNames[x.FourCC] }

var typeNames = map[string]string{
	"IxMp": "IndexIDMap", "IxM2": "IndexIDMap2", "IHNf": "IndexHNSWFlat", "IHNs": "IndexHNSWSQ",
	"IxF2": "IndexFlatL2", "IxFI": "IndexFlatIP", "IxFl": "IndexFlat", "IxSQ": "IndexScalarQuantizer",
	"IBMp": "IndexBinaryIDMap", "IBM2": "IndexBinaryIDMap2", "IBHf": "IndexBinaryHNSW", "IBxF": "IndexBinaryFlat",
	"IHc2": "IndexHNSWCagra", "IHNc": "IndexHNSWCagra (FAISS 1.9–1.11 layout)", "IBHc": "IndexBinaryHNSWCagra",
	"null": "no storage (vectors left out with IO_FLAG_SKIP_STORAGE)",
}

// NumericType is IndexHNSWCagra's numeric_type_: how its storage holds
// the vectors.
type NumericType int32

// The numeric types FAISS defines (docs/faiss-format.md §3, IHc2).
// IndexHNSWCagra is built with Float32 (flat storage) or Float16 (an fp16
// IxSQ storage) only.
const (
	NumericFloat32  NumericType = 0
	NumericFloat16  NumericType = 1
	NumericUInt8    NumericType = 2
	NumericInt8     NumericType = 3
	numNumericTypes             = 4
)

func (n NumericType) String() string {
	if n >= 0 && n < numNumericTypes {
		return [...]string{"Float32", "Float16", "UInt8", "Int8"}[n]
	}
	return fmt.Sprintf("numeric_type(%d)", int32(n))
}

// CAGRA holds the fields FAISS's IndexHNSWCagra and IndexBinaryHNSWCagra
// store between the header and the HNSW block (IHc2, IHNc, IBHc: an HNSW
// whose level 0 may have been built by CAGRA on a GPU). The graph itself is
// an ordinary HNSW block (Index.HNSW).
type CAGRA struct {
	// KeepMaxSizeLevel0: while building, level-0 lists were topped back up
	// to their full size after pruning. Informational; search ignores it.
	KeepMaxSizeLevel0 bool
	// BaseLevelOnly: FAISS searches level 0 only, starting from the best of
	// NumBaseLevelSearchEntrypoints random nodes, instead of descending
	// from the entry point. When false the search is exactly the HNSW one.
	BaseLevelOnly bool
	// NumBaseLevelSearchEntrypoints is how many random level-0 nodes a
	// BaseLevelOnly search draws per query, in [1, MaxCAGRAEntrypoints].
	NumBaseLevelSearchEntrypoints int32
	// NumericType is as stored in IHc2 (Float32 or Float16, which the
	// storage agrees with); IHNc stores none and FAISS reads it as
	// Float32; IBHc stores none and its vectors are binary codes.
	NumericType NumericType
	// HasNumericType reports whether the file stores NumericType (IHc2).
	HasNumericType bool
}

// LuceneFooter is the 16-byte codec footer OpenSearch's k-NN plugin appends.
type LuceneFooter struct {
	Off       int64  // first byte of the footer (= end of the FAISS stream)
	Algorithm int32  // 0 = zlib CRC-32
	Checksum  uint64 // as stored (big-endian i64)
}

// File is an opened FAISS file: the index tree plus where things lie.
type File struct {
	Root   *Index
	Size   int64         // size of the source
	Footer *LuceneFooter // nil for plain FAISS files
	// Shortcuts into the tree (nil where absent).
	IDMap *Index // IxMp, IxM2, IBMp, IBM2
	Graph *Index // IHNf, IHNs, IBHf, IHc2, IHNc, IBHc
	// Storage is the leaf holding the vectors: IxF2/IxFI/IxFl, IxSQ, IBxF.
	// It is nil when the vectors were left out of the file (Graph.Child is
	// a "null" node; see VectorsMissing).
	Storage *Index
	// Warnings are oddities FAISS itself tolerates and search does not mind.
	Warnings []string
}

// VectorsMissing reports whether the file holds an HNSW graph without its
// vectors: FAISS wrote "null" in place of the storage (IO_FLAG_SKIP_STORAGE;
// only OpenWith with AllowNullStorage accepts such a file). Then Storage is
// nil, and the graph's header (Graph.D, Graph.NTotal, Graph.Metric,
// Graph.Binary, and for binary graphs Graph.CodeSize) says what vectors a
// separate source must supply.
func (f *File) VectorsMissing() bool {
	return f.Graph != nil && f.Graph.Child != nil && f.Graph.Child.FourCC == "null"
}

// ResidentBytes estimates the heap the opened File keeps: small arrays and
// the compact node table, not the sections.
func (f *File) ResidentBytes() int64 {
	var n int64 = 512
	for x := f.Root; x != nil; x = x.Child {
		n += 256
		if x.HNSW != nil {
			n += x.HNSW.residentBytes()
		}
		if x.SQ != nil {
			n += int64(len(x.SQ.Trained)) * 4
		}
	}
	return n
}
