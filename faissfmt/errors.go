package faissfmt

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every *FormatError wraps ErrFormat and exactly one of
// ErrTruncated, ErrUnsupported or ErrInvalid, so callers can test the kind
// with errors.Is. Failures of the underlying io.ReaderAt are not format
// errors: they are returned wrapped with the field and offset being read.
var (
	ErrFormat      = errors.New("faissfmt: bad FAISS file")
	ErrTruncated   = errors.New("faissfmt: file truncated")
	ErrUnsupported = errors.New("faissfmt: unsupported index type")
	ErrInvalid     = errors.New("faissfmt: invalid field value")
)

// FormatError describes one problem in a FAISS file: which field, at which
// byte offset, and a sentence a person understands.
type FormatError struct {
	Field string // e.g. "hnsw.levels", "IxMp.id_map", "header.d"
	Off   int64  // byte offset in the file where the field (or element) starts
	Msg   string // full human description, including what was expected
	Kind  error  // ErrTruncated, ErrUnsupported or ErrInvalid
}

func (e *FormatError) Error() string { return "faissfmt: " + e.Msg }

// Unwrap reports both ErrFormat and the specific kind.
func (e *FormatError) Unwrap() []error { return []error{e.Kind, ErrFormat} }

func invalidf(field string, off int64, format string, a ...any) error {
	return &FormatError{Field: field, Off: off, Msg: fmt.Sprintf(format, a...), Kind: ErrInvalid}
}

func truncated(field string, off, need, left int64) error {
	return &FormatError{Field: field, Off: off, Kind: ErrTruncated,
		Msg: fmt.Sprintf("file truncated: %s needs %d bytes at offset %d, %d left", field, need, off, left)}
}

func unsupported(fourcc string, off int64, why string) error {
	msg := fmt.Sprintf("unsupported FAISS index type %s at byte %d", quoteFourCC(fourcc), off)
	// A zstd frame (28 b5 2f fd) or skippable frame (5? 2a 4d 18) is a
	// compressed file read through the wrong backend, or a truncated one.
	if len(fourcc) == 4 && (fourcc == "\x28\xb5\x2f\xfd" || fourcc[0]&0xf0 == 0x50 && fourcc[1:] == "\x2a\x4d\x18") {
		why = "zstd-compressed data, not a FAISS index: open it with backend zstd (--backend zstd); " +
			"if that fails too, the file is truncated or plain zstd: decompress it"
	}
	if why != "" {
		msg += " (" + why + ")"
	}
	return &FormatError{Field: "fourcc", Off: off, Msg: msg, Kind: ErrUnsupported}
}

// quoteFourCC prints a fourcc as "IxMp" when it is printable ASCII and as
// hex bytes otherwise, so garbage never reaches a terminal.
func quoteFourCC(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return fmt.Sprintf("0x%x", []byte(s))
		}
	}
	return fmt.Sprintf("%q", s)
}
