package httpapi

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
	"github.com/faiss-sidecar/faiss-sidecar/internal/filekind"
)

// CheckDataRoot refuses what cannot be a data root: an empty one ("" is
// the working directory to the path functions, "/" in a container, and
// would open every file to the API) and one that is not an existing
// directory (every load under it would fail, the server up all the same).
func CheckDataRoot(root string) error {
	if strings.TrimSpace(root) == "" {
		return fmt.Errorf("data root %q is empty: name a directory (an empty entry, such as a trailing colon in FAISS_SIDECAR_DATA_ROOT, is refused)", root)
	}
	fi, err := os.Stat(root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("data root %q does not exist: name an existing directory", root)
	case err != nil:
		return fmt.Errorf("data root %q cannot be read: %v", root, errors.Unwrap(err))
	case !fi.IsDir():
		return fmt.Errorf("data root %q is %s: name a directory", root, filekind.Of(fi.Mode()))
	}
	return nil
}

// allowBuckets sets the S3 buckets whose objects (s3://BUCKET/KEY) the
// registry serves: for object paths, the allow-list replaces the data
// roots' confinement.
func (r *Registry) allowBuckets(buckets []string) error {
	for _, b := range buckets {
		if err := engine.CheckS3Bucket(b); err != nil {
			return fmt.Errorf("s3 bucket allow-list: %w", err)
		}
	}
	r.buckets = slices.Clone(buckets)
	return nil
}

// resolve maps a request path (relative to the first data root, or
// absolute) to a regular file that lies, after symlinks, inside a data
// root. A path outside every root is a 403 whether or not it exists: the
// check comes before any lookup, so the answer tells nothing about the
// file system outside the roots. An s3://BUCKET/KEY path is confined to
// the allowed buckets instead (resolveObject).
func (r *Registry) resolve(p string) (string, error) {
	if p == "" {
		return "", badRequest("path is required")
	}
	if len(p) > maxPathBytes {
		return "", badRequest("path of %d bytes is longer than %d", len(p), maxPathBytes)
	}
	if engine.IsRemote(p) {
		return r.resolveObject(p)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", badRequest("path %q holds a NUL byte", p)
	}
	// Messages name the path as the client sent it (sent), never the
	// server's spelling of it: the data root's location is the server's.
	sent := p
	if len(r.roots) == 0 {
		return "", errForbiddenPath(fmt.Sprintf("%s: no data root is configured on this server: only s3:// objects are served", sent))
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(r.roots[0], p)
	}
	p = filepath.Clean(p)
	outside := errForbiddenPath(fmt.Sprintf("%s is outside the data roots", sent))
	if !within(r.roots, p) && !within(r.given, p) {
		return "", outside
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		if os.IsNotExist(err) && r.missingInside(p) {
			return "", errNotFound("file_not_found", fmt.Sprintf("no file at %s", sent))
		}
		return "", outside
	}
	if !within(r.roots, real) {
		return "", outside
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", errForbiddenPath(fmt.Sprintf("cannot stat %s", sent))
	}
	if !fi.Mode().IsRegular() {
		return "", badRequest("%s is %s, not a regular file", sent, filekind.Of(fi.Mode()))
	}
	return real, nil
}

// resolveObject checks an s3://BUCKET/KEY path: well formed (a 400 saying
// why), and in an allowed bucket (a 403 naming the bucket, as a path
// outside the data roots is). It asks nothing of the object store: whether
// the object exists is the open's answer (404 file_not_found).
func (r *Registry) resolveObject(p string) (string, error) {
	bucket, _, err := engine.ParseS3URL(p)
	if err != nil {
		return "", badRequest("path %v", err)
	}
	if len(r.buckets) == 0 {
		return "", errForbiddenPath(fmt.Sprintf(
			"%s: no S3 bucket is allowed on this server; allow one with serve --s3-bucket %s (or \"s3_buckets\" in the config file)", p, bucket))
	}
	if !slices.Contains(r.buckets, bucket) {
		return "", errForbiddenPath(fmt.Sprintf(
			"%s: bucket %q is not in the allowed S3 buckets (--s3-bucket, \"s3_buckets\")", p, bucket))
	}
	return p, nil
}

// missingInside reports whether p, which does not resolve, is missing
// inside a data root: its nearest existing ancestor resolves inside one,
// and no dangling symlink on the way points outside (a 404 there would
// tell whether the outside target exists).
func (r *Registry) missingInside(p string) bool {
	for q := p; ; q = filepath.Dir(q) {
		if fi, err := os.Lstat(q); err == nil {
			if fi.Mode()&os.ModeSymlink == 0 {
				real, err := filepath.EvalSymlinks(q)
				return err == nil && within(r.roots, real)
			}
			t, err := os.Readlink(q)
			if err != nil {
				return false
			}
			if !filepath.IsAbs(t) {
				t = filepath.Join(filepath.Dir(q), t)
			}
			if t = filepath.Clean(t); !within(r.roots, t) && !within(r.given, t) {
				return false
			}
		}
		if q == filepath.Dir(q) {
			return false
		}
	}
}

// maxPathBytes is the longest path a load names (Linux's PATH_MAX).
const maxPathBytes = 4096

// within reports whether path p lies inside one of roots.
func within(roots []string, p string) bool {
	for _, root := range roots {
		if rel, err := filepath.Rel(root, p); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return true
		}
	}
	return false
}
