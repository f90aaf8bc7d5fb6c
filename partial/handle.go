package partial

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// Handle is a regular file opened once, for every use its owner makes of
// it: what the file was at open (size, times, inode) is known without
// looking at the path again, a caller may read it through ReadAt before it
// chooses a backend (a probe, a parse), and the backend that then serves
// it is built on the same open file (NewFile, NewMmap, NewDirect,
// ReadMemory), so the bytes probed are the bytes served. ReadAt is safe
// for concurrent use; building a backend takes the handle over, and the
// handle must not be used after.
type Handle struct {
	f    *os.File
	path string // what is opened, and checked for changes
	name string // what errors call it (Named)
	id   fileID
}

// OpenHandle opens the regular file at path (directories, devices and
// other non-regular files are refused). Its reads get no read-ahead, as
// pread's (a probe reads headers and small arrays); a mapping or a whole
// read built on it has the default back. The handle, and every backend
// built on it, names the file as opts say (Named) in its errors.
func OpenHandle(path string, opts ...OpenOption) (*Handle, error) {
	name := NameOf(path, opts...)
	f, id, err := openRegularID(path, name)
	if err != nil {
		return nil, err
	}
	adviseRandom(f)
	return &Handle{f: f, path: path, name: name, id: id}, nil
}

// Name is what the handle's errors call the file: Named's name, else the
// path it was opened by.
func (h *Handle) Name() string { return h.name }

// Size is the file's size when it was opened (or last Restat).
func (h *Handle) Size() int64 { return h.id.size }

// ModTime is the file's modification time when it was opened (or last
// Restat).
func (h *Handle) ModTime() time.Time { return time.Unix(0, h.id.mtime) }

// ReadAt reads the file as it is now, without accounting or read-ahead
// advice.
func (h *Handle) ReadAt(p []byte, off int64) (int, error) { return h.f.ReadAt(p, off) }

// Close closes the file (not needed once a backend took the handle over).
func (h *Handle) Close() error {
	if h.f == nil {
		return nil
	}
	return h.f.Close()
}

// Restat looks at the open file again (fstat, not the path) and reports
// whether it changed (size, times, inode) since the handle was opened or
// last restatted; the handle takes what it is now as its identity, which
// the backend built on it checks the file against from then on.
func (h *Handle) Restat() (changed bool, err error) {
	id, err := fstatID(int(h.f.Fd()))
	if err != nil {
		return false, err
	}
	changed = id != h.id
	h.id = id
	return changed, nil
}

// Reopen opens the file h holds once more, as a handle of its own (its
// own status flags, such as O_DIRECT, and its own lease): through the open
// descriptor, not the path, so a file replaced at the path since h was
// opened is not what it opens (where the system cannot, it opens the path
// and fails with ErrFileChanged unless that is still h's file).
func (h *Handle) Reopen() (*Handle, error) {
	f, err := reopen(h.f, h.path)
	if err != nil {
		return nil, NameError(err, h.path, h.name)
	}
	id, err := fstatID(int(f.Fd()))
	if err == nil && (id.dev != h.id.dev || id.ino != h.id.ino) {
		err = fmt.Errorf("%s: %w: replaced at its path since it was opened", h.name, ErrFileChanged)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	adviseRandom(f) // as OpenHandle's
	return &Handle{f: f, path: h.path, name: h.name, id: id}, nil
}

// take hands the open file and its identity to the backend built on it;
// the handle is empty from then on.
func (h *Handle) take() (*os.File, fileID, error) {
	f := h.f
	if f == nil {
		return nil, fileID{}, errors.New(h.name + ": the handle was taken by another backend")
	}
	h.f = nil
	return f, h.id, nil
}
