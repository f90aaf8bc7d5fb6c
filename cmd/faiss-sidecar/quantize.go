package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// levelNames are the compression levels by name, finest first (without
// auto).
func levelNames() []string { return engine.CompressionNames()[1:] }

// runQuantize is `quantize INDEX --compression 4x|5x|6x|8x|16x|32x [--out FILE]`
// (the levels engine.CompressionNames lists): the engine's on_disk guide
// build, ahead of time.
func runQuantize(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("quantize", flag.ContinueOnError)
	compression := fs.String("compression", "4x", "the guide's compression: "+strings.Join(levelNames(), ", ")+" (4x: 8 bits a dimension, 5x: 6 bits, 6x: 5 bits, 8x: 4 bits, 16x: 2 bits, 32x: 1 bit); auto: the finest")
	out := fs.String("out", "", "the guide file (default: where on_disk looks for it, beside the index or in --guide-dir)")
	guideDir := fs.String("guide-dir", "", "directory of guide files (default: beside the index)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := checkArgs("quantize", pos, "INDEX"); err != nil {
		return err
	}
	if err := checkOutput(*out); err != nil {
		return err
	}
	if err := checkGuideDir(*guideDir); err != nil {
		return err
	}
	spec := engine.Spec{Path: pos[0], Compression: *compression, GuideDir: *guideDir, RemoteGuideDir: defaultRemoteGuideDir(), Env: procEnv}
	var bar *progressBar
	if isTerminal(os.Stderr) {
		bar = newProgressBar(os.Stderr, "quantize")
		spec.Progress = bar.Update
	}
	var read int64
	progress := spec.Progress
	spec.Progress = func(done, total int64) {
		read = done
		if progress != nil {
			progress(done, total)
		}
	}
	start := time.Now()
	gi, err := engine.Quantize(spec, *out)
	bar.Done()
	if err != nil {
		return specError(err)
	}
	secs := time.Since(start).Seconds()
	fmt.Fprintf(stdout, "%s: %s guide, %d bytes → %s (read %d bytes in %.2f s, %.0f MB/s)\n",
		pos[0], gi.Level, gi.Bytes, gi.Path, read, secs, float64(read)/secs/1e6)
	return nil
}
