package faissfmt

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// Limits applied while parsing (FAISS ≥ 1.14 applies the same ones).
const (
	MaxDim   = 1 << 20 // largest dimension accepted
	maxDepth = 8       // nesting depth; our types nest at most 3 deep
)

// Open parses the FAISS file in r (size bytes): headers, small arrays and the
// compact node table are loaded; levels, offsets, neighbors, codes and id
// maps are recorded as Sections. levels and offsets are streamed once to
// validate them, and the entry point's neighbor lists on levels 0 …
// max_level, which every search reads, are read and checked (the rules of
// CheckNeighbors). Open never allocates by a count it has not checked
// against the bytes left, and returns a *FormatError for any malformed input.
//
// A trailing 16-byte Lucene codec footer (OpenSearch k-NN files) is detected
// and kept out of the parse; its CRC is checked by CheckFooterCRC (or
// VerifyFooterCRC, Verify).
//
// Open refuses an HNSW file whose vectors were left out ("null" storage):
// such a File cannot be searched by itself. OpenWith accepts it on request.
func Open(r io.ReaderAt, size int64) (*File, error) {
	return OpenWith(r, size, OpenOptions{})
}

// OpenOptions widens what OpenWith accepts.
type OpenOptions struct {
	// AllowNullStorage accepts an HNSW index (float or binary) whose
	// storage FAISS wrote as the fourcc "null" (IO_FLAG_SKIP_STORAGE;
	// OpenSearch keeps such vectors outside the file). The File then has
	// File.VectorsMissing() true and File.Storage nil: the caller must
	// bring the vectors from elsewhere before searching.
	AllowNullStorage bool
	// Window, when positive, lets an HNSW index's levels and offsets (with
	// the counts before and after them) be read in one read of at most
	// Window bytes instead of streamed in 256 KiB reads: for a reader where
	// every read is a round trip (an object in S3), at the cost of holding
	// those bytes for the parse (12 bytes a vector).
	Window int64
}

// OpenWith is Open with options.
func OpenWith(r io.ReaderAt, size int64, o OpenOptions) (*File, error) {
	root, warn, err := parse(r, size, o)
	if err != nil {
		return nil, err
	}
	f := &File{Size: size, Root: root, Warnings: warn}
	if trail := size - root.End; trail != 0 {
		// Only an OpenSearch file's 16-byte Lucene footer may follow; its
		// bytes are read here and nowhere else at open.
		foot, err := readFooter(r, root.End, trail)
		if err != nil {
			return nil, err
		}
		if foot == nil {
			return nil, invalidf("trailing bytes", root.End, "%d unexpected bytes after the index, which ends at byte %d of %d", trail, root.End, size)
		}
		f.Footer = foot
	}
	f.link()
	return f, nil
}

func parse(r io.ReaderAt, end int64, o OpenOptions) (*Index, []string, error) {
	c := &cursor{r: r, end: end, window: o.Window}
	fcc, err := peekFourCC(c)
	if err != nil {
		return nil, nil, err
	}
	p := &parser{c: c, o: o}
	var x *Index
	if len(fcc) == 4 && fcc[:2] == "IB" {
		x, err = p.binaryIndex(0)
	} else {
		x, err = p.floatIndex(0)
	}
	return x, p.warnings, err
}

func peekFourCC(c *cursor) (string, error) {
	b, err := c.read("fourcc", 4)
	c.off -= 4
	return string(b), err
}

type parser struct {
	c        *cursor
	o        OpenOptions
	warnings []string
}

