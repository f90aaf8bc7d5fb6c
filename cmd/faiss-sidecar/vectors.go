package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/internal/vecio"
	"github.com/faiss-sidecar/faiss-sidecar/rerank"
)

// runExportVectors writes a .vec file from .fvecs, a float32 .npy, or the
// flat vectors of a FAISS file, its records packed or aligned for direct
// I/O (rerank.AutoVecLayout decides when not asked).
func runExportVectors(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("export-vectors", flag.ContinueOnError)
	layout := fs.String("layout", "auto", "record layout: aligned (each vector padded to a multiple of 4096 bytes and on a 4096-byte boundary, "+
		"so an O_DIRECT read of one vector is one block: for --rerank-strategy direct), packed (vectors back to back: the file is the data), "+
		"or auto: aligned when padding at most doubles a vector (dimension 512 and more), else packed")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := checkArgs("export-vectors", pos, "IN", "OUT"); err != nil {
		return err
	}
	switch *layout {
	case "auto", rerank.LayoutAligned, rerank.LayoutPacked:
	default:
		return usagef("unknown --layout %q (want auto, aligned or packed)", *layout)
	}
	in, out := pos[0], pos[1]
	if err := checkOutput(out); err != nil {
		return err
	}
	var dim int
	var count int64
	var next func(i int64, dst []float32) error
	var closeIn func()
	if strings.EqualFold(filepath.Ext(in), ".npy") {
		m, err := vecio.ReadFile(in)
		if err != nil {
			return err
		}
		if m.F32 == nil {
			return fmt.Errorf("%s: a float32 array is needed", in)
		}
		dim, count = m.Dim, int64(m.N)
		next = func(i int64, dst []float32) error { copy(dst, m.RowF32(int(i))); return nil }
		closeIn = func() {}
	} else {
		// .fvecs and FAISS flat sections are read in place, row by row.
		s, err := engine.OpenVectors(procEnv, in, rerank.StrategyPread, 0)
		if err != nil {
			return err
		}
		dim, count = s.Dim, s.Count
		next = func(i int64, dst []float32) error { return s.Fetch([]int32{int32(i)}, dst, nil) }
		closeIn = func() { s.Close() }
	}
	defer closeIn()
	var prog *progressBar
	if isTerminal(os.Stderr) {
		prog = newProgressBar(os.Stderr, "export")
	}
	if *layout == "auto" {
		*layout = rerank.AutoVecLayout(dim)
	}
	err = writeFile(out, func(w *bufio.Writer) error {
		return rerank.WriteVecLayout(w, dim, count, *layout, next, func(done int64) { prog.Update(done, count) })
	})
	prog.Done()
	if err != nil {
		return err
	}
	stride, data := rerank.VecStride(dim, *layout), int64(dim)*4
	size := rerank.VecAlign + count*stride
	fmt.Fprintf(stdout, "%s: %d vectors of dimension %d → %s: %d bytes, layout %s, records of %d bytes", in, count, dim, out, size, *layout, stride)
	if *layout == rerank.LayoutAligned {
		fmt.Fprintf(stdout, " on 4096-byte boundaries for O_DIRECT reads (one block a vector; %.3g× the vectors' %d bytes)\n", float64(stride)/float64(data), data)
	} else {
		fmt.Fprintf(stdout, " back to back (aligned for O_DIRECT they would be %d bytes each, %.3g× the data: --layout aligned)\n",
			rerank.VecStride(dim, rerank.LayoutAligned), float64(rerank.VecStride(dim, rerank.LayoutAligned))/float64(data))
	}
	return nil
}
