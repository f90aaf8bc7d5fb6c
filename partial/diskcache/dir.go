package diskcache

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// Dir is a cache directory: its path and budget, given to every Cache
// opened on it (Options.Dir). Its owner (a server, a command) makes one
// and passes it down. While Caches are open on it (or the owner holds it,
// Hold) the directory is locked and its blocks indexed in memory, shared
// by those Caches, the budget covering them all; with the last one it is
// released. Safe for concurrent use.
type Dir struct {
	path   string
	budget int64

	mu   sync.Mutex
	refs int  // the Caches open on it and the owner's holds
	d    *dir // open while refs > 0
}

// NewDir is the cache directory at path with a budget of budget bytes
// for the blocks of all its objects (0: DefaultBudget). It touches
// nothing: the first Cache opened on it (or Hold) opens and locks it, and
// checks budget (CheckBudget).
func NewDir(path string, budget int64) *Dir { return &Dir{path: path, budget: budget} }

// Path is the directory as given.
func (d *Dir) Path() string { return d.path }

// Budget is the budget as given (0: DefaultBudget).
func (d *Dir) Budget() int64 { return d.budget }

// Hold opens the directory now, if no Cache has, and keeps it open until
// release is called (once, however often): a server holds its directory
// from start, so another process using it is refused then, not by the
// loads that would find it taken.
func (d *Dir) Hold() (release func() error, err error) {
	dd, err := d.acquire()
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return func() error {
		err := error(nil)
		once.Do(func() { err = d.release(dd) })
		return err
	}, nil
}

// acquire opens the directory (or shares it while open) and takes a hold.
func (d *Dir) acquire() (*dir, error) {
	if err := CheckBudget(d.budget); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.d == nil {
		abs, err := filepath.Abs(d.path)
		if err != nil {
			return nil, fmt.Errorf("diskcache: %s: %w", d.path, err)
		}
		if d.d, err = openDir(abs, cmp.Or(d.budget, DefaultBudget)); err != nil {
			return nil, err
		}
	}
	d.refs++
	return d.d, nil
}

// release drops a hold on dd; the last one unlocks the directory and
// forgets its index (the blocks stay on disk for the next open).
func (d *Dir) release(dd *dir) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.refs--; d.refs > 0 {
		return nil
	}
	d.d = nil
	dd.mu.Lock()
	dd.open.Purge() // closes the open block files
	dd.mu.Unlock()
	return unlockFile(dd.lock)
}

// dir is an open cache directory, shared by the Caches open on its Dir.
type dir struct {
	path   string
	budget int64
	lock   *os.File

	mu       sync.Mutex
	lru      *simplelru.LRU[key, *entry] // the blocks on disk, least recent first
	open     *simplelru.LRU[key, *entry] // the blocks whose file is open, at most maxOpen
	used     int64                       // bytes of the blocks in lru
	reserved int64                       // bytes of blocks being written
	objs     map[string]*objDir          // by subdirectory name
	byID     []*objDir
	evicted  atomic.Int64
}

// objDir is one object's subdirectory.
type objDir struct {
	id   int32
	path string
	m    meta // guarded by dir.mu
	v    version
	ok   bool // m is valid (a meta file was read or written)
}

type key struct {
	obj int32
	blk int64
}

// entry is a block on disk: its file's bytes, and the file while it is
// open. A block written again gets a new entry: a stale lookup's entry is
// no longer the one in the index.
type entry struct {
	bytes int64
	ob    *openBlock // guarded by dir.mu
}

// openBlock is a block's file, open, with its header read and checked: a
// warm read is one pread of the chunks it needs (and their CRCs).
type openBlock struct {
	f *os.File
	h header
}

// maxOpen bounds the block files a directory keeps open (least recently
// used closed first): a descriptor each. A read of a block whose file is
// not open costs an open, a header read and a close besides its read, so
// the bound follows the process's descriptor limit (Go raises the soft
// limit to the hard one at start): a quarter of it, from 1024 up to 16384
// files (1 GiB of 64 KiB blocks).
var maxOpen = openLimit(fdLimit())

// OpenFiles is the most block files the process's cache directories keep
// open at once.
func OpenFiles() int { return maxOpen }

func openLimit(fds uint64) int {
	return int(min(max(fds/4, 1024), 16384))
}

