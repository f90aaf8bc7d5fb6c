package httpapi

import (
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/engine"
)

// ownBytes is what the server keeps for itself beside its indexes on a
// machine (or memory cgroup) of total bytes: three engine.OwnShare shares,
//   - what lives outside the Go heap: the binary's pages, thread stacks,
//     the kernel's socket buffers for the connections (charged to a cgroup
//     too);
//   - the request bodies in flight (Limits.MaxBodiesInFlight's default);
//   - the heap's slack beyond those bodies: decoded queries, result pools,
//     responses being written.
func ownBytes(total int64) int64 { return 3 * engine.OwnShare(total) }

// defaultNodeBudget is the node's memory budget when none is set
// (memory_budget 0): the machine's memory (0: unknown, no budget) less
// ownBytes, and at least an eighth of it.
func defaultNodeBudget(total int64) int64 {
	switch {
	case total <= 0:
		return 0
	case belowOwn(total):
		return total / 8
	}
	return total - ownBytes(total)
}

// belowOwn reports whether a machine of total bytes (known) leaves its
// indexes less than an eighth beside the server's own.
func belowOwn(total int64) bool { return total > 0 && total-ownBytes(total) < total/8 }

// heapLimit is the Go runtime's memory limit while the indexes hold used
// bytes of a process that may have total: what they and the share outside
// the heap leave, and never less than the bodies the server admits plus the
// slack share. Index memory lives off the Go heap (anonymous mappings, the
// page cache), where the runtime cannot see it; without this limit the
// collector lets the heap grow to twice its live size, so a flood of large
// requests, each within the limits, could take what a cgroup's indexes need
// and have the process killed.
func heapLimit(total, used, bodies int64) int64 {
	return max(total-used-engine.OwnShare(total), bodies+engine.OwnShare(total))
}

// limitHeap keeps the runtime's memory limit at heapLimit as indexes load,
// switch and unload, checked once a second, until the server stops, then
// puts back the limit it found. It sets it through Config.SetMemoryLimit:
// without one it leaves the runtime alone.
func (s *Server) limitHeap() {
	set, total := s.cfg.SetMemoryLimit, s.total
	if set == nil || total <= 0 {
		return
	}
	prev := set(-1)
	defer set(prev)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		set(heapLimit(total, s.Reg.used(), s.limits.MaxBodiesInFlight))
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}
