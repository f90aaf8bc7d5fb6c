package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/faiss-sidecar/faiss-sidecar/partial/zstd"
)

func runCompress(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compress", flag.ContinueOnError)
	frame := fs.Int("frame-size", 64<<10, "uncompressed bytes per zstd frame (the unit of random access and caching), 1 … 1 GiB")
	level := fs.Int("level", 3, "zstd compression level, 1 (fastest) … 22 (smallest)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := checkArgs("compress", pos, "IN", "OUT"); err != nil {
		return err
	}
	if err := zstd.CheckFrameSize(*frame); err != nil {
		return usagef("--frame-size: %v", err)
	}
	if *level < 1 || *level > 22 {
		return usagef("--level %d: zstd levels run from 1 (fastest) to 22 (smallest)", *level)
	}
	if err := checkOutput(pos[1]); err != nil {
		return err
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
	if z, err := zstd.IsCompressed(pos[0]); err != nil {
		return err
	} else if z {
		return fmt.Errorf("%s is zstd-compressed already (read it with --backend zstd; to recompress, decompress it first)", pos[0])
	}
	var prog *progressBar
	if isTerminal(os.Stderr) {
		prog = newProgressBar(os.Stderr, "compress")
	}
	var res zstd.CompressResult
	err = writeFile(pos[1], func(w *bufio.Writer) (err error) {
		res, err = zstd.CompressSeekable(w, bufio.NewReaderSize(in, 1<<20), *frame, *level, func(done int64) { prog.Update(done, st.Size()) })
		return err
	})
	prog.Done()
	if err != nil {
		return err
	}
	ratio := 0.0
	if res.Out > 0 {
		ratio = float64(res.In) / float64(res.Out)
	}
	fmt.Fprintf(stdout, "%s: %d bytes → %s: %d bytes in %d frames of %d bytes, ratio %.3f\n", pos[0], res.In, pos[1], res.Out, res.Frames, *frame, ratio)
	return nil
}