func (p *parser) floatIndex(depth int) (*Index, error) {
	c := p.c
	at := c.off
	fcc, err := c.fourcc("fourcc")
	if err != nil {
		return nil, err
	}
	if depth > maxDepth {
		return nil, invalidf("fourcc", at, "index nesting deeper than %d at byte %d", maxDepth, at)
	}
	x := &Index{FourCC: fcc, Off: at}
	switch fcc {
	case "IxF2", "IxFI", "IxFl", "IxSQ", "IHNf", "IHNs", "IHc2", "IHNc", "IxMp", "IxM2":
	case "null":
		return nil, unsupported(fcc, at, nullOutsideHNSW)
	default:
		if len(fcc) == 4 && fcc[:2] == "IB" {
			return nil, unsupported(fcc, at, "a binary index cannot be nested in a float index")
		}
		return nil, unsupported(fcc, at, "")
	}
	if err := p.floatHeader(x); err != nil {
		return nil, err
	}
	switch fcc {
	case "IxF2", "IxFI", "IxFl":
		want := map[string]bool{"IxF2": x.Metric == MetricL2, "IxFI": x.Metric == MetricInnerProduct,
			"IxFl": x.Metric != MetricL2 && x.Metric != MetricInnerProduct}[fcc]
		if !want {
			return nil, invalidf("header.metric_type", at+33, "%s at byte %d has metric %s, which FAISS never writes with this fourcc", fcc, at, x.Metric)
		}
		x.CodeSize = int64(x.D) * 4
		s, err := c.vec("codes", 4, true)
		if err != nil {
			return nil, err
		}
		if s.Len != x.NTotal*x.CodeSize {
			return nil, invalidf("codes", s.Offset-8, "%s vectors at byte %d hold %d floats, expected ntotal·d = %d·%d", fcc, s.Offset-8, s.Count(), x.NTotal, x.D)
		}
		x.Sections = append(x.Sections, s)
	case "IxSQ":
		if err := p.sq(x); err != nil {
			return nil, err
		}
	case "IHNf", "IHNs", "IHc2", "IHNc":
		if fcc == "IHc2" || fcc == "IHNc" {
			if err := p.cagra(x); err != nil {
				return nil, err
			}
		}
		if err := p.graph(x, depth); err != nil {
			return nil, err
		}
	case "IxMp", "IxM2":
		if x.Child, err = p.floatIndex(depth + 1); err != nil {
			return nil, err
		}
		if err := p.idMap(x); err != nil {
			return nil, err
		}
		x.CodeSize = x.Child.CodeSize
	}
	x.End = c.off
	return x, nil
}

// nullOutsideHNSW explains a "null" fourcc where FAISS never writes one.
const nullOutsideHNSW = "an index left out of the file, which FAISS writes only in place of an HNSW index's storage"

// graph reads the HNSW block of x (after its header and CAGRA fields) and
// its storage, which must be the kind x's fourcc requires, or "null".
func (p *parser) graph(x *Index, depth int) error {
	c := p.c
	var err error
	if x.HNSW, err = readHNSW(c, x.NTotal); err != nil {
		return err
	}
	x.Sections = append(x.Sections, x.HNSW.Levels, x.HNSW.Offsets, x.HNSW.Neighbors)
	p.checkMaxLevel(x)
	at := c.off
	fcc, err := peekFourCC(c)
	if err != nil {
		return err
	}
	if fcc == "null" {
		if !p.o.AllowNullStorage {
			return unsupported(fcc, at, "the vectors were left out of this file with IO_FLAG_SKIP_STORAGE; the graph alone cannot be searched")
		}
		c.off += 4
		x.Child = &Index{FourCC: fcc, Off: at, End: c.off, Binary: x.Binary}
		if !x.Binary {
			x.CodeSize = 0 // unknown: the storage that would say is absent
		}
		return nil
	}
	if x.Binary {
		x.Child, err = p.binaryIndex(depth + 1)
	} else {
		x.Child, err = p.floatIndex(depth + 1)
	}
	if err != nil {
		return err
	}
	if err := checkStorage(x); err != nil {
		return err
	}
	if err := sameHeader(x, x.Child, !x.Binary); err != nil {
		return err
	}
	if !x.Binary {
		x.CodeSize = x.Child.CodeSize
	}
	return nil
}

// checkStorage checks that an HNSW index's storage is the kind its fourcc
// (and, for IHc2, its numeric type) requires.
func checkStorage(x *Index) error {
	ch := x.Child.FourCC
	flat := ch == "IxF2" || ch == "IxFI" || ch == "IxFl"
	switch x.FourCC {
	case "IHNf":
		if !flat {
			return unsupported(ch, x.Child.Off, "IHNf storage must be IxF2, IxFI or IxFl")
		}
	case "IHNs":
		if ch != "IxSQ" {
			return unsupported(ch, x.Child.Off, "IHNs storage must be IxSQ")
		}
	case "IBHf", "IBHc":
		if ch != "IBxF" {
			return unsupported(ch, x.Child.Off, x.FourCC+" storage must be IBxF")
		}
	case "IHNc", "IHc2":
		if !flat && ch != "IxSQ" {
			return unsupported(ch, x.Child.Off, x.FourCC+" storage must be IxF2, IxFI or IxFl (Float32) or an fp16 IxSQ (Float16)")
		}
		nt := x.CAGRA.NumericType
		fp16 := ch == "IxSQ" && x.Child.SQ.QType == QTFP16
		if nt == NumericFloat32 && !flat || nt == NumericFloat16 && !fp16 {
			what := ch
			if ch == "IxSQ" {
				what = "an IxSQ of type " + x.Child.SQ.QType.String()
			}
			return invalidf("cagra.numeric_type", x.Child.Off, "%s at byte %d has numeric type %s but its storage at byte %d is %s; %s needs %s",
				x.FourCC, x.Off, nt, x.Child.Off, what, nt, map[NumericType]string{NumericFloat32: "IxF2, IxFI or IxFl", NumericFloat16: "an fp16 IxSQ"}[nt])
		}
	}
	return nil
}

