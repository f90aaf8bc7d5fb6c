package offheap

// Buf is a buffer from Alloc.
type Buf struct {
	B    []byte
	free func() error
}

// Mapped reports whether the buffer is a mapping of its own (outside the Go
// heap), whose pages Discard may give back.
func (b *Buf) Mapped() bool { return b.free != nil }

// Free releases the buffer. It is safe on the zero Buf.
func (b *Buf) Free() error {
	if b.free == nil {
		return nil
	}
	f := b.free
	b.free, b.B = nil, nil
	return f()
}
