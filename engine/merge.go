package engine

import "slices"

// TargetHit is a hit of a multi-target query: Target is the position of
// the index it came from in the caller's list of targets.
type TargetHit struct {
	Hit
	Target int
}

// MergeHits appends to dst the best k of the hits per target (per[t] is
// target t's answer, best first as Query returns it) and returns it. The
// order is one rule, stable from run to run: score descending; equal
// scores go to the target listed first (callers list targets by name),
// then keep that target's own order. Each index's answer is therefore a
// subsequence of the merged one, and the merged one is what searching each
// index alone and merging would give. k < 0 keeps every hit (a radial
// query's cap is applied by the caller, which also reports truncation).
func MergeHits(dst []TargetHit, per [][]Hit, k int) []TargetHit {
	start := len(dst)
	for t, hits := range per {
		for _, h := range hits {
			dst = append(dst, TargetHit{Hit: h, Target: t})
		}
	}
	merged := dst[start:]
	// Appended by target, then rank: a stable sort by score alone keeps
	// the tie rule.
	slices.SortStableFunc(merged, func(a, b TargetHit) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return 0
	})
	if k >= 0 && len(merged) > k {
		dst = dst[:start+k]
	}
	return dst
}
