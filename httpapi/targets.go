package httpapi

import (
	"slices"
	"strings"
)

// A search's targets, in OpenSearch's syntax: a comma-separated list of
// index names, alias names and '*' patterns (_all is '*'). Commas and '*'
// are not allowed in index or alias names, so a target list is never
// mistaken for one.

// targetExpr is one element of a target list.
type targetExpr struct {
	name    string
	pattern bool // name holds '*'
}

// parseTargets splits and checks a target list.
func parseTargets(list string) ([]targetExpr, error) {
	var out []targetExpr
	for part := range strings.SplitSeq(list, ",") {
		if part == "_all" {
			part = "*"
		}
		pattern := strings.Contains(part, "*")
		if why := nameProblem(part, pattern); why != "" {
			what := "index or alias name"
			if pattern {
				what = "index pattern"
			}
			return nil, badRequest("invalid %s %s in %s: %s", what, quoteName(part), quoteName(list), why)
		}
		out = append(out, targetExpr{part, pattern})
	}
	return out, nil
}

// singleIndex reports whether list names one index as such (no list, no
// pattern, not an alias of sv): a search of it answers as it always has,
// without "_index" and "_shards".
func singleIndex(list string, sv *served) bool {
	if strings.ContainsAny(list, ",*") || list == "_all" {
		return false
	}
	_, alias := sv.aliases[list]
	return !alias
}

// matchWildcard reports whether name matches pattern, where '*' matches
// any run of characters (none included).
func matchWildcard(pattern, name string) bool {
	prefix, rest, found := strings.Cut(pattern, "*")
	if !found {
		return pattern == name
	}
	if !strings.HasPrefix(name, prefix) {
		return false
	}
	name = name[len(prefix):]
	for {
		part, more, found := strings.Cut(rest, "*")
		if !found { // the last part: the name's end
			return strings.HasSuffix(name, part)
		}
		// The leftmost match of each middle part leaves the most for the
		// parts after it.
		i := strings.Index(name, part)
		if i < 0 {
			return false
		}
		name, rest = name[i+len(part):], more
	}
}

// expand is the indexes exprs name in sv, sorted by name and each once:
// names are indexes, or aliases standing for theirs; patterns match both.
// explicit holds the names given as such that are neither (missing), and
// those of exprs that are indexes.
func (sv *served) expand(exprs []targetExpr) (indexes []string, explicit map[string]bool) {
	explicit = map[string]bool{}
	for _, x := range exprs {
		switch {
		case !x.pattern:
			if idx, ok := sv.aliases[x.name]; ok {
				indexes = append(indexes, idx...)
			} else {
				indexes = append(indexes, x.name)
				explicit[x.name] = true
			}
		default:
			for n := range sv.entries() {
				if matchWildcard(x.name, n) {
					indexes = append(indexes, n)
				}
			}
			for a, idx := range sv.aliases {
				if matchWildcard(x.name, a) {
					indexes = append(indexes, idx...)
				}
			}
		}
	}
	slices.Sort(indexes)
	return slices.Compact(indexes), explicit
}

// target is one index a search names: the lease taken on it at the
// search's start, or why it has none (missing).
type target struct {
	name    string
	e       *entry
	l       lease
	missing error // an explicit name that is no index: 404
}

// leaseTargets resolves each search's target list from one snapshot of
// the registry (sv, returned) and takes a lease on every index they name
// (one per index, shared by the searches): a search that starts before an
// alias swap sees the old set, one after it the new set, never a mix; the
// leases keep the handles of indexes deleted meanwhile until the searches
// end. An index or alias taken away between the snapshot and the last
// lease makes it start over from a newer snapshot. An explicit name that
// is no index is a missing target; an index a pattern matches that is
// still being loaded is left out. More than maxIndexSearches targets in
// all is a 400. The caller releases the leases (releaseTargets), whatever
// it returns.
func (r *Registry) leaseTargets(lists [][]targetExpr) (per [][]*target, leased map[string]*target, sv *served, err error) {
	for attempt := 0; ; attempt++ {
		snap := r.snapshot()
		sv = &snap
		per, leased = make([][]*target, len(lists)), map[string]*target{}
		total := 0
		for i, exprs := range lists {
			names, explicit := sv.expand(exprs)
			if total += len(names); total > maxIndexSearches {
				return per, leased, sv, badRequest("the request names %d indexes or more, counting each search's: at most %d", total, maxIndexSearches)
			}
			for _, n := range names {
				t, ok := leased[n]
				if !ok {
					t = &target{name: n}
					if e, _ := sv.entry(n); e != nil {
						if l, err := e.lease(); err == nil {
							t.e, t.l = e, l
						}
					}
					if t.e == nil { // no index, or one still being loaded
						t.missing = errIndexNotFound(n)
					}
					leased[n] = t
				}
				if t.e != nil || explicit[n] {
					per[i] = append(per[i], t)
				}
			}
		}
		if sv.current() || attempt >= maxLeaseAttempts {
			return per, leased, sv, nil
		}
		releaseTargets(leased)
	}
}

// maxIndexSearches bounds the indexes one request searches, counting each
// of its searches' (a pattern over thousands of segments in each search of
// an _msearch), which the work limit does not bound when they are skipped.
const maxIndexSearches = 1 << 16

// maxLeaseAttempts bounds leaseTargets' new starts: each one follows a
// delete or an alias change, so only a flood of them could use these up
// (an index deleted then counts as missing).
const maxLeaseAttempts = 16

// releaseTargets gives back the leases leaseTargets took.
func releaseTargets(leased map[string]*target) {
	for _, t := range leased {
		if t.e != nil {
			t.l.release()
			t.e = nil
		}
	}
}
