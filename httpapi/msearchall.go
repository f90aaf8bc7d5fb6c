package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

// POST /_msearch is OpenSearch's multi-search: NDJSON, a header line
// naming a search's targets ({"index": "a,b"} or a list), then its body
// line (a _search body), for each search. The searches share the
// request's search slots and work, and are answered in order, each with
// its status.

// msearchLines is the body of POST /_msearch, decoded.
type msearchLines struct {
	heads []msearchHead
	exprs [][]targetExpr // each header's targets, parsed
	reqs  []SearchRequest
}

// msearchHead is a header line.
type msearchHead struct {
	Index targetList `json:"index"`
}

// targetList is a header's "index": a target list, or a list of them
// (OpenSearch takes both), joined with commas.
type targetList string

// UnmarshalJSON implements json.Unmarshaler.
func (t *targetList) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return errors.New("index is null: give an index, alias or pattern, or a list of them")
	}
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*t = targetList(one)
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("index must be a string or a list of strings")
	}
	*t = targetList(strings.Join(many, ","))
	return nil
}

// parseMsearch decodes an NDJSON _msearch body into r, each line as
// strictly as a _search body; a last line may lack its newline. A line
// that fails fails the request, naming it.
func (s *Server) parseMsearch(raw []byte, r *msearchLines) error {
	raw = bytes.TrimRight(raw, " \t\r\n")
	if len(raw) == 0 {
		return badRequest("request body is empty; NDJSON header and body lines expected")
	}
	for n := 1; len(raw) > 0; n += 2 {
		head, rest, _ := bytes.Cut(raw, []byte{'\n'})
		line, rest, found := bytes.Cut(rest, []byte{'\n'})
		raw = rest
		if len(bytes.TrimSpace(head)) == 0 {
			return badRequest("_msearch line %d is empty: each search is a header line, then a body line", n)
		}
		if !found && len(line) == 0 {
			return badRequest("_msearch line %d is a header without its body line", n)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			return badRequest("_msearch line %d is empty: each search is a header line, then a body line", n+1)
		}
		if len(r.heads) == s.limits.MaxMsearchVectors {
			return badRequest("_msearch has more than %d searches (max_msearch_vectors)", s.limits.MaxMsearchVectors)
		}
		var h msearchHead
		if err := decodeJSON(head, &h); err != nil {
			return atLine(n, err)
		}
		if h.Index == "" {
			return badRequest(`_msearch line %d: the header names no index ("index": a name, alias or pattern, or a list of them)`, n)
		}
		exprs, err := parseTargets(string(h.Index))
		if err != nil {
			return atLine(n, err)
		}
		r.heads = append(r.heads, h)
		r.exprs = append(r.exprs, exprs)
		r.reqs = append(r.reqs, SearchRequest{})
		req := &r.reqs[len(r.reqs)-1]
		if !searchFast(line, req) {
			*req = SearchRequest{}
			if err := decodeJSON(line, req); err != nil {
				return atLine(n+1, err)
			}
		}
	}
	return nil
}

// atLine is err, a line's, naming the line.
func atLine(n int, err error) error {
	var ae *apiError
	if errors.As(err, &ae) {
		return &apiError{ae.Status, ae.Type, fmt.Sprintf("_msearch line %d: %s", n, ae.Reason)}
	}
	return badRequest("_msearch line %d: %v", n, err)
}

// msearchAll serves POST /_msearch.
func (s *Server) msearchAll(c *gin.Context) {
	var req msearchLines
	var b body
	if err := s.decode(c, &req, &b); err != nil {
		s.fail(c, err)
		return
	}
	defer s.release(&b)
	deadline := time.Now().Add(s.cfg.RequestTimeout)
	start := time.Now()
	searches := make([]*multiSearch, len(req.reqs))
	for i := range req.reqs {
		searches[i] = &multiSearch{req: &req.reqs[i], list: string(req.heads[i].Index), exprs: req.exprs[i]}
	}
	r, err := s.newMultiRun(c, deadline, searches)
	defer r.end()
	if err == nil {
		for _, ms := range searches {
			ms.single = singleIndex(ms.list, r.sv)
		}
		err = r.exec()
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	size := 64
	for _, ms := range searches {
		size += 128 + hitBytes*ms.k
	}
	out := make([]byte, 0, size)
	out = append(out, `{"took":`...)
	out = appendTook(out, time.Since(start))
	out = append(out, `,"responses":[`...)
	for i, ms := range searches {
		if i > 0 {
			out = append(out, ',')
		}
		if ms.err == nil {
			var err error
			if out, err = ms.appendAnswer(out); err != nil {
				s.fail(c, err)
				return
			}
			out = append(out, `,"status":200}`...)
			continue
		}
		status, typ := errStatus(ms.err)
		eb, _ := json.Marshal(errorBody(status, typ, shortReason(ms.err.Error())))
		out = append(out, eb...)
	}
	writeJSON(c, append(out, "]}\n"...))
}