// openDir claims path as a cache directory (creating it), locks it and
// indexes the blocks it holds.
func openDir(path string, budget int64) (*dir, error) {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("diskcache: cache directory: %w", err)
	}
	marker := filepath.Join(path, MarkerName)
	switch b, err := os.ReadFile(marker); {
	case err == nil && string(b) != markerText:
		return nil, fmt.Errorf("diskcache: %s: %s holds %q, not this version's marker: use another directory", path, MarkerName, b)
	case errors.Is(err, fs.ErrNotExist):
		ents, err := os.ReadDir(path)
		if err != nil {
			return nil, fmt.Errorf("diskcache: cache directory: %w", err)
		}
		if len(ents) > 0 {
			return nil, fmt.Errorf("%w: cache directory %s is not empty and has no %s file: it is not a faiss-sidecar cache (give an empty or new directory)",
				partial.ErrBadOption, path, MarkerName)
		}
		if err := writeFileAtomic(marker, []byte(markerText)); err != nil {
			return nil, fmt.Errorf("diskcache: %w", err)
		}
	case err != nil:
		return nil, fmt.Errorf("diskcache: %w", err)
	}
	lock, err := lockFile(filepath.Join(path, lockName))
	if err != nil {
		return nil, fmt.Errorf("diskcache: cache directory %s: %w", path, err)
	}
	lru, _ := simplelru.NewLRU[key, *entry](math.MaxInt, nil)    // bounded by bytes, not count
	open, _ := simplelru.NewLRU(maxOpen, func(_ key, e *entry) { // under dir.mu
		e.ob.f.Close() // a read in flight finishes first, or fails and is a miss
		e.ob = nil
	})
	d := &dir{path: path, budget: budget, lock: lock, lru: lru, open: open, objs: map[string]*objDir{}}
	if err := d.scan(); err != nil {
		unlockFile(lock)
		return nil, err
	}
	return d, nil
}

// scan indexes the blocks on disk, oldest first (by modification time, the
// time they were written), and trims them to the budget. What is not a
// valid block of a valid subdirectory (a temporary file of a crash, a
// subdirectory without a readable meta file, a file of the wrong length)
// is removed; files it does not recognise are left alone.
func (d *dir) scan() error {
	ents, err := os.ReadDir(d.path)
	if err != nil {
		return fmt.Errorf("diskcache: %w", err)
	}
	type found struct {
		k     key
		bytes int64
		mtime time.Time
	}
	var blocks []found
	for _, e := range ents {
		if !e.IsDir() || !isObjectDirName(e.Name()) {
			continue
		}
		od := d.addObj(e.Name())
		b, err := os.ReadFile(filepath.Join(od.path, MetaName))
		if err == nil {
			od.m, err = parseMeta(b)
		}
		if err != nil {
			os.RemoveAll(od.path) // written by a crash, or damaged: its blocks cannot be checked
			continue
		}
		od.v, od.ok = versionOf(od.m), true
		files, err := os.ReadDir(od.path)
		if err != nil {
			return fmt.Errorf("diskcache: %w", err)
		}
		for _, f := range files {
			name := f.Name()
			if name == MetaName {
				continue
			}
			p := filepath.Join(od.path, name)
			if strings.Contains(name, tmpInfix) {
				os.Remove(p)
				continue
			}
			blk, ok := parseBlockName(name)
			if !ok {
				continue
			}
			info, err := f.Info()
			if err != nil || !info.Mode().IsRegular() {
				continue
			}
			if n := od.blockLen(blk); n <= 0 || info.Size() != headerSize(n)+n {
				os.Remove(p)
				continue
			}
			blocks = append(blocks, found{key{od.id, blk}, info.Size(), info.ModTime()})
		}
	}
	slices.SortStableFunc(blocks, func(a, b found) int { return a.mtime.Compare(b.mtime) })
	for _, b := range blocks {
		d.lru.Add(b.k, &entry{bytes: b.bytes})
		d.used += b.bytes
	}
	for _, v := range d.evictLocked(0) {
		os.Remove(v)
	}
	return nil
}

// blockLen is the length of block blk of the object as od's meta records
// it (0: no such block).
func (od *objDir) blockLen(blk int64) int64 {
	off := blk * od.m.BlockSize
	if blk < 0 || off/od.m.BlockSize != blk || off >= od.m.Size {
		return 0
	}
	return min(od.m.BlockSize, od.m.Size-off)
}

// addObj registers subdirectory name.
func (d *dir) addObj(name string) *objDir {
	od := &objDir{id: int32(len(d.byID)), path: filepath.Join(d.path, name)}
	d.objs[name] = od
	d.byID = append(d.byID, od)
	return od
}

