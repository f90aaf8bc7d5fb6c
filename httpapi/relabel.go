package httpapi

import (
	"cmp"
	"slices"
	"strings"
)

// serverName pairs a path as the server spells it (resolved inside a
// data root, a guide or cache directory) with what an error body calls it:
// the path as the client sent it, or the setting's name.
type serverName struct{ server, client string }

// relabelled is an error whose message names files as the client knows
// them; it unwraps to the error it rewords, so its kind (errors.Is, As)
// and HTTP status are unchanged.
type relabelled struct {
	err error
	msg string
}

func (e *relabelled) Error() string { return e.msg }

func (e *relabelled) Unwrap() error { return e.err }

// relabel rewords err's message with names: what the layers below name a
// file by (the resolved path they opened, a guide beside it, the
// directory it lies in) the client never sent, and on a shared server it
// tells the server's layout. Longer server paths go first, so a file is
// named before the directory holding it. It changes the wording only:
// nothing is decided on the text.
func relabel(err error, names []serverName) error {
	if err == nil || len(names) == 0 {
		return err
	}
	msg := err.Error()
	out := rename(msg, names)
	if out == msg {
		return err
	}
	return &relabelled{err: err, msg: out}
}

// rename is relabel for a text: every server path in s (a guide's path in
// GET /indexes, the reason it was rebuilt) as the client names it.
func rename(s string, names []serverName) string {
	for _, n := range names {
		if n.server != "" && n.server != n.client {
			s = strings.ReplaceAll(s, n.server, n.client)
		}
	}
	return s
}

// sortNames orders names longest server path first (relabel's order).
func sortNames(names []serverName) []serverName {
	slices.SortStableFunc(names, func(a, b serverName) int { return cmp.Compare(len(b.server), len(a.server)) })
	return names
}

// dirNames are the server's directories an error may name a file under,
// by their setting's name: the guide and cache directories. (A file in a
// data root is named by the path the client sent for it, and a guide
// beside an index by that path and a suffix.)
func (r *Registry) dirNames() []serverName {
	var names []serverName
	if r.guideDir != "" {
		names = append(names, serverName{r.guideDir, "guide_dir"})
	}
	if r.cacheDir != "" {
		names = append(names, serverName{r.cacheDir, "cache_dir"})
	}
	return names
}
