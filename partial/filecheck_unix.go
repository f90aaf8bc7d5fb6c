//go:build unix

package partial

import (
	"errors"

	"golang.org/x/sys/unix"
)

// errNoFile: the path names no file (ENOENT, ENOTDIR).
var errNoFile = errors.New("no such file")

func idOf(st *unix.Stat_t) fileID {
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino), size: st.Size,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
}

// fstatID is the identity of the file open as fd; it does not allocate.
func fstatID(fd int) (fileID, error) {
	var st unix.Stat_t
	for {
		err := unix.Fstat(fd, &st)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fileID{}, err
		}
		return idOf(&st), nil
	}
}

// statID is the identity of the file at path (symbolic links followed, as
// open follows them).
func statID(path string) (fileID, error) {
	var st unix.Stat_t
	for {
		err := unix.Stat(path, &st)
		switch err {
		case nil:
			return idOf(&st), nil
		case unix.EINTR:
			continue
		case unix.ENOENT, unix.ENOTDIR:
			return fileID{}, errNoFile
		}
		return fileID{}, err
	}
}
