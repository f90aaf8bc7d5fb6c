package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// jsonContentType is shared by every response: net/http only reads header
// values, and one slice saves the three allocations of c.Data (its render
// value, the header's slice and the MIME key's canonical form) per search.
var jsonContentType = []string{"application/json; charset=utf-8"}

// sendJSON sends obj as JSON with status, ending in a newline as every
// body the API writes does (a shell prompt after `curl` starts on its own
// line, as after OpenSearch's).
func sendJSON(c *gin.Context, status int, obj any) {
	b, err := json.Marshal(obj)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"type":"internal_error","reason":"internal error"},"status":500}`)
	}
	c.Writer.Header()["Content-Type"] = jsonContentType
	c.Status(status)
	c.Writer.Write(append(b, '\n'))
}

// writeJSON sends b, a JSON document ending in a newline, with status 200.
func writeJSON(c *gin.Context, b []byte) {
	c.Writer.Header()["Content-Type"] = jsonContentType
	c.Status(http.StatusOK)
	c.Writer.Write(b)
}

func errorBody(status int, typ, reason string) gin.H {
	return gin.H{"error": gin.H{"type": typ, "reason": reason}, "status": status}
}

// fail writes the one error envelope every failure uses.
func (s *Server) fail(c *gin.Context, err error) {
	status, typ := errStatus(err)
	setRetryAfter(c.Writer, err)
	c.Abort()
	reason := err.Error()
	if r, ok := engine.ObjectStoreReason(err); ok && status == http.StatusBadGateway {
		// The client reads what failed in a sentence; the log keeps the
		// request and the SDK's error.
		s.log.Warn("object store request failed", "path", c.Request.URL.Path, "error", err)
		reason = r
	}
	sendJSON(c, status, errorBody(status, typ, shortReason(reason)))
}

// maxReason is the longest error reason sent: encoding/json quotes the
// offending text, which a body can make megabytes long.
const maxReason = 1024

// shortReason cuts a reason longer than maxReason, saying how long it was.
func shortReason(r string) string {
	if len(r) <= maxReason {
		return r
	}
	return strings.ToValidUTF8(r[:maxReason], "") + fmt.Sprintf("… (%d bytes in all)", len(r))
}

var respPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// appendTook writes a duration as `took` is spelled everywhere: fractional
// milliseconds.
func appendTook(b []byte, took time.Duration) []byte {
	return strconv.AppendFloat(b, float64(took.Microseconds())/1000, 'g', -1, 64)
}

// appendHits writes [{"id","distance","score"}…] directly (encoding/json's
// reflection over maps cost more than the search of a small index), the
// one spelling of hits in _search and _msearch. Distances are the shortest
// text that reads back as the same float32.
func appendHits(b []byte, hits []Hit) []byte {
	b = append(b, '[')
	for i, h := range hits {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(appendHitFields(append(b, '{'), h), '}')
	}
	return append(b, ']')
}

// appendHitFields writes a hit's "id", "distance" and "score" fields.
func appendHitFields(b []byte, h Hit) []byte {
	b = append(b, `"id":`...)
	b = strconv.AppendInt(b, h.ID, 10)
	b = append(b, `,"distance":`...)
	b = strconv.AppendFloat(b, h.Distance, 'g', -1, 32)
	b = append(b, `,"score":`...)
	return strconv.AppendFloat(b, h.Score, 'g', -1, 64)
}

// appendResult writes one index's answer to one query after its "took":
// "hits", a radial answer's "truncated" and, when asked, "profile" — the
// one spelling of _search's answer and of each _msearch response.
func appendResult(b []byte, hits []Hit, prof *Profile, radial, profile bool) ([]byte, error) {
	b = appendHits(append(b, `"hits":`...), hits)
	if radial {
		b = appendTruncated(b, prof.Truncated)
	}
	if profile {
		pj, err := json.Marshal(*prof) // a copy: prof itself stays on the caller's stack
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"profile":`...), pj...)
	}
	return b, nil
}

// appendTruncated writes a radial answer's flag: whether the cap
// (engine.DefaultMaxRadialResults) cut its hits.
func appendTruncated(b []byte, t bool) []byte {
	return strconv.AppendBool(append(b, `,"truncated":`...), t)
}

// hitBytes is about what one hit takes as JSON (id, distance, score).
const hitBytes = 64
