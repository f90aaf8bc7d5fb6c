package faissfmt

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestJunkNeverEchoed: whatever a file's first bytes are, or the bytes
// where a nested index's fourcc belongs, the error names a fourcc only
// when FAISS writes it (the tables), never echoing anything else of the
// file, and keeps its kind (ErrFormat, ErrUnsupported).
func TestJunkNeverEchoed(t *testing.T) {
	ex := readFixture(t, "worked_example")
	for _, junk := range []string{"# fa", "root", "JUNK", "{\"a\"", "\x00\x01\x02\x03", "\xff\xfe\xfd\xfc", "PK\x03\x04", "IwXX"} {
		for _, at := range []int{0, 37} {
			b := bytes.Clone(ex)
			copy(b[at:], junk)
			_, err := open(b)
			require.Error(t, err, "%q at %d", junk, at)
			assert.True(t, errors.Is(err, ErrUnsupported) && errors.Is(err, ErrFormat), "%v", err)
			var fe *FormatError
			require.True(t, errors.As(err, &fe))
			assert.NotContains(t, err.Error(), junk, "at byte %d", at)
			assert.NotContains(t, err.Error(), "0x", "no hex of the bytes either")
		}
	}
	for fcc, name := range otherTypes {
		b := bytes.Clone(ex)
		copy(b, fcc)
		_, err := open(b)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `unsupported FAISS index type "`+fcc+`" at byte 0 (`+name+`: not an HNSW index)`)
	}
}
