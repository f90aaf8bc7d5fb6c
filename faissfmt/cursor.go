package faissfmt

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// cursor reads a FAISS stream field by field from an io.ReaderAt. It reads
// exactly the bytes asked for and nothing ahead of them, so opening an index
// never touches the large sections it only records (see the I/O-trace test).
type cursor struct {
	r       io.ReaderAt
	off     int64 // next byte to read
	end     int64 // first byte past the FAISS stream
	scratch [64]byte
	chunk   []byte // reused buffer for streamed arrays
	window  int64  // OpenOptions.Window
}

// span reads the n bytes at the cursor (fewer if the stream ends first) in
// one read when n is within the cursor's window, and serves the cursor's
// reads inside them from memory until unspan; a read that fails leaves the
// reads to go to the reader as before (they report the problem).
func (c *cursor) span(n int64) {
	n = min(n, c.left())
	if n <= 0 || n > c.window {
		return
	}
	b := make([]byte, n)
	if _, err := c.r.ReadAt(b, c.off); err == nil {
		c.r = &spanReader{r: c.r, off: c.off, b: b}
	}
}

// unspan ends span's reads from memory.
func (c *cursor) unspan() {
	if s, ok := c.r.(*spanReader); ok {
		c.r = s.r
	}
}

// spanReader serves the reads inside b (the bytes at off) from memory,
// others from r.
type spanReader struct {
	r   io.ReaderAt
	off int64
	b   []byte
}

func (s *spanReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= s.off && off+int64(len(p)) <= s.off+int64(len(s.b)) {
		return copy(p, s.b[off-s.off:]), nil
	}
	return s.r.ReadAt(p, off)
}

func (c *cursor) left() int64 { return c.end - c.off }

// need fails with a truncation error unless n bytes remain.
func (c *cursor) need(field string, n int64) error {
	if n < 0 || n > c.left() {
		return truncated(field, c.off, n, c.left())
	}
	return nil
}

// read returns the next n (≤ 64) bytes; the slice is valid until the next call.
func (c *cursor) read(field string, n int) ([]byte, error) {
	if err := c.need(field, int64(n)); err != nil {
		return nil, err
	}
	b := c.scratch[:n]
	if err := readFull(c.r, b, c.off, field); err != nil {
		return nil, err
	}
	c.off += int64(n)
	return b, nil
}

// readFull is ReadAt that also treats a short read with io.EOF as an error
// naming the field and offset.
func readFull(r io.ReaderAt, b []byte, off int64, field string) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("reading %s (%d bytes at offset %d): %w", field, len(b), off, err)
}

func (c *cursor) u64(field string) (uint64, error) {
	b, err := c.read(field, 8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (c *cursor) f32(field string) (float32, error) {
	b, err := c.read(field, 4)
	if err != nil {
		return 0, err
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(b)), nil
}

func (c *cursor) fourcc(field string) (string, error) {
	b, err := c.read(field, 4)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// vec reads the u64 element count of a vec<T> and checks that count·elem
// bytes remain before anything is allocated or skipped. It returns the
// Section of the data (which starts after the count) and advances past it
// only when skip is true.
func (c *cursor) vec(field string, elem int, skip bool) (Section, error) {
	n, err := c.u64(field + " count")
	if err != nil {
		return Section{}, err
	}
	if n > uint64(c.left())/uint64(elem) {
		need := fmt.Sprintf("%d", n*uint64(elem))
		if n > math.MaxInt64/uint64(elem) {
			need = fmt.Sprintf("%d×%d", n, elem)
		}
		return Section{}, &FormatError{Field: field, Off: c.off, Kind: ErrTruncated,
			Msg: fmt.Sprintf("file truncated: %s needs %s bytes at offset %d, %d left", field, need, c.off, c.left())}
	}
	s := Section{Name: field, Offset: c.off, Len: int64(n) * int64(elem), Elem: elem}
	if skip {
		c.off += s.Len
	}
	return s, nil
}

// stream calls fn on consecutive chunks of the section s (which must start
// at the cursor), each a whole number of elements, and leaves the cursor
// after it. The chunk buffer is reused between calls, and no larger than
// the largest section streamed needs: a small index's arrays take a few
// KiB, and zeroing a full chunk cost more than parsing them.
func (c *cursor) stream(s Section, fn func(first int64, b []byte) error) error {
	const chunkBytes = 256 << 10
	per := chunkBytes / s.Elem
	if first := min(int64(per*s.Elem), s.Len); int64(cap(c.chunk)) < first {
		c.chunk = make([]byte, first)
	}
	for done := int64(0); done < s.Len; {
		n := min(int64(per*s.Elem), s.Len-done)
		b := c.chunk[:n]
		if err := readFull(c.r, b, s.Offset+done, s.Name); err != nil {
			return err
		}
		if err := fn(done/int64(s.Elem), b); err != nil {
			return err
		}
		done += n
	}
	c.off = s.Offset + s.Len
	return nil
}
