package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
)

// Name is the program's name in Version.
const Name = "faiss-sidecar"

// Info is what the binary knows about its build. Empty fields were not
// recorded.
type Info struct {
	Version  string `json:"version"`            // module version, "(devel)" for an untagged build
	Revision string `json:"revision,omitempty"` // VCS revision (full commit hash)
	Time     string `json:"time,omitempty"`     // commit time, RFC 3339
	Modified bool   `json:"modified"`           // the working tree had uncommitted changes
	Go       string `json:"go"`                 // Go toolchain version
}

var get = sync.OnceValue(func() Info { return fromBuildInfo(debug.ReadBuildInfo()) })

// Get returns the running binary's build information.
func Get() Info { return get() }

// Version is one line naming the build, e.g.
// "faiss-sidecar v1.2.0 rev 0123456789ab (modified) 2026-01-02T03:04:05Z go1.26.0".
func Version() string { return Get().String() }

// String formats i as Version does.
func (i Info) String() string {
	var b strings.Builder
	b.WriteString(Name + " " + i.Version)
	if i.Revision != "" {
		b.WriteString(" rev " + i.Revision[:min(12, len(i.Revision))])
		if i.Modified {
			b.WriteString(" (modified)")
		}
	}
	if i.Time != "" {
		b.WriteString(" " + i.Time)
	}
	if i.Go != "" {
		b.WriteString(" " + i.Go)
	}
	return b.String()
}

func fromBuildInfo(bi *debug.BuildInfo, ok bool) Info {
	i := Info{Version: "(devel)", Go: runtime.Version()}
	if !ok || bi == nil {
		return i
	}
	if v := bi.Main.Version; v != "" {
		i.Version = v
	}
	if bi.GoVersion != "" {
		i.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Revision = s.Value
		case "vcs.time":
			i.Time = s.Value
		case "vcs.modified":
			i.Modified = s.Value == "true"
		}
	}
	return i
}
