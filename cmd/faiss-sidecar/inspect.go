package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

func runInspect(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON object")
	verify := fs.Bool("verify", false, "stream every section and report every violation")
	backend := fs.String("backend", "", backendHelp)
	vectors := fs.String("vectors", "", vectorsHelp)
	var cd cacheDirFlags
	cd.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := checkArgs("inspect", pos, "FILE"); err != nil {
		return err
	}
	if err := checkBackend(*backend); err != nil {
		return err
	}
	path := pos[0]
	if ok, err := inspectGuide(path, *asJSON, stdout); ok || err != nil {
		return err
	}
	src, backendName, err := openSource(path, *backend, 0, cd)
	if err != nil {
		return err
	}
	defer src.Close()
	r := partial.ReaderAt(context.Background(), src)
	// inspect shows a graph whose vectors were left out of the file too.
	f, err := engine.Parse(context.Background(), src, path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	rep := &inspectReport{File: path, Size: f.Size, Backend: backendName, Warnings: f.Warnings}
	if *vectors != "" {
		l, err := engine.CheckVectors(f, path, *vectors, "")
		if err != nil {
			return specError(err)
		}
		rep.Vectors = &vectorsJSON{File: *vectors, Format: l.Kind, Count: l.Count, D: l.Dim, OK: true}
	}
	if f.VectorsMissing() && rep.Vectors == nil {
		g := f.Graph
		rep.VectorsMissing = &missingJSON{Offset: g.Child.Off, D: g.D, NTotal: g.NTotal, Metric: metricName(g)}
	}
	rep.Node, err = describeNode(r, f.Root)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	rep.Memory.MemoryEfficient = f.ResidentBytes()
	rep.Memory.Full = f.Size + f.ResidentBytes()
	if f.Footer != nil {
		rep.Footer = &footerJSON{Offset: f.Footer.Off, Checksum: fmt.Sprintf("%#08x", f.Footer.Checksum)}
	}
	if *verify {
		var prog *progressBar
		if f.Size > 64<<20 && isTerminal(os.Stderr) {
			prog = newProgressBar(os.Stderr, "verify")
		}
		opts := faissfmt.VerifyOptions{Reachability: true}
		if prog != nil {
			opts.Progress = prog.Update
		}
		vr, err := faissfmt.Verify(r, f, opts)
		prog.Done()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if vr.Violations == nil {
			vr.Violations = []faissfmt.Violation{} // "violations": [] when there are none
		}
		rep.Verify = vr
		if rep.Footer != nil && vr.FooterCRCOK != nil {
			rep.Footer.CRCOK = vr.FooterCRCOK
		}
	}
	if *asJSON {
		if err := printJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		printInspect(stdout, rep)
	}
	if rep.Verify != nil && !rep.Verify.OK() {
		first := rep.Verify.Violations[0]
		return fmt.Errorf("%s: %d violation(s), first: %s", path, rep.Verify.NViolations, first.Msg)
	}
	return nil
}

type inspectReport struct {
	File    string         `json:"file"`
	Size    int64          `json:"size"`
	Backend engine.Backend `json:"backend"`
	*Node
	Footer *footerJSON `json:"lucene_footer,omitempty"`
	Memory struct {
		Full            int64 `json:"full"`
		MemoryEfficient int64 `json:"memory_efficient"`
	} `json:"memory_bytes"`
	// VectorsMissing is set when FAISS wrote "null" in place of the
	// graph's storage (IO_FLAG_SKIP_STORAGE): what vectors it needs.
	VectorsMissing *missingJSON `json:"vectors_missing,omitempty"`
	// Vectors is the --vectors file checked against such a graph.
	Vectors  *vectorsJSON     `json:"vectors,omitempty"`
	Warnings []string         `json:"warnings,omitempty"`
	Verify   *faissfmt.Report `json:"verify,omitempty"`
}

type missingJSON struct {
	Offset int64  `json:"offset"` // of the "null" fourcc
	D      int    `json:"d"`      // bits for binary graphs
	NTotal int64  `json:"ntotal"`
	Metric string `json:"metric"`
}

type vectorsJSON struct {
	File   string `json:"file"`
	Format string `json:"format"` // fvecs, vec, npy or faiss
	Count  int64  `json:"count"`
	D      int    `json:"d"`
	OK     bool   `json:"ok"` // count and dimension are the graph's
}

type footerJSON struct {
	Offset   int64  `json:"offset"`
	Checksum string `json:"checksum"`
	CRCOK    *bool  `json:"crc_ok,omitempty"` // only with --verify
}

// Node is one index in the tree, with the keys the inspect contract names.
type Node struct {
	FourCC    string        `json:"fourcc"`
	Type      string        `json:"type"`
	Offset    int64         `json:"offset"`
	End       int64         `json:"end"`
	D         int           `json:"d"`
	NTotal    int64         `json:"ntotal"`
	Metric    string        `json:"metric"`
	MetricRaw int32         `json:"metric_type"`
	MetricArg *float32      `json:"metric_arg,omitempty"`
	IsTrained bool          `json:"is_trained"`
	CodeSize  int64         `json:"code_size"`
	Sections  []sectionJSON `json:"sections"`
	HNSW      *hnswJSON     `json:"hnsw,omitempty"`
	CAGRA     *cagraJSON    `json:"cagra,omitempty"`
	SQ        *sqJSON       `json:"sq,omitempty"`
	IDMap     *idMapJSON    `json:"id_map,omitempty"`
	Child     *Node         `json:"child,omitempty"`
}

type sectionJSON struct {
	Name   string `json:"name"`
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
	Elem   int    `json:"elem_size"`
	Count  int64  `json:"count"`
}

type hnswJSON struct {
	EntryPoint      int32   `json:"entry_point"`
	MaxLevel        int32   `json:"max_level"`
	EfConstruction  int32   `json:"ef_construction"`
	EfSearch        int32   `json:"ef_search"`
	UpperBeam       int32   `json:"upper_beam"`
	M               int     `json:"M"`
	LevelsHistogram []int64 `json:"levels_histogram"`
	CumNeighbors    []int32 `json:"cum_nneighbor_per_level"`
	AssignProbas    int     `json:"assign_probas_len"`
}

// cagraJSON is what IHc2, IHNc and IBHc store before their HNSW block.
type cagraJSON struct {
	KeepMaxSizeLevel0 bool  `json:"keep_max_size_level0"`
	BaseLevelOnly     bool  `json:"base_level_only"`
	Entrypoints       int32 `json:"num_base_level_search_entrypoints"`
	// Float CAGRA only: as stored (IHc2) or as FAISS assumes (IHNc,
	// numeric_type_implied).
	NumericType        string `json:"numeric_type,omitempty"`
	NumericTypeID      *int32 `json:"numeric_type_id,omitempty"`
	NumericTypeImplied bool   `json:"numeric_type_implied,omitempty"`
}

type sqJSON struct {
	QType      string `json:"qtype"`
	QTypeRaw   int32  `json:"qtype_id"`
	CodeSize   int64  `json:"code_size"`
	TrainedLen int    `json:"trained_len"`
}

type idMapJSON struct {
	Identity bool `json:"identity"`
}

func describeNode(r io.ReaderAt, x *faissfmt.Index) (*Node, error) {
	n := &Node{FourCC: x.FourCC, Type: x.TypeName(), Offset: x.Off, End: x.End, D: x.D, NTotal: x.NTotal,
		Metric: x.Metric.String(), MetricRaw: int32(x.Metric), IsTrained: x.IsTrained, CodeSize: x.CodeSize,
		Sections: []sectionJSON{}}
	n.Metric = metricName(x)
	if x.FourCC == "null" {
		n.Metric = "none" // no header: nothing is stored
	}
	if x.Metric > faissfmt.MetricL2 {
		n.MetricArg = &x.MetricArg
	}
	for _, s := range x.Sections {
		n.Sections = append(n.Sections, sectionJSON{s.Name, s.Offset, s.Len, s.Elem, s.Count()})
	}
	if h := x.HNSW; h != nil {
		hist := h.LevelsHistogram
		if hist == nil {
			hist = []int64{}
		}
		n.HNSW = &hnswJSON{h.EntryPoint, h.MaxLevel, h.EfConstruction, h.EfSearch, h.UpperBeam, h.M(), hist, h.CumNeighbors, len(h.AssignProbas)}
	}
	if c := x.CAGRA; c != nil {
		n.CAGRA = &cagraJSON{KeepMaxSizeLevel0: c.KeepMaxSizeLevel0, BaseLevelOnly: c.BaseLevelOnly, Entrypoints: c.NumBaseLevelSearchEntrypoints}
		if !x.Binary {
			id := int32(c.NumericType)
			n.CAGRA.NumericType, n.CAGRA.NumericTypeID, n.CAGRA.NumericTypeImplied = c.NumericType.String(), &id, !c.HasNumericType
		}
	}
	if q := x.SQ; q != nil {
		n.SQ = &sqJSON{q.QType.String(), int32(q.QType), q.CodeSize, len(q.Trained)}
	}
	if s, ok := x.Section("id_map"); ok {
		id, err := faissfmt.IDMapIdentity(r, s)
		if err != nil {
			return nil, err
		}
		n.IDMap = &idMapJSON{Identity: id}
	}
	if x.Child != nil {
		c, err := describeNode(r, x.Child)
		if err != nil {
			return nil, err
		}
		n.Child = c
	}
	return n, nil
}

// metricName is the metric inspect prints for x: Hamming for binary indexes.
func metricName(x *faissfmt.Index) string {
	if x.Binary {
		return "Hamming"
	}
	return x.Metric.String()
}

func printInspect(w io.Writer, rep *inspectReport) {
	fmt.Fprintf(w, "%s: %s", rep.File, human(rep.Size))
	if rep.Footer != nil {
		fmt.Fprintf(w, " (FAISS stream %s + 16-byte Lucene footer)", human(rep.Footer.Offset))
	}
	fmt.Fprintln(w)
	for n, depth := rep.Node, 0; n != nil; n, depth = n.Child, depth+1 {
		ind := strings.Repeat("  ", depth)
		if n.FourCC == "null" {
			fmt.Fprintf(w, "%snull %s  bytes [%d, %d)\n", ind, n.Type, n.Offset, n.End)
			continue
		}
		fmt.Fprintf(w, "%s%s %s  d=%d ntotal=%d metric=%s", ind, n.FourCC, n.Type, n.D, n.NTotal, n.Metric)
		if n.MetricArg != nil {
			fmt.Fprintf(w, "(%g)", *n.MetricArg)
		}
		fmt.Fprintf(w, " trained=%v  bytes [%d, %d)\n", n.IsTrained, n.Offset, n.End)
		if h := n.HNSW; h != nil {
			fmt.Fprintf(w, "%s  hnsw: M=%d efConstruction=%d efSearch=%d max_level=%d entry_point=%d upper_beam=%d\n",
				ind, h.M, h.EfConstruction, h.EfSearch, h.MaxLevel, h.EntryPoint, h.UpperBeam)
			fmt.Fprintf(w, "%s  nodes per top level:", ind)
			for l, c := range h.LevelsHistogram {
				fmt.Fprintf(w, " %d:%d", l, c)
			}
			fmt.Fprintln(w)
		}
		if c := n.CAGRA; c != nil {
			fmt.Fprintf(w, "%s  cagra: keep_max_size_level0=%v base_level_only=%v num_base_level_search_entrypoints=%d",
				ind, c.KeepMaxSizeLevel0, c.BaseLevelOnly, c.Entrypoints)
			if c.NumericType != "" {
				fmt.Fprintf(w, " numeric_type=%s", c.NumericType)
				if c.NumericTypeImplied {
					fmt.Fprint(w, " (not stored; FAISS assumes it)")
				}
			}
			fmt.Fprintln(w)
			if c.BaseLevelOnly {
				fmt.Fprintf(w, "%s  FAISS searches level 0 only, from the best of %d random nodes per query\n", ind, c.Entrypoints)
			}
		}
		if q := n.SQ; q != nil {
			fmt.Fprintf(w, "%s  scalar quantizer: %s, %d bytes per vector, %d trained values\n", ind, q.QType, q.CodeSize, q.TrainedLen)
		}
		if n.IDMap != nil {
			fmt.Fprintf(w, "%s  id map: identity=%v\n", ind, n.IDMap.Identity)
		}
		for _, s := range n.Sections {
			fmt.Fprintf(w, "%s  section %-9s offset %-10d length %-10d (%d × %d B, %s)\n", ind, s.Name, s.Offset, s.Length, s.Count, s.Elem, human(s.Length))
		}
	}
	if m := rep.VectorsMissing; m != nil {
		fmt.Fprintf(w, "vectors: MISSING: FAISS wrote \"null\" at byte %d in place of the storage (IO_FLAG_SKIP_STORAGE); searching needs the %d vectors (d=%d, metric %s): give them with --vectors FILE\n",
			m.Offset, m.NTotal, m.D, m.Metric)
	}
	if v := rep.Vectors; v != nil {
		fmt.Fprintf(w, "vectors: from %s (%s, %d × d=%d): OK, count and dimension match the graph\n", v.File, v.Format, v.Count, v.D)
	}
	if f := rep.Footer; f != nil {
		status := "not checked (use --verify)"
		if f.CRCOK != nil {
			status = map[bool]string{true: "ok", false: "MISMATCH"}[*f.CRCOK]
		}
		fmt.Fprintf(w, "lucene footer: at byte %d, checksum %s, CRC %s\n", f.Offset, f.Checksum, status)
	}
	fmt.Fprintf(w, "memory: mode full needs %s (whole file + small arrays); mode memory_efficient needs %s (small arrays and node table)\n",
		human(rep.Memory.Full), human(rep.Memory.MemoryEfficient))
	for _, s := range rep.Warnings {
		fmt.Fprintf(w, "warning: %s\n", s)
	}
	if v := rep.Verify; v != nil {
		for _, l := range v.Levels {
			fmt.Fprintf(w, "level %d: %d nodes, degree min %d mean %.2f max %d of %d slots, %d empty lists, %d self links\n",
				l.Level, l.Nodes, l.MinDegree, l.MeanDeg, l.MaxDegree, l.Capacity, l.Empty, l.SelfLinks)
		}
		if len(v.Levels) > 0 {
			fmt.Fprintf(w, "unreachable from the entry point: %d nodes", v.Unreachable)
			if len(v.UnreachableIDs) > 0 {
				fmt.Fprintf(w, " (e.g. %v)", v.UnreachableIDs)
			}
			fmt.Fprintln(w)
		}
		for _, vi := range v.Violations {
			fmt.Fprintf(w, "violation %s: %s\n", vi.Kind, vi.Msg)
		}
		if more := v.NViolations - int64(len(v.Violations)); more > 0 {
			fmt.Fprintf(w, "… and %d more violations\n", more)
		}
		fmt.Fprintf(w, "verify: %d violations\n", v.NViolations)
	}
}

func human(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
