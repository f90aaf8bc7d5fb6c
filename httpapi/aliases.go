package httpapi

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"
)

// An alias names a set of indexes (a shard's segments): a search of the
// alias searches them all. Aliases live in the registry's served state
// beside the indexes, so one atomic load gives a search both, and a change
// of many aliases is published in one step (UpdateAliases).

// AliasesRequest is the body of POST /_aliases: actions applied in order,
// all or none.
type AliasesRequest struct {
	Actions []AliasAction `json:"actions"`
}

// AliasAction is one action, OpenSearch's: exactly one of Add, Remove and
// RemoveIndex.
type AliasAction struct {
	Add         *AliasSpec `json:"add"`
	Remove      *AliasSpec `json:"remove"`
	RemoveIndex *AliasSpec `json:"remove_index"`
}

// AliasSpec names an action's indexes (Index and Indices, names or '*'
// patterns) and aliases (Alias and Aliases; patterns in a remove).
type AliasSpec struct {
	Index   string   `json:"index"`
	Indices []string `json:"indices"`
	Alias   string   `json:"alias"`
	Aliases []string `json:"aliases"`
}

// withoutIndex is aliases with index taken out, and the aliases left
// with none dropped; nil when none names it.
func withoutIndex(aliases map[string][]string, index string) map[string][]string {
	hit := false
	for _, idx := range aliases {
		_, found := slices.BinarySearch(idx, index)
		hit = hit || found
	}
	if !hit {
		return nil
	}
	out := make(map[string][]string, len(aliases))
	for a, idx := range aliases {
		if i, found := slices.BinarySearch(idx, index); found {
			idx = slices.Delete(slices.Clone(idx), i, i+1)
		}
		if len(idx) > 0 {
			out[a] = idx
		}
	}
	return out
}

