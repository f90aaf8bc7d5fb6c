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
	ErrFormat      = errors.New("bad FAISS file")
	ErrTruncated   = errors.New("file truncated")
	ErrUnsupported = errors.New("unsupported index type")
	ErrInvalid     = errors.New("invalid field value")
)

// FormatError describes one problem in a FAISS file: which field, at which
// byte offset, and a sentence a person understands.
type FormatError struct {
	Field string // e.g. "hnsw.levels", "IxMp.id_map", "header.d"
	Off   int64  // byte offset in the file where the field (or element) starts
	Msg   string // full human description, including what was expected
	Kind  error  // ErrTruncated, ErrUnsupported or ErrInvalid
}

// Error is Msg alone: it is read by people (a REST client, a command's
// user), to whom the package's name says nothing.
func (e *FormatError) Error() string { return e.Msg }

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
	// A zstd frame (28 b5 2f fd) or skippable frame (5? 2a 4d 18) is a
	// compressed file read through the wrong backend, or a truncated one.
	if len(fourcc) == 4 && (fourcc == "\x28\xb5\x2f\xfd" || fourcc[0]&0xf0 == 0x50 && fourcc[1:] == "\x2a\x4d\x18") {
		return &FormatError{Field: "fourcc", Off: off, Kind: ErrUnsupported, Msg: fmt.Sprintf(
			"zstd-compressed data, not a FAISS index: open it with backend zstd (--backend zstd); "+
				"if that fails too, the file is truncated or plain zstd: decompress it (a zstd frame at byte %d)", off)}
	}
	// The bytes are named only when they are a fourcc FAISS writes (a
	// fixed table): anything else of the file is never echoed, whatever
	// it holds (a text file's first line, a secret).
	name, known := typeNames[fourcc]
	if !known {
		name, known = otherTypes[fourcc]
	}
	var msg string
	switch {
	case !known && off == 0:
		msg = "not a FAISS index file: its first 4 bytes are no FAISS index type this program knows"
	case !known:
		msg = fmt.Sprintf("unknown FAISS index type at byte %d (the file is corrupt)", off)
	default:
		msg = fmt.Sprintf("unsupported FAISS index type %q at byte %d", fourcc, off)
		if why == "" {
			why = name + ": not an HNSW index"
		}
	}
	if why != "" {
		msg += " (" + why + ")"
	}
	return &FormatError{Field: "fourcc", Off: off, Msg: msg, Kind: ErrUnsupported}
}

// otherTypes names the fourccs FAISS writes for the index types this
// package does not read (typeNames has those it reads).
var otherTypes = map[string]string{
	"IwFl": "IndexIVFFlat", "IwFd": "IndexIVFFlatDedup", "IwP2": "IndexIVFFlatPanorama",
	"IwSq": "IndexIVFScalarQuantizer", "IvSQ": "IndexIVFScalarQuantizer",
	"IwPQ": "IndexIVFPQ", "IvPQ": "IndexIVFPQ", "IwQR": "IndexIVFPQR", "IvQR": "IndexIVFPQR",
	"IwPf": "IndexIVFPQFastScan", "IwSh": "IndexIVFSpectralHash",
	"IwRQ": "IndexIVFResidualQuantizer", "IwLS": "IndexIVFLocalSearchQuantizer",
	"IxPq": "IndexPQ", "IPfs": "IndexPQFastScan", "IxRq": "IndexResidualQuantizer",
	"IxLS": "IndexLocalSearchQuantizer", "IxPR": "IndexProductResidualQuantizer",
	"IxPL": "IndexProductLocalSearchQuantizer", "ImRQ": "ResidualCoarseQuantizer",
	"Imiq": "MultiIndexQuantizer", "IxPT": "IndexPreTransform", "IxRF": "IndexRefine",
	"IxLa": "IndexLattice", "IxHe": "IndexLSH", "Ix2L": "Index2Layer",
	"IHNp": "IndexHNSWPQ", "IHN2": "IndexHNSW2Level", "INSf": "IndexNSGFlat",
	"IBwF": "IndexBinaryIVF", "IBFf": "IndexBinaryFromFloat", "IBHh": "IndexBinaryHash",
	"IBHm": "IndexBinaryMultiHash",
}
