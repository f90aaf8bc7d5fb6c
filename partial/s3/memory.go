package s3

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// DownloadChunk is the size of one GET of a whole-object download.
const DownloadChunk = 8 << 20

// OpenMemory downloads the object url names whole (mode full): ranged GETs
// of DownloadChunk bytes in parallel, every one pinned to the ETag seen at
// open and checked for its length, so the copy is of one version and of
// the size announced. The byte at offset align lands on a cache-line
// (64-byte) boundary, as partial.OpenMemoryAligned places it. A nil
// Client is as for Open. The download gives up when ctx ends.
func (c *Client) OpenMemory(ctx context.Context, url string, align int64, opts Options) (*partial.Memory, error) {
	o, err := c.Open(ctx, url, opts)
	if err != nil {
		return nil, err
	}
	defer o.Close()
	b, err := o.ReadAll(ctx, align)
	if err != nil {
		return nil, err
	}
	return partial.NewMemory(url, b), nil
}

// ReadAll returns the whole object, read in parallel chunks, with the byte
// at offset align on a 64-byte boundary in memory; it gives up when ctx
// ends.
func (o *Object) ReadAll(ctx context.Context, align int64) ([]byte, error) {
	const line = 64
	buf := make([]byte, o.size+line)
	pad := int64(0)
	if o.size > 0 {
		addr := int64(uintptr(unsafe.Pointer(&buf[0])) % line)
		pad = ((line-(addr+align)%line)%line + line) % line
	}
	b := buf[pad : pad+o.size : pad+o.size]
	var reqs []partial.ReadReq
	for off := int64(0); off < o.size; off += DownloadChunk {
		reqs = append(reqs, partial.ReadReq{Off: off, Buf: b[off:min(o.size, off+DownloadChunk)]})
	}
	// Chunks are adjacent: ReadBatch would coalesce them, so each goes as
	// its own batch of one, all at once.
	errs := make(chan error, len(reqs))
	for i := range reqs {
		go func(q partial.ReadReq) {
			_, err := o.ReadAtContext(ctx, q.Buf, q.Off, nil)
			errs <- err
		}(reqs[i])
	}
	var first error
	for range reqs {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return nil, fmt.Errorf("%s: download: %w", o.name, first)
	}
	return b, nil
}