// attach returns the subdirectory of the object m describes, ready for
// blocks of that version: created with its meta file, or, when it held
// another version (ETag, size or block size), emptied of those blocks.
func (d *dir) attach(m meta) (*objDir, error) {
	name := objectDirName(m.Name)
	d.mu.Lock()
	defer d.mu.Unlock()
	od := d.objs[name]
	if od == nil {
		od = d.addObj(name)
	}
	if od.ok && od.m == m {
		return od, nil
	}
	var stale []string
	for _, k := range d.lru.Keys() {
		if k.obj == od.id {
			e, _ := d.lru.Peek(k)
			d.removeLocked(k, e)
			stale = append(stale, filepath.Join(od.path, blockName(k.blk)))
		}
	}
	for _, p := range stale {
		os.Remove(p)
	}
	if err := os.MkdirAll(od.path, 0o755); err != nil {
		return nil, fmt.Errorf("diskcache: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(od.path, MetaName), encodeMeta(m)); err != nil {
		return nil, fmt.Errorf("diskcache: %w", err)
	}
	od.m, od.v, od.ok = m, versionOf(m), true
	return od, nil
}

// current reports whether od still holds version v (a Cache of an older
// version bypasses the disk once a newer one took the subdirectory).
func (d *dir) current(od *objDir, v version) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return od.ok && od.v == v
}

// lookup marks block k recently used and returns its entry and its open
// file (nil when not open), if on disk for version v.
func (d *dir) lookup(od *objDir, v version, k key) (*entry, *openBlock, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if od.v != v {
		return nil, nil, false
	}
	e, ok := d.lru.Get(k)
	if !ok {
		return nil, nil, false
	}
	if e.ob != nil {
		d.open.Get(k)
	}
	return e, e.ob, true
}

// keepOpen records ob as the open file of block k if k's entry is still e
// and has none; false when the caller must close it after use.
func (d *dir) keepOpen(k key, e *entry, ob *openBlock) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if cur, ok := d.lru.Peek(k); !ok || cur != e || e.ob != nil {
		return false
	}
	e.ob = ob
	d.open.Add(k, e)
	return true
}

// removeLocked forgets block k, closing its file if open.
func (d *dir) removeLocked(k key, e *entry) {
	d.lru.Remove(k)
	d.used -= e.bytes
	if e.ob != nil {
		d.open.Remove(k)
	}
}

// drop forgets block k if its entry is still e (not written again since),
// and removes its file when unlink is set.
func (d *dir) drop(od *objDir, k key, e *entry, unlink bool) {
	d.mu.Lock()
	if cur, ok := d.lru.Peek(k); !ok || cur != e {
		d.mu.Unlock()
		return
	}
	d.removeLocked(k, e)
	d.mu.Unlock()
	if unlink {
		os.Remove(filepath.Join(od.path, blockName(k.blk)))
	}
}

// reserve makes room for a block file of n bytes, evicting the least
// recently used blocks (whose files it removes); false when n does not fit
// the budget even then (blocks being written hold the rest).
func (d *dir) reserve(n int64) bool {
	d.mu.Lock()
	victims := d.evictLocked(n)
	ok := d.used+d.reserved+n <= d.budget
	if ok {
		d.reserved += n
	}
	d.mu.Unlock()
	for _, v := range victims {
		os.Remove(v)
	}
	return ok
}

// evictLocked evicts blocks until n more bytes fit the budget (or nothing
// is left) and returns their paths.
func (d *dir) evictLocked(n int64) []string {
	var victims []string
	for d.used+d.reserved+n > d.budget {
		k, e, ok := d.lru.GetOldest()
		if !ok {
			break
		}
		d.removeLocked(k, e)
		d.evicted.Add(1)
		victims = append(victims, filepath.Join(d.byID[k.obj].path, blockName(k.blk)))
	}
	return victims
}

// commit turns a reservation of n bytes into block k, whose file is in
// place; a block of a version no longer current is removed instead.
func (d *dir) commit(od *objDir, v version, k key, n int64) {
	d.mu.Lock()
	d.reserved -= n
	if od.v != v {
		d.mu.Unlock()
		os.Remove(filepath.Join(od.path, blockName(k.blk)))
		return
	}
	if old, ok := d.lru.Peek(k); ok {
		d.removeLocked(k, old)
	}
	d.lru.Add(k, &entry{bytes: n})
	d.used += n
	d.mu.Unlock()
}

// unreserve gives back a reservation whose block was not written.
func (d *dir) unreserve(n int64) {
	d.mu.Lock()
	d.reserved -= n
	d.mu.Unlock()
}

// usage is the bytes of the blocks on disk.
func (d *dir) usage() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.used
}

// tmpSeq makes temporary file names unique within the process (one Dir
// of one process uses a directory at a time).
var tmpSeq atomic.Uint64

// writeFileAtomic writes data to path through a temporary file renamed
// into place.
func writeFileAtomic(path string, data ...[]byte) error {
	tmp := fmt.Sprintf("%s%s%d", path, tmpInfix, tmpSeq.Add(1))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	for _, b := range data {
		if _, err = f.Write(b); err != nil {
			break
		}
	}
	if e := f.Close(); err == nil {
		err = e
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