// MaxCAGRAEntrypoints bounds num_base_level_search_entrypoints: the random
// nodes a base-level-only search draws per query (FAISS's default is 32).
const MaxCAGRAEntrypoints = 1 << 16

// cagra reads the fields IHc2, IHNc and IBHc store between the header and
// the HNSW block (docs/faiss-format.md §3).
func (p *parser) cagra(x *Index) error {
	c := p.c
	at := c.off
	n := 6
	if x.FourCC == "IHc2" {
		n = 10
	}
	b, err := c.read("cagra", n)
	if err != nil {
		return err
	}
	for i, name := range []string{"keep_max_size_level0", "base_level_only"} {
		if b[i] > 1 {
			return invalidf("cagra."+name, at+int64(i), "%s %s at byte %d is %d, expected a bool (0 or 1)", x.FourCC, name, at+int64(i), b[i])
		}
	}
	cg := &CAGRA{KeepMaxSizeLevel0: b[0] == 1, BaseLevelOnly: b[1] == 1,
		NumBaseLevelSearchEntrypoints: int32(binary.LittleEndian.Uint32(b[2:]))}
	if v := cg.NumBaseLevelSearchEntrypoints; v < 1 || v > MaxCAGRAEntrypoints {
		return invalidf("cagra.num_base_level_search_entrypoints", at+2, "%s num_base_level_search_entrypoints %d at byte %d is out of range [1, %d]",
			x.FourCC, v, at+2, MaxCAGRAEntrypoints)
	}
	if x.FourCC == "IHc2" {
		cg.HasNumericType = true
		cg.NumericType = NumericType(int32(binary.LittleEndian.Uint32(b[6:])))
		switch nt := cg.NumericType; {
		case nt < 0 || nt >= numNumericTypes:
			return invalidf("cagra.numeric_type", at+6, "%s numeric_type %d at byte %d is not a FAISS numeric type (0–3)", x.FourCC, int32(nt), at+6)
		case nt != NumericFloat32 && nt != NumericFloat16:
			return &FormatError{Field: "cagra.numeric_type", Off: at + 6, Kind: ErrUnsupported,
				Msg: fmt.Sprintf("%s numeric_type %s at byte %d is not supported (IndexHNSWCagra stores Float32 or Float16)", x.FourCC, nt, at+6)}
		}
	}
	x.CAGRA = cg
	return nil
}

func (p *parser) binaryIndex(depth int) (*Index, error) {
	c := p.c
	at := c.off
	fcc, err := c.fourcc("fourcc")
	if err != nil {
		return nil, err
	}
	if depth > maxDepth {
		return nil, invalidf("fourcc", at, "index nesting deeper than %d at byte %d", maxDepth, at)
	}
	x := &Index{FourCC: fcc, Off: at, Binary: true}
	switch fcc {
	case "IBxF", "IBHf", "IBHc", "IBMp", "IBM2":
	case "null":
		return nil, unsupported(fcc, at, nullOutsideHNSW)
	default:
		return nil, unsupported(fcc, at, "")
	}
	if err := p.binaryHeader(x); err != nil {
		return nil, err
	}
	switch fcc {
	case "IBxF":
		s, err := c.vec("codes", 1, true)
		if err != nil {
			return nil, err
		}
		if s.Len != x.NTotal*x.CodeSize {
			return nil, invalidf("codes", s.Offset-8, "IBxF codes at byte %d hold %d bytes, expected ntotal·code_size = %d·%d", s.Offset-8, s.Len, x.NTotal, x.CodeSize)
		}
		x.Sections = append(x.Sections, s)
	case "IBHf", "IBHc":
		if fcc == "IBHc" {
			if err := p.cagra(x); err != nil {
				return nil, err
			}
		}
		if err := p.graph(x, depth); err != nil {
			return nil, err
		}
	case "IBMp", "IBM2":
		if x.Child, err = p.binaryIndex(depth + 1); err != nil {
			return nil, err
		}
		if err := p.idMap(x); err != nil {
			return nil, err
		}
	}
	x.End = c.off
	return x, nil
}

