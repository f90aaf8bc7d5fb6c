package engine

import (
	"context"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/hnswsearch"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/diskcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
	"github.com/faiss-sidecar/faiss-sidecar/rerank"
)

// The error kinds, limits and helpers of the lower packages that a front
// end needs, re-exported so that front ends depend on engine alone. The
// errors are the very same values, so errors.Is matches either name.

// Error kinds found in the errors of Open, Plan, Query and Search.
var (
	ErrBadQuery         = hnswsearch.ErrBadQuery  // a query value out of range
	ErrBadOption        = hnswsearch.ErrBadOption // a search option out of range
	ErrDeadline         = hnswsearch.ErrDeadline  // a search stopped at its deadline
	ErrCorrupt          = hnswsearch.ErrCorrupt   // the index file contradicts itself
	ErrBudget           = hnswsearch.ErrBudget    // the memory budget is too small for the index
	ErrBadStorageOption = partial.ErrBadOption    // a storage option or object URL is bad
	ErrFileChanged      = partial.ErrFileChanged  // the file changed since it was opened
	ErrFormat           = faissfmt.ErrFormat      // not a FAISS file this reads
	ErrVectors          = rerank.ErrVectors       // a bad vector file
	ErrObjectStore      = s3.ErrRequestFailed     // the object store failed or refused for good
)

// S3ErrorKinds lists the kinds of S3Metrics.Errors, in a fixed order.
var S3ErrorKinds = s3.ErrorKinds

// Limits of a query.
const (
	MaxK            = hnswsearch.MaxK            // the largest k
	MaxEfSearch     = hnswsearch.MaxEfSearch     // the largest ef_search
	MaxRangeResults = hnswsearch.MaxRangeResults // the most hits a radial query returns
	// DefaultCacheDirBytes is a disk cache directory's budget when none is given.
	DefaultCacheDirBytes = diskcache.DefaultBudget
)

// S3Metrics is the process's S3 request counters, summed over every object.
type S3Metrics = s3.Metrics

// ReadS3Metrics reads the process's S3 request counters.
func ReadS3Metrics() S3Metrics { return s3.ReadMetrics() }

// IsRemote reports whether path names an object in an object store
// (s3://) rather than a local file.
func IsRemote(path string) bool { return storage.IsRemote(path) }

// ParseS3URL splits an s3:// URL into bucket and key; its errors are
// ErrBadStorageOption.
func ParseS3URL(u string) (bucket, key string, err error) { return s3.ParseURL(u) }

// CheckS3Bucket checks a bucket name (3 to 63 ASCII letters, digits, dots,
// hyphens and underscores, a letter or digit at each end).
func CheckS3Bucket(b string) error { return s3.CheckBucket(b) }

// ObjectStoreReason is, for an error of an object-store request that
// failed for good, a sentence for users naming the object and what
// happened; ok is false for other errors.
func ObjectStoreReason(err error) (reason string, ok bool) { return s3.Reason(err) }

// ChangeDetail says what changed, for an error of kind ErrFileChanged.
func ChangeDetail(err error) string { return partial.ChangeDetail(err) }

// CacheDirFiles is the most descriptors the process's disk cache
// directories hold open at once (their block files).
func CacheDirFiles() int { return diskcache.OpenFiles() }

// Neighbor is one hit of CheckSearch: the stored id and raw distance.
type Neighbor struct {
	ID       int64
	Distance float32
	Label    int32 // the storage row, −1 for a fill
}

// CheckSearch runs a plain k-NN query (vec for a float index, code for a
// binary one) with the index's own options and no rerank, appending its
// hits to dst; −1 fills included, so two handles of the same file give
// equal slices. It is for comparing handles (a switch's check queries),
// not for serving.
func (x *Index) CheckSearch(ctx context.Context, vec []float32, code []byte, k int, dst []Neighbor) ([]Neighbor, error) {
	res, _, err := x.search(Query{Vector: vec, Code: code}, hnswsearch.Params{K: k, Ctx: ctx}, nil)
	for _, r := range res {
		dst = append(dst, Neighbor{ID: r.ID, Distance: r.Distance, Label: r.Label})
	}
	return dst, err
}
