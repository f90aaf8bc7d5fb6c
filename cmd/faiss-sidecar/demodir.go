package main

import (
	"os"
	"path/filepath"
)

// demoDirPattern names the temporary directories the demo index is served
// from (os.MkdirTemp's pattern, in os.TempDir).
const demoDirPattern = "faiss-sidecar-demo-*"

// makeDemoDir creates the demo's temporary directory, holding a lock on it
// for as long as the server runs, after removing the directories of demo
// servers that ended without cleaning up (killed): those whose lock no
// process holds. release unlocks and removes the directory.
func makeDemoDir() (dir string, release func(), err error) {
	removeStaleDemoDirs(os.TempDir())
	dir, err = os.MkdirTemp("", demoDirPattern)
	if err != nil {
		return "", nil, err
	}
	lock, err := lockDemoDir(dir)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return dir, func() { lock.Close(); os.RemoveAll(dir) }, nil
}

// removeStaleDemoDirs removes the demo directories in tmp whose lock file
// it can lock: the process that held it is gone. A directory without a
// lock file is left alone (the lock file appears already locked, so that
// is not a server starting).
func removeStaleDemoDirs(tmp string) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, demoDirPattern))
	for _, d := range dirs {
		if f, ok := tryLockStale(filepath.Join(d, demoLockName)); ok {
			os.RemoveAll(d)
			f.Close()
		}
	}
}

const demoLockName = "lock"