// floatHeader reads IndexHeader (docs/faiss-format.md §2.1).
func (p *parser) floatHeader(x *Index) error {
	c := p.c
	at := c.off
	b, err := c.read("header", 33)
	if err != nil {
		return err
	}
	d := int32(binary.LittleEndian.Uint32(b[0:]))
	x.NTotal = int64(binary.LittleEndian.Uint64(b[4:]))
	trained := b[28]
	x.Metric = Metric(int32(binary.LittleEndian.Uint32(b[29:])))
	if d <= 0 || d > MaxDim {
		return invalidf("header.d", at, "%s dimension d=%d at byte %d is out of range [1, %d]", x.FourCC, d, at, MaxDim)
	}
	x.D = int(d)
	if x.NTotal < 0 {
		return invalidf("header.ntotal", at+4, "%s ntotal=%d at byte %d is negative", x.FourCC, x.NTotal, at+4)
	}
	if trained > 1 {
		return invalidf("header.is_trained", at+28, "%s is_trained at byte %d is %d, expected a bool (0 or 1)", x.FourCC, at+28, trained)
	}
	x.IsTrained = trained == 1
	if !x.Metric.known() {
		return invalidf("header.metric_type", at+29, "%s metric_type %d at byte %d is not a FAISS metric", x.FourCC, int32(x.Metric), at+29)
	}
	if x.Metric > MetricL2 {
		if x.MetricArg, err = c.f32("header.metric_arg"); err != nil {
			return err
		}
	}
	return nil
}

// binaryHeader reads BinaryHeader (docs/faiss-format.md §2.2).
func (p *parser) binaryHeader(x *Index) error {
	c := p.c
	at := c.off
	b, err := c.read("header", 21)
	if err != nil {
		return err
	}
	d := int32(binary.LittleEndian.Uint32(b[0:]))
	cs := int32(binary.LittleEndian.Uint32(b[4:]))
	x.NTotal = int64(binary.LittleEndian.Uint64(b[8:]))
	trained := b[16]
	x.Metric = Metric(int32(binary.LittleEndian.Uint32(b[17:])))
	if d <= 0 || d > MaxDim || d%8 != 0 {
		return invalidf("header.d", at, "%s dimension d=%d bits at byte %d must be a positive multiple of 8 up to %d", x.FourCC, d, at, MaxDim)
	}
	x.D = int(d)
	// FAISS ≤ 1.7.x writes code_size 0 in IBMp/IBM2 headers.
	idmap := x.FourCC == "IBMp" || x.FourCC == "IBM2"
	if cs != d/8 && !(idmap && cs == 0) {
		return invalidf("header.code_size", at+4, "%s code_size %d at byte %d, expected d/8 = %d", x.FourCC, cs, at+4, d/8)
	}
	x.CodeSize = int64(cs)
	if x.NTotal < 0 {
		return invalidf("header.ntotal", at+8, "%s ntotal=%d at byte %d is negative", x.FourCC, x.NTotal, at+8)
	}
	if trained > 1 {
		return invalidf("header.is_trained", at+16, "%s is_trained at byte %d is %d, expected a bool (0 or 1)", x.FourCC, at+16, trained)
	}
	x.IsTrained = trained == 1
	return nil
}

func (p *parser) sq(x *Index) error {
	c := p.c
	at := c.off
	b, err := c.read("sq", 28)
	if err != nil {
		return err
	}
	q := &SQ{
		QType:        QType(int32(binary.LittleEndian.Uint32(b[0:]))),
		RangeStat:    int32(binary.LittleEndian.Uint32(b[4:])),
		RangeStatArg: math.Float32frombits(binary.LittleEndian.Uint32(b[8:])),
		D:            int64(binary.LittleEndian.Uint64(b[12:])),
		CodeSize:     int64(binary.LittleEndian.Uint64(b[20:])),
	}
	if q.QType < 0 || q.QType >= numQTypes {
		return invalidf("sq.qtype", at, "scalar quantizer type %d at byte %d is not supported (known: 0–8)", int32(q.QType), at)
	}
	if q.D != int64(x.D) {
		return invalidf("sq.d", at+12, "scalar quantizer d=%d at byte %d disagrees with the header's d=%d", q.D, at+12, x.D)
	}
	if want := q.QType.CodeSize(q.D); q.CodeSize != want {
		return invalidf("sq.code_size", at+20, "scalar quantizer code_size %d at byte %d, expected %d for %s with d=%d", q.CodeSize, at+20, want, q.QType, q.D)
	}
	s, err := c.vec("sq.trained", 4, false)
	if err != nil {
		return err
	}
	want := q.QType.TrainedLen(q.D)
	if s.Count() != want && !(s.Count() == 0 && !x.IsTrained && x.NTotal == 0) {
		return invalidf("sq.trained", s.Offset-8, "scalar quantizer trained at byte %d has %d values, expected %d for %s with d=%d", s.Offset-8, s.Count(), want, q.QType, q.D)
	}
	q.Trained = make([]float32, s.Count())
	if err := c.stream(s, func(first int64, b []byte) error {
		for j := 0; j+4 <= len(b); j += 4 {
			q.Trained[first+int64(j/4)] = math.Float32frombits(binary.LittleEndian.Uint32(b[j:]))
		}
		return nil
	}); err != nil {
		return err
	}
	codes, err := c.vec("codes", 1, true)
	if err != nil {
		return err
	}
	if codes.Len != x.NTotal*q.CodeSize {
		return invalidf("codes", codes.Offset-8, "IxSQ codes at byte %d hold %d bytes, expected ntotal·code_size = %d·%d", codes.Offset-8, codes.Len, x.NTotal, q.CodeSize)
	}
	x.SQ, x.CodeSize = q, q.CodeSize
	x.Sections = append(x.Sections, codes)
	return nil
}

