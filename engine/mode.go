package engine

import (
	"slices"
	"strings"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// Mode is how an index is served (Spec.Mode): its spelling in flags, load
// specs and answers.
type Mode string

// The loading modes (ModeOnDisk: ondisk.go).
const (
	// ModeFull reads the whole file into memory (backend memory) and
	// checks every neighbor list and the footer CRC as it opens.
	ModeFull Mode = "full"
	// ModeMemoryEfficient reads the file on demand through a storage
	// backend (ModeBackend); a Spec's "" is this mode.
	ModeMemoryEfficient Mode = "memory_efficient"
)

// modes lists the modes by name, in the order errors name them.
var modes = []Mode{ModeFull, ModeMemoryEfficient, ModeOnDisk}

// ParseMode is the mode named s ("": ModeMemoryEfficient), or an error
// naming the modes (matching ErrBadStorageOption).
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); {
	case m == "":
		return ModeMemoryEfficient, nil
	case slices.Contains(modes, m):
		return m, nil
	}
	names := make([]string, len(modes))
	for i, m := range modes {
		names[i] = string(m)
	}
	return "", partial.BadOptionf("unknown mode %q (known: %s)", s, strings.Join(names, ", "))
}
