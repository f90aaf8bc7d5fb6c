package main

import (
	"fmt"
	"os"
)

// source is what subcommands read an index through.
type source interface {
	ReadAt(p []byte, off int64) (int, error)
	Size() int64
	Close() error
}

type fileSource struct {
	*os.File
	size int64
}

func (f *fileSource) Size() int64 { return f.size }

// openSource opens path through the named storage backend.
func openSource(path, backend string) (source, error) {
	if backend != "pread" {
		return nil, usagef("unknown backend %q", backend)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	return &fileSource{File: f, size: st.Size()}, nil
}
