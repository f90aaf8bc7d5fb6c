package distance

import "math/bits"

func popcount64(x uint64) int { return bits.OnesCount64(x) }
