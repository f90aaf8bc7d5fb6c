package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/faiss-sidecar/faiss-sidecar/internal/vecio"
	"github.com/faiss-sidecar/faiss-sidecar/rerank"
)

// runExportVectors writes a .vec file (aligned records for direct I/O) from
// .fvecs, a float32 .npy, or the flat vectors of a FAISS file.
func runExportVectors(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("export-vectors", flag.ContinueOnError)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := checkArgs("export-vectors", pos, "IN", "OUT"); err != nil {
		return err
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
		s, err := rerank.Open(in, "pread")
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
	err = writeFile(out, func(w *bufio.Writer) error {
		return rerank.WriteVec(w, dim, count, next, func(done int64) { prog.Update(done, count) })
	})
	prog.Done()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d vectors of dimension %d → %s (records of %d bytes on 4096-byte boundaries)\n", in, count, dim, out, (int64(dim)*4+4095)/4096*4096)
	return nil
}
