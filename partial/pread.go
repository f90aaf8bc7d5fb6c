package partial

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/faiss-sidecar/faiss-sidecar/internal/filekind"
	"github.com/faiss-sidecar/faiss-sidecar/partial/internal/backendkit"
)

// File reads a file with positional reads (pread), no caching of its own.
// Put a blockcache.Cached in front of it for the "pread" backend.
type File struct {
	f    *os.File
	name string
	size int64
	life backendkit.Life
	w    fileWatch
	counters
}

// OpenFile opens path for positional reads; errors name it as opts say
// (Named).
func OpenFile(path string, opts ...OpenOption) (*File, error) {
	h, err := OpenHandle(path, opts...)
	if err != nil {
		return nil, err
	}
	return NewFile(h)
}

// NewFile reads the file h holds with positional reads, without the
// kernel's read-ahead (OpenHandle's advice); it takes h over.
func NewFile(h *Handle) (*File, error) {
	f, id, err := h.take()
	if err != nil {
		return nil, err
	}
	p := &File{f: f, name: h.name, size: id.size}
	p.life.Free = func() error { p.w.stop(); return f.Close() }
	p.w.start(h.path, h.name, int(f.Fd()), &p.life, id)
	return p, nil
}

func (p *File) Size() int64 { return p.size }

// ReadAtContext reads with one pread (none when ctx has ended), counted in
// t when not nil.
func (p *File) ReadAtContext(ctx context.Context, b []byte, off int64, t *Tally) (int, error) {
	if !p.life.Acquire() {
		return 0, backendkit.Closed(p.name)
	}
	defer p.life.Release()
	p.request(len(b))
	if err := backendkit.CheckRange(p.name, off, int64(len(b)), p.size); err != nil {
		return 0, err
	}
	if err := Interrupted(ctx); err != nil {
		return 0, fmt.Errorf("%s: read of %d bytes at offset %d given up: %w", p.name, len(b), off, err)
	}
	n, err := p.f.ReadAt(b, off)
	p.osRead(n)
	if t != nil {
		t.DeviceReads++
		t.DeviceBytes += int64(n)
	}
	if n == len(b) {
		return n, nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF // the file shrank under us
	}
	return n, p.w.explain(fmt.Errorf("%s: read of %d bytes at offset %d: %w", p.name, len(b), off, err))
}

// openRegularID opens path for reading and returns the open file's
// identity (its size included), what the storage's file checks compare
// with; directories, devices and other non-regular files are refused.
// Errors name the file as name.
func openRegularID(path, name string) (*os.File, fileID, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fileID{}, NameError(err, path, name)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fileID{}, NameError(err, path, name)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fileID{}, fmt.Errorf("%s is %s, not a regular file", name, filekind.Of(st.Mode()))
	}
	id, err := fstatID(int(f.Fd()))
	if err != nil {
		f.Close()
		return nil, fileID{}, err
	}
	return f, id, nil
}

// ReadBatch reads the requests in parallel, up to 16 at a time; those not
// started when ctx ends fail.
func (p *File) ReadBatch(ctx context.Context, reqs []ReadReq) error {
	return readBatchParallel(ctx, p, reqs, 16)
}

// Fd is the descriptor, for posix_fadvise in benchmarks.
func (p *File) Fd() uintptr { return p.f.Fd() }

func (p *File) Close() error { return p.life.Close(p.name) }

func (p *File) Stats() Stats { return p.snapshot() }

// readBatchParallel serves reqs with up to par concurrent reads, each
// request tallying its own I/O.
func readBatchParallel(ctx context.Context, r Storage, reqs []ReadReq, par int) error {
	read := func(q *ReadReq) {
		buf := q.Buf
		if q.ToEOF {
			buf = buf[:max(0, min(int64(len(buf)), r.Size()-q.Off))]
		}
		_, q.Err = r.ReadAtContext(ctx, buf, q.Off, &q.IO)
	}
	if len(reqs) == 1 {
		read(&reqs[0])
		return reqs[0].Err
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, par)
	for i := range reqs {
		sem <- struct{}{}
		wg.Add(1)
		go func(q *ReadReq) {
			defer func() { <-sem; wg.Done() }()
			read(q)
		}(&reqs[i])
	}
	wg.Wait()
	for i := range reqs {
		if reqs[i].Err != nil {
			return reqs[i].Err
		}
	}
	return nil
}
