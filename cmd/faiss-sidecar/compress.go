package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

func runCompress(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compress", flag.ContinueOnError)
	frame := fs.Int("frame-size", 64<<10, "uncompressed bytes per zstd frame (the unit of random access and caching)")
	level := fs.Int("level", 3, "zstd compression level")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("usage: faiss-sidecar compress IN OUT [--frame-size N] [--level L]")
	}
	in, err := os.Open(pos[0])
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	// Write to a temporary file beside OUT and rename, so OUT is never half-written.
	tmp, err := os.CreateTemp(filepath.Dir(pos[1]), ".compress-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	var prog *progressBar
	if isTerminal(os.Stderr) {
		prog = newProgressBar(os.Stderr, "compress")
	}
	w := bufio.NewWriterSize(tmp, 1<<20)
	res, err := partial.CompressSeekable(w, bufio.NewReaderSize(in, 1<<20), *frame, *level, func(done int64) { prog.Update(done, st.Size()) })
	prog.Done()
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", pos[1], err)
	}
	if err := os.Rename(tmp.Name(), pos[1]); err != nil {
		return err
	}
	ratio := 0.0
	if res.Out > 0 {
		ratio = float64(res.In) / float64(res.Out)
	}
	fmt.Fprintf(stdout, "%s: %d bytes → %s: %d bytes in %d frames of %d bytes, ratio %.3f\n", pos[0], res.In, pos[1], res.Out, res.Frames, *frame, ratio)
	return nil
}
