package engine

// OwnShare is a share of the memory a process serving indexes keeps for
// itself on a machine (or memory cgroup) of m bytes: a sixteenth, between
// 8 and 64 MiB. The one rule for both front ends: a process keeps one
// share for what lives outside the Go heap (the binary's pages, thread
// stacks, page tables, I/O rings, socket buffers); the server keeps two
// more for its requests (the bodies in flight, the heap's slack beyond
// them: httpapi), a command what it holds beside its index (Spec.Beside).
func OwnShare(m int64) int64 { return min(max(m/16, 8<<20), 64<<20) }

// machineRoom is what an index and what its caller holds beside it
// (Spec.Beside) may take of a machine with m bytes: all but one OwnShare.
func machineRoom(m int64) int64 { return m - OwnShare(m) }
