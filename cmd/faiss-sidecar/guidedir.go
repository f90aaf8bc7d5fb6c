package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// checkGuideDir checks a --guide-dir before any work: it is a directory,
// or does not exist yet in a directory that does (the guide's write then
// creates it). A missing parent is an error naming it: creating a whole
// tree from a mistyped path would hide the typo.
func checkGuideDir(dir string) error {
	if dir == "" {
		return nil
	}
	fi, err := os.Stat(dir)
	switch {
	case err == nil && !fi.IsDir():
		return fmt.Errorf("--guide-dir %s: not a directory", dir)
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("--guide-dir %s: %w", dir, bareErr(err))
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if pi, err := os.Stat(parent); err != nil || !pi.IsDir() {
		return fmt.Errorf("--guide-dir %s: its parent %s is not an existing directory (only the last element of the path is created)", dir, parent)
	}
	return nil
}

// defaultRemoteGuideDir is where the on_disk guide of an s3:// index is
// kept when no guide directory is given (engine.Spec.RemoteGuideDir): the
// user cache directory's faiss-sidecar/guides (os.UserCacheDir:
// $XDG_CACHE_HOME, else ~/.cache, on Linux); "" when the system has none
// (no $HOME), and such a load is then refused, naming the guide directory.
func defaultRemoteGuideDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "faiss-sidecar", "guides")
}