// idMap reads the trailing id_map of IxMp/IxM2/IBMp/IBM2 and checks the child.
func (p *parser) idMap(x *Index) error {
	switch x.Child.FourCC {
	case "IxMp", "IxM2", "IBMp", "IBM2":
		return unsupported(x.Child.FourCC, x.Child.Off, "an id map inside an id map")
	}
	if err := sameHeader(x, x.Child, !x.Binary); err != nil {
		return err
	}
	s, err := p.c.vec("id_map", 8, true)
	if err != nil {
		return err
	}
	if s.Count() != x.NTotal {
		return invalidf("id_map", s.Offset-8, "%s id_map at byte %d has %d entries, expected ntotal = %d", x.FourCC, s.Offset-8, s.Count(), x.NTotal)
	}
	x.Sections = append(x.Sections, s)
	return nil
}

// sameHeader checks that a wrapper and its child agree on d, ntotal and
// (for float indexes) the metric.
func sameHeader(parent, child *Index, metric bool) error {
	switch {
	case parent.D != child.D:
		return invalidf("header.d", child.Off, "%s at byte %d has d=%d but its parent %s at byte %d has d=%d", child.FourCC, child.Off, child.D, parent.FourCC, parent.Off, parent.D)
	case parent.NTotal != child.NTotal:
		return invalidf("header.ntotal", child.Off, "%s at byte %d has ntotal=%d but its parent %s at byte %d has ntotal=%d", child.FourCC, child.Off, child.NTotal, parent.FourCC, parent.Off, parent.NTotal)
	case metric && parent.Metric != child.Metric:
		return invalidf("header.metric_type", child.Off, "%s at byte %d has metric %s but its parent %s at byte %d has metric %s", child.FourCC, child.Off, child.Metric, parent.FourCC, parent.Off, parent.Metric)
	}
	return nil
}

func (p *parser) checkMaxLevel(x *Index) {
	h := x.HNSW
	if h.EntryPoint >= 0 {
		if top := h.NumLevels(h.EntryPoint) - 1; int(h.MaxLevel) != top {
			p.warnings = append(p.warnings, fmt.Sprintf("%s at byte %d: max_level %d is below the entry point's top level %d", x.FourCC, x.Off, h.MaxLevel, top))
		}
	}
}

// link fills the File's shortcuts.
func (f *File) link() {
	for x := f.Root; x != nil; x = x.Child {
		switch x.FourCC {
		case "IxMp", "IxM2", "IBMp", "IBM2":
			f.IDMap = x
		case "IHNf", "IHNs", "IBHf", "IHc2", "IHNc", "IBHc":
			f.Graph = x
		case "null":
		default:
			f.Storage = x
		}
	}
}

// footerMagic is Lucene's CodecUtil FOOTER_MAGIC, big-endian.
const footerMagic = 0xC02893E8

// readFooter returns the Lucene codec footer if the n bytes at off are one
// (16 bytes: magic, algorithm id 0, checksum); the CRC is not checked here.
func readFooter(r io.ReaderAt, off, n int64) (*LuceneFooter, error) {
	if n != 16 {
		return nil, nil
	}
	var b [16]byte
	if err := readFull(r, b[:], off, "lucene footer"); err != nil {
		return nil, err
	}
	if binary.BigEndian.Uint32(b[0:]) != footerMagic || binary.BigEndian.Uint32(b[4:]) != 0 {
		return nil, nil
	}
	return &LuceneFooter{Off: off, Algorithm: 0, Checksum: binary.BigEndian.Uint64(b[8:])}, nil
}