// aliasesOf is the aliases of index, sorted (never nil).
func (r *Registry) aliasesOf(index string) []string {
	out := []string{}
	for a, idx := range *r.aliases.Load() {
		if _, ok := slices.BinarySearch(idx, index); ok {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

// UpdateAliases applies actions in order to the served aliases, all or
// none: every action is checked against the state the ones before it
// leave, and the result is published in one step. It returns the indexes
// remove_index took out (their handles close after their in-flight
// queries).
func (r *Registry) UpdateAliases(actions []AliasAction) ([]string, error) {
	if len(actions) == 0 {
		return nil, badRequest("actions is empty: give at least one add, remove or remove_index")
	}
	r.mu.Lock()
	cur := r.snapshot()
	w := aliasWork{sv: cur, sets: map[string]map[string]bool{}, removed: map[string]bool{}}
	for a, idx := range cur.aliases {
		w.sets[a] = map[string]bool{}
		for _, n := range idx {
			w.sets[a][n] = true
		}
	}
	for i, act := range actions {
		if err := w.apply(fmt.Sprintf("actions[%d]", i), act); err != nil {
			r.mu.Unlock()
			return nil, err
		}
	}
	next := map[string][]string{}
	for a, set := range w.sets {
		if len(set) > 0 {
			next[a] = slices.Sorted(maps.Keys(set))
		}
	}
	var gone []*entry
	done := r.removing()
	r.aliases.Store(&next)
	for n := range w.removed {
		e, _ := cur.entry(n)
		gone = append(gone, e)
		r.entries.remove(n)
		e.deleted.Store(true)
	}
	done()
	r.mu.Unlock()
	names := make([]string, 0, len(gone))
	for _, e := range gone {
		r.unload(e, 0)
		names = append(names, e.name)
	}
	slices.Sort(names)
	return names, nil
}

// aliasWork is UpdateAliases' working copy: each alias's set of indexes,
// and the indexes remove_index took out.
type aliasWork struct {
	sv      served
	sets    map[string]map[string]bool
	removed map[string]bool
}

// apply checks and applies one action (at names it in errors).
func (w *aliasWork) apply(at string, act AliasAction) error {
	n := 0
	for _, set := range []bool{act.Add != nil, act.Remove != nil, act.RemoveIndex != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return badRequest("%s must hold exactly one of add, remove and remove_index", at)
	}
	switch {
	case act.Add != nil:
		at += ".add"
		indexes, err := w.indexes(at, act.Add, true)
		if err != nil {
			return err
		}
		aliases := names(act.Add.Alias, act.Add.Aliases)
		if len(aliases) == 0 {
			return badRequest("%s needs alias or aliases", at)
		}
		for _, a := range aliases {
			if why := nameProblem(a, false); why != "" {
				return errInvalidAliasName(fmt.Sprintf("%s: invalid alias name %s: %s", at, quoteName(a), why))
			}
			if _, ok := w.sv.entry(a); ok && !w.removed[a] {
				return errInvalidAliasName(fmt.Sprintf("%s: an index is named %q: an alias may not have an index's name", at, a))
			}
			if w.sets[a] == nil {
				w.sets[a] = map[string]bool{}
			}
			for _, x := range indexes {
				w.sets[a][x] = true
			}
		}
	case act.Remove != nil:
		at += ".remove"
		indexes, err := w.indexes(at, act.Remove, true)
		if err != nil {
			return err
		}
		aliases := names(act.Remove.Alias, act.Remove.Aliases)
		if len(aliases) == 0 {
			return badRequest("%s needs alias or aliases", at)
		}
		for _, x := range indexes {
			for _, a := range aliases {
				matched := false
				for name, set := range w.sets {
					if set[x] && matchWildcard(a, name) {
						delete(set, x)
						matched = true
					}
				}
				if !matched && !strings.Contains(a, "*") {
					return errAliasesNotFound(fmt.Sprintf("%s: index %q has no alias %q", at, x, a))
				}
			}
		}
	default:
		at += ".remove_index"
		if act.RemoveIndex.Alias != "" || act.RemoveIndex.Aliases != nil {
			return badRequest("%s takes index or indices, not aliases", at)
		}
		indexes, err := w.indexes(at, act.RemoveIndex, false)
		if err != nil {
			return err
		}
		for _, x := range indexes {
			w.removed[x] = true
			for _, set := range w.sets {
				delete(set, x)
			}
		}
	}
	return nil
}

// indexes are the indexes spec names, its patterns expanded (a pattern may
// match none; a name must be an index). serving: only indexes that serve
// count (add and remove); otherwise one being loaded counts too
// (remove_index, as DELETE).
func (w *aliasWork) indexes(at string, spec *AliasSpec, serving bool) ([]string, error) {
	given := names(spec.Index, spec.Indices)
	if len(given) == 0 {
		return nil, badRequest("%s needs index or indices", at)
	}
	exists := func(n string) bool {
		e, ok := w.sv.entry(n)
		return ok && !w.removed[n] && (!serving || e.cur.Load() != nil)
	}
	var out []string
	for _, g := range given {
		if !strings.Contains(g, "*") {
			if !exists(g) {
				return nil, errNotFound("index_not_found", fmt.Sprintf("%s: no index named %q", at, g))
			}
			out = append(out, g)
			continue
		}
		if why := nameProblem(g, true); why != "" {
			return nil, badRequest("%s: invalid index pattern %s: %s", at, quoteName(g), why)
		}
		for n := range w.sv.entries() {
			if matchWildcard(g, n) && exists(n) {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// names is one and many, the empty ones left out.
func names(one string, many []string) []string {
	var out []string
	if one != "" {
		out = append(out, one)
	}
	for _, n := range many {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}

// getAliases lists every serving index with its aliases (GET /_aliases),
// as OpenSearch does: {INDEX: {"aliases": {ALIAS: {}}}}.
func (s *Server) getAliases(c *gin.Context) {
	sendJSON(c, http.StatusOK, s.Reg.aliasesByIndex())
}

// aliasesByIndex is GET /_aliases' answer, the indexes and aliases of one
// moment.
func (r *Registry) aliasesByIndex() gin.H {
	for {
		sv := r.snapshot()
		of := map[string][]string{}
		for a, idx := range sv.aliases {
			for _, n := range idx {
				of[n] = append(of[n], a)
			}
		}
		out := gin.H{}
		for n, e := range sv.entries() {
			if e.cur.Load() == nil { // being loaded: not listed, as GET /indexes
				continue
			}
			al := gin.H{}
			for _, a := range of[n] {
				al[a] = gin.H{}
			}
			out[n] = gin.H{"aliases": al}
		}
		if sv.current() {
			return out
		}
	}
}

// postAliases applies OpenSearch's alias actions all or none
// (POST /_aliases).
func (s *Server) postAliases(c *gin.Context) {
	var req AliasesRequest
	var b body
	if err := s.decode(c, &req, &b); err != nil {
		s.fail(c, err)
		return
	}
	s.release(&b)
	gone, err := s.Reg.UpdateAliases(req.Actions)
	if err != nil {
		s.fail(c, err)
		return
	}
	for _, n := range gone {
		s.metrics.forget(n)
		s.log.Info("index deleted", "index", n, "by", "remove_index")
	}
	sendJSON(c, http.StatusOK, gin.H{"acknowledged": true})
}
