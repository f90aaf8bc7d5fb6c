package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// apiError is an error with an HTTP status and a type for the envelope.
// The constructors below name the status; errStatus maps every other
// error (the engine's kinds) to one.
type apiError struct {
	Status int
	Type   string
	Reason string
}

func (e *apiError) Error() string { return e.Reason }

// statusClientClosedRequest is nginx's status for a request whose client
// went away before the answer (net/http has no name for it).
const statusClientClosedRequest = 499

// badRequest is a 400 bad_request with a formatted reason.
func badRequest(format string, a ...any) error {
	return errBadRequest("bad_request", fmt.Sprintf(format, a...))
}

func errBadRequest(typ, reason string) *apiError {
	return &apiError{http.StatusBadRequest, typ, reason}
}

func errUnauthorized(reason string) *apiError {
	return &apiError{http.StatusUnauthorized, "unauthorized", reason}
}

// errForbiddenPath refuses a path outside what the server may serve.
func errForbiddenPath(reason string) *apiError {
	return &apiError{http.StatusForbidden, "forbidden_path", reason}
}

func errNotFound(typ, reason string) *apiError {
	return &apiError{http.StatusNotFound, typ, reason}
}

// errIndexNotFound answers for a name no index is served under.
func errIndexNotFound(name string) *apiError {
	return errNotFound("index_not_found", fmt.Sprintf("no index named %q", name))
}

// errAliasesNotFound answers for an alias an index does not have.
func errAliasesNotFound(reason string) *apiError {
	return errNotFound("aliases_not_found", reason)
}

// errInvalidAliasName refuses an alias name (OpenSearch's type): one an
// index may not have, or an index's.
func errInvalidAliasName(reason string) *apiError {
	return errBadRequest("invalid_alias_name", reason)
}

func errMethodNotAllowed(reason string) *apiError {
	return &apiError{http.StatusMethodNotAllowed, "method_not_allowed", reason}
}

func errRequestTimeout(reason string) *apiError {
	return &apiError{http.StatusRequestTimeout, "request_timeout", reason}
}

func errConflict(typ, reason string) *apiError {
	return &apiError{http.StatusConflict, typ, reason}
}

func errTooLarge(typ, reason string) *apiError {
	return &apiError{http.StatusRequestEntityTooLarge, typ, reason}
}

func errUnprocessable(typ, reason string) *apiError {
	return &apiError{http.StatusUnprocessableEntity, typ, reason}
}

// errTooMany refuses a request the server has no room for now.
func errTooMany(typ, reason string) *apiError {
	return &apiError{http.StatusTooManyRequests, typ, reason}
}

func errClientClosed() *apiError {
	return &apiError{statusClientClosedRequest, "client_closed_request", "the client went away"}
}

// errInternal says nothing of what failed: the log does.
func errInternal() *apiError {
	return &apiError{http.StatusInternalServerError, "internal_error", "internal error"}
}

func errUnavailable(typ, reason string) *apiError {
	return &apiError{http.StatusServiceUnavailable, typ, reason}
}

func errGatewayTimeout(typ, reason string) *apiError {
	return &apiError{http.StatusGatewayTimeout, typ, reason}
}

// errStatus maps an error to an HTTP status and type, in one place: an
// apiError says its own, the engine's kinds are mapped here, and anything
// else is a 500.
func errStatus(err error) (int, string) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae.Status, ae.Type
	case errors.Is(err, engine.ErrNotServable):
		return http.StatusUnprocessableEntity, "index_not_servable"
	case errors.Is(err, engine.ErrBadRequest), errors.Is(err, engine.ErrBudget):
		return http.StatusBadRequest, "bad_request"
	case errors.Is(err, engine.ErrBadQuery):
		return http.StatusBadRequest, "bad_query"
	case errors.Is(err, engine.ErrBadStorageOption), errors.Is(err, engine.ErrBadOption):
		return http.StatusBadRequest, "bad_request"
	case errors.Is(err, engine.ErrFormat), errors.Is(err, engine.ErrVectors):
		return http.StatusUnprocessableEntity, "bad_index_file"
	case errors.Is(err, engine.ErrDeadline):
		return http.StatusGatewayTimeout, "search_timeout"
	case errors.Is(err, context.Canceled): // a read given up: the client went away
		return statusClientClosedRequest, "client_closed_request"
	case errors.Is(err, errFileChanged):
		return http.StatusServiceUnavailable, "index_file_changed"
	case errors.Is(err, engine.ErrCorrupt): // found by a query where the load did not look
		return http.StatusUnprocessableEntity, "corrupt_index"
	case errors.Is(err, engine.ErrObjectStore): // the object store did not answer, or refused
		return http.StatusBadGateway, "object_storage_error"
	case errors.Is(err, fs.ErrNotExist):
		return http.StatusNotFound, "file_not_found"
	}
	return http.StatusInternalServerError, "internal_error"
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
