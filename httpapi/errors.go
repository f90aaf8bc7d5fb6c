package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// apiError is an error with an HTTP status and a type for the envelope.
type apiError struct {
	Status int
	Type   string
	Reason string
}

func (e *apiError) Error() string { return e.Reason }

func badRequest(format string, a ...any) error {
	return &apiError{400, "bad_request", fmt.Sprintf(format, a...)}
}

func notFound(name string) error {
	return &apiError{404, "index_not_found", fmt.Sprintf("no index named %q", name)}
}

// errStatus maps an error to an HTTP status and type, in one place.
func errStatus(err error) (int, string) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae.Status, ae.Type
	case errors.Is(err, engine.ErrNotServable):
		return 422, "index_not_servable"
	case errors.Is(err, engine.ErrBadRequest), errors.Is(err, engine.ErrBudget):
		return 400, "bad_request"
	case errors.Is(err, engine.ErrBadQuery):
		return 400, "bad_query"
	case errors.Is(err, engine.ErrBadStorageOption), errors.Is(err, engine.ErrBadOption):
		return 400, "bad_request"
	case errors.Is(err, engine.ErrFormat), errors.Is(err, engine.ErrVectors):
		return 422, "bad_index_file"
	case errors.Is(err, engine.ErrDeadline):
		return 504, "search_timeout"
	case errors.Is(err, context.Canceled): // a read given up: the client went away
		return 499, "client_closed_request"
	case errors.Is(err, errFileChanged):
		return 503, "index_file_changed"
	case errors.Is(err, engine.ErrCorrupt): // found by a query where the load did not look
		return 422, "corrupt_index"
	case errors.Is(err, engine.ErrObjectStore): // the object store did not answer, or refused
		return 502, "object_storage_error"
	case errors.Is(err, fs.ErrNotExist), strings.Contains(err.Error(), "no such file"):
		return 404, "file_not_found"
	}
	return 500, "internal_error"
}

// isFileChanged reports whether err says the index's file changed under it.
func isFileChanged(err error) bool {
	return errors.Is(err, errFileChanged)
}

// errFileChanged is what storage reports when a served file changed.
var errFileChanged = engine.ErrFileChanged

// changeDetail is the numbers behind a file change (device:inode, times):
// the server's log keeps them, the client's answer says it in words.
func changeDetail(err error) string { return engine.ChangeDetail(err) }
