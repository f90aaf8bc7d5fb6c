package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// plural is "1 thread", "2 threads".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// checkOutput refuses, before any work, an output path that is a
// directory ("-" and "" are stdout).
func checkOutput(path string) error {
	if path == "-" || path == "" {
		return nil
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s: is a directory; name the file to write", path)
	}
	return nil
}

// writeOutput writes to path ("-" or "": stdout) with writeFile.
func writeOutput(path string, stdout io.Writer, write func(*bufio.Writer) error) error {
	if path == "-" || path == "" {
		w := bufio.NewWriter(stdout)
		if err := write(w); err != nil {
			return err
		}
		return w.Flush()
	}
	return writeFile(path, write)
}

// writeFile is how every command writes an output file (search --out,
// compress, export-vectors): into a temporary file beside path, created the
// way os.Create creates a file (mode 0666 less the umask, the directory's
// default ACL; an existing file's mode is kept), then synced and renamed
// over path, so a failed run never leaves half a file. Errors name path,
// never the temporary file.
func writeFile(path string, write func(*bufio.Writer) error) (err error) {
	if err := checkOutput(path); err != nil {
		return err
	}
	tmp, err := createBeside(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, bareErr(err))
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
		if err := tmp.Chmod(fi.Mode().Perm()); err != nil {
			return fmt.Errorf("%s: %w", path, bareErr(err))
		}
	}
	w := bufio.NewWriterSize(tmp, 1<<20)
	if err := write(w); err != nil {
		return fmt.Errorf("%s: %w", path, bareErr(err))
	}
	for _, step := range []func() error{w.Flush, tmp.Sync, tmp.Close} {
		if err := step(); err != nil {
			return fmt.Errorf("%s: %w", path, bareErr(err))
		}
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("%s: %w", path, bareErr(err))
	}
	return nil
}

// createBeside creates a new file named .BASE.tmp-N beside path with the
// permissions os.Create would give path (os.CreateTemp makes 0600).
func createBeside(path string) (*os.File, error) {
	prefix := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	for range 100 {
		f, err := os.OpenFile(prefix+strconv.FormatUint(uint64(rand.Uint32()), 10), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
	return nil, fmt.Errorf("cannot create a temporary file beside it: %w", fs.ErrExist)
}

// bareErr strips the path (a temporary file's) from an *os.PathError or
// *os.LinkError, leaving what went wrong ("no such file or directory").
func bareErr(err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return pe.Err
	case errors.As(err, &le):
		return le.Err
	}
	return err
}
