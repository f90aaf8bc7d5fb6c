package httpapi

import (
	"os"
	"runtime/debug"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/internal/sysmem"
)

// heapSlack is what the Go heap may have beyond the request bodies in
// flight when the machine has no more to give: decoded queries, result
// pools, responses being written.
const heapSlack = 64 << 20

// outsideHeap is what the process holds beside the Go heap and the
// indexes: the binary's mapped text, thread stacks, the kernel's socket
// buffers for the connections' bodies (charged to a cgroup too).
const outsideHeap = 64 << 20

// heapLimit is the Go runtime's memory limit while the indexes hold used
// bytes of a process that may have total: what they and outsideHeap leave, and never less
// than the bodies the server admits plus heapSlack. Index memory lives off
// the Go heap (anonymous mappings, the page cache), where the runtime
// cannot see it; without this limit the collector lets the heap grow to
// twice its live size, so a flood of large requests, each within the
// limits, could take what a cgroup's indexes need and have the process
// killed.
func heapLimit(total, used, bodies int64) int64 {
	return max(total-used-outsideHeap, bodies+heapSlack)
}

// limitHeap keeps the runtime's memory limit at heapLimit as indexes load,
// switch and unload, checked once a second, until the server stops, then
// puts back the limit it found. GOMEMLIMIT, when set, wins.
func (s *Server) limitHeap() {
	total := sysmem.Total()
	if total <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	prev := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(prev)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		used, _ := s.Reg.usage()
		debug.SetMemoryLimit(heapLimit(total, used, s.limits.MaxBodiesInFlight))
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}
