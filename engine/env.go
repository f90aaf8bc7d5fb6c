package engine

import "github.com/faiss-sidecar/faiss-sidecar/internal/distance"

// Env is what a process decides once for every index it opens, passed
// down in each Spec rather than set process-wide: the instruction set of
// the distance kernels. The binary builds one at start from its flags,
// config file and environment (cmd/faiss-sidecar) and keeps it for its
// life; a test builds its own. A nil *Env is the zero Env: AVX-512 where
// the CPU has it.
type Env struct {
	// NoAVX512 keeps the fast distance kernels (search, rerank, guide
	// builds) and the 16x and 32x guides' popcount on AVX2 where the CPU
	// has AVX-512: the same answers, for machines whose clock AVX-512
	// lowers (FAISS_SIDECAR_NO_AVX512).
	NoAVX512 bool
}

// avx512 reports whether e lets the kernels use AVX-512.
func (e *Env) avx512() bool { return e == nil || !e.NoAVX512 }

// KernelImpl names the fast distance kernels of the indexes opened with e
// on this CPU: "avx512", "avx2" or "go".
func (e *Env) KernelImpl() string { return distance.Fast(e.avx512()).Impl }
