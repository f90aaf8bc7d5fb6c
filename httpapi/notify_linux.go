package httpapi

import (
	"errors"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// notifier reports changes to watched files and directories (inotify).
type notifier struct {
	fd int      // for adding and removing watches
	f  *os.File // the same descriptor, read through the runtime's poller
}

// What a watch reports: of a served file, a write or truncation, a change
// of its times, permissions or links (removed, or renamed over: its link
// count drops), its own rename, a writer closing it; of a directory on its
// path, that directory's rename or removal (a path that then names
// another file).
const (
	fileEvents = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_MOVE_SELF | unix.IN_DELETE_SELF
	dirEvents  = unix.IN_MOVE_SELF | unix.IN_DELETE_SELF
)

func newNotifier() (*notifier, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	// Non-blocking, so os.File reads it through the poller: close ends a read.
	return &notifier{fd: fd, f: os.NewFile(uintptr(fd), "inotify")}, nil
}

// add watches path, a file or (dir) a directory, returning its watch
// descriptor: the same one for every path of the same inode.
func (n *notifier) add(path string, dir bool) (int32, error) {
	mask := uint32(fileEvents)
	if dir {
		mask = dirEvents | unix.IN_ONLYDIR
	}
	wd, err := unix.InotifyAddWatch(n.fd, path, mask)
	return int32(wd), err
}

func (n *notifier) remove(wd int32) { unix.InotifyRmWatch(n.fd, uint32(wd)) }

// run calls changed with the watch descriptor of each event, gone with
// that of a watch the kernel dropped (its inode freed, its file system
// unmounted), and lost when events were dropped (the queue overflowed),
// until close, or until reading fails (failed true).
func (n *notifier) run(changed, gone func(wd int32), lost func()) (failed bool) {
	buf := make([]byte, 64<<10)
	for {
		k, err := n.f.Read(buf)
		if err != nil {
			return !errors.Is(err, os.ErrClosed)
		}
		for off := 0; off+unix.SizeofInotifyEvent <= k; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			switch {
			case ev.Mask&unix.IN_Q_OVERFLOW != 0:
				lost()
			case ev.Mask&unix.IN_IGNORED != 0:
				gone(ev.Wd)
			default:
				changed(ev.Wd)
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
	}
}

func (n *notifier) close() { n.f.Close() }

// localFS reports whether the file at path lies on a file system whose
// changes all pass through this kernel, so inotify sees them: not a
// network or FUSE file system, whose other clients' writes it does not.
func localFS(path string) bool {
	var st unix.Statfs_t
	if unix.Statfs(path, &st) != nil {
		return false
	}
	switch uint32(st.Type) {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.TMPFS_MAGIC,
		unix.OVERLAYFS_SUPER_MAGIC, unix.F2FS_SUPER_MAGIC, unix.RAMFS_MAGIC, 0x2fc12fc1 /* zfs */ :
		return true
	}
	return false
}
