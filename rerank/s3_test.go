package rerank

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3/s3test"
)

// countingStorage counts the calls a Store makes on its storage.
type countingStorage struct {
	partial.Storage
	readAts, batches atomic.Int64
}

func (c *countingStorage) ReadAtContext(ctx context.Context, p []byte, off int64, t *partial.Tally) (int, error) {
	c.readAts.Add(1)
	return c.Storage.ReadAtContext(ctx, p, off, t)
}

func (c *countingStorage) ReadBatch(ctx context.Context, reqs []partial.ReadReq) error {
	c.batches.Add(1)
	return c.Storage.(partial.BatchReader).ReadBatch(ctx, reqs)
}

// objects opens the tests' objects, as a program's one client does.
var objects = s3.NewClient(s3.Options{})

// openObject is a Store over the s3:// object u, opened as the engine
// opens one.
func openObject(t *testing.T, u string) *Store {
	o, err := objects.Open(context.Background(), u, s3.Options{})
	require.NoError(t, err)
	s, err := OpenStorage(context.Background(), o, u)
	require.NoError(t, err)
	return s
}

// TestBatchFromS3: vector files in S3 (a FAISS file's vectors in place, a
// .vec) are read from their object with strategy batch, bit for bit
// FAISS's stored vectors; a shortlist is one ReadBatch on the object
// (one round of parallel GETs, as many as FetchStats says), and rescoring
// gives the local file's answer.
func TestBatchFromS3(t *testing.T) {
	bucket := s3test.Bucket(t)
	src := filepath.Join(fixtures, "hnsw_flat_large.faiss") // 3000 × 64
	_, want := flatVectors(t, src)
	vec := writeVecFile(t, want)
	labels := []int32{2999, 0, 17, 18, 19, 1500, 0, 2998, 640, 641, 2200}
	for i := int32(0); i < 150; i++ {
		labels = append(labels, (i*7919)%3000)
	}
	local, err := Open(src, "pread")
	require.NoError(t, err)
	defer local.Close()
	for _, path := range []string{src, vec} {
		u := s3test.PutFile(t, bucket, "v/"+filepath.Base(path), path)
		s := openObject(t, u)
		assert.Equal(t, StrategyBatch, s.Strategy())
		require.NoError(t, s.Check(64, 3000))
		got := make([]float32, len(labels)*64)
		require.NoError(t, s.Fetch(labels, got, nil))
		for i, lb := range labels {
			for j := range 64 {
				require.Equal(t, math.Float32bits(want[lb][j]), math.Float32bits(got[i*64+j]), "%s label %d component %d", path, lb, j)
			}
		}
		require.NoError(t, s.CheckFile(context.Background()))
		require.NoError(t, s.Close())

		o, err := objects.Open(context.Background(), u, s3.Options{})
		require.NoError(t, err)
		l, err := ReadLayout(partial.ReaderAt(context.Background(), o), o.Size(), u)
		require.NoError(t, err)
		cs := &countingStorage{Storage: o}
		bs := NewBatch(cs, l)
		for qi := range 3 {
			q := want[qi*1000]
			before := o.Requests().GETs
			var st FetchStats
			hits, err := bs.Rescore(q, labels, 10, false, &st)
			require.NoError(t, err)
			assert.Equal(t, int64(qi+1), cs.batches.Load(), "one batch a shortlist")
			assert.Zero(t, cs.readAts.Load(), "no read outside the batch")
			assert.Equal(t, 1, st.Batches)
			assert.Equal(t, int64(st.Reads), o.Requests().GETs-before, "Reads counts the GETs")
			assert.Less(t, st.Reads, len(labels), "vectors in one block or adjacent ones share a GET")
			lh, err := local.Rescore(q, labels, 10, false, nil)
			require.NoError(t, err)
			assert.Equal(t, lh, hits)
		}
		require.NoError(t, bs.Close())
		_, err = o.ReadAtContext(context.Background(), make([]byte, 1), 0, nil)
		require.NoError(t, err, "a Store from NewBatch leaves its storage open")
		o.Close()
	}
}

// TestBatchObjectReplaced: an object replaced under a Store fails the next
// shortlist with ErrFileChanged, and CheckFile reports it.
func TestBatchObjectReplaced(t *testing.T) {
	bucket := s3test.Bucket(t)
	_, want := flatVectors(t, filepath.Join(fixtures, "hnsw_flat_large.faiss"))
	vec := writeVecFile(t, want)
	u := s3test.PutFile(t, bucket, "v.vec", vec)
	s := openObject(t, u)
	defer s.Close()
	got := make([]float32, 64)
	require.NoError(t, s.Fetch([]int32{5}, got, nil))
	b, err := os.ReadFile(vec)
	require.NoError(t, err)
	for i := 4096; i < len(b); i++ {
		b[i] ^= 0x5a
	}
	s3test.Put(t, bucket, "v.vec", b)
	err = s.Fetch([]int32{2000}, got, nil)
	require.ErrorIs(t, err, partial.ErrFileChanged)
	assert.Contains(t, err.Error(), u)
	require.ErrorIs(t, s.CheckFile(context.Background()), partial.ErrFileChanged)
}

// TestOpenStorageOwnsIt: a Store from OpenStorage closes its storage, and
// OpenStorage closes it when the bytes are no vector file, naming the file.
func TestOpenStorageOwnsIt(t *testing.T) {
	_, want := flatVectors(t, filepath.Join(fixtures, "hnsw_flat_large.faiss"))
	b, err := os.ReadFile(writeVecFile(t, want))
	require.NoError(t, err)
	m := partial.NewMemory("v.vec", b)
	s, err := OpenStorage(context.Background(), m, "s3://b/v.vec")
	require.NoError(t, err)
	assert.Equal(t, StrategyBatch, s.Strategy())
	require.NoError(t, s.Check(64, 3000))
	require.NoError(t, s.Close())
	_, err = m.ReadAtContext(context.Background(), make([]byte, 1), 0, nil)
	require.ErrorIs(t, err, partial.ErrClosed, "the Store closed its storage")

	junk := partial.NewMemory("junk", []byte("not a vector file at all"))
	_, err = OpenStorage(context.Background(), junk, "s3://b/junk")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "s3://b/junk")
	_, err = junk.ReadAtContext(context.Background(), make([]byte, 1), 0, nil)
	require.ErrorIs(t, err, partial.ErrClosed, "a failed OpenStorage closes its storage")
}
