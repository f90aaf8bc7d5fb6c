package quant

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"unsafe"

	"github.com/faiss-sidecar/faiss-sidecar/internal/par"
)

// 32x and 16x codes centre each vector on the nearest of K centroids rather than
// on one mean: the estimate's error grows with ‖o − c‖·‖q − c‖, so on data
// of many tight clusters one centre for all leaves errors larger than the
// gaps between a query's neighbours, while a centre per cluster shrinks
// both norms to the clusters' spread (docs/quantization.md).
//
// The centroids come from two-level k-means on the training sample: √K
// coarse centroids, then each coarse cell's sample points split into fine
// centroids in proportion to their share. A vector is coded against the
// nearest fine centroid of its nearest coarse cell (≈ 2√K distances
// instead of K); any centroid keeps the estimate unbiased, a nearer one
// makes it tighter.

const (
	// maxCentroids bounds K: a row names its centroid in 16 bits, and a
	// query keeps one cached term (8 bytes) per centroid.
	maxCentroids = 32768
	// samplePerCentroid is the fewest training points per centroid.
	samplePerCentroid = 4
	// centroidShare bounds the centroids' bytes (d each, 8-bit codes) to
	// 1/centroidShare of the rows' bytes.
	centroidShare = 8
	kmeansIters   = 12
)

// centroidCount is K for n vectors of dimension d at level l, rows
// sampled points:
// bounded by maxCentroids, by samplePerCentroid points each, and by
// memory (K·d ≤ rows' bytes / centroidShare); at least 1.
func centroidCount(l Level, n int64, d, rows int) int {
	k := min(int64(maxCentroids), int64(rows)/samplePerCentroid)
	k = min(k, n*int64(l.BytesPerVector(d))/(centroidShare*int64(d)))
	return int(max(1, k))
}

// cellTree is the build-time index of the centroids: coarse centroids,
// and for each coarse cell the range of fine centroids [first[t],
// first[t+1]) it was split into. Not persisted: a query needs only the
// fine centroids.
type cellTree struct {
	d      int
	coarse []float32
	first  []int
	fine   []float32 // K·d, the Codes' centroids (decoded, once coded)
	l2     l2Func
}

// l2Func is squared L2 between float vectors: the build's fast kernel
// (distance.Kernels.L2F), chosen once per build.
type l2Func = func(q, x []float32) float32

// nearest is the fine centroid x is coded against.
func (t *cellTree) nearest(x []float32) int {
	ci := nearestRow(t.l2, x, t.coarse, t.d, 0, len(t.coarse)/t.d)
	return nearestRow(t.l2, x, t.fine, t.d, t.first[ci], t.first[ci+1])
}

// nearestRow is the row of rows[lo:hi] (d floats each) nearest to x in L2.
func nearestRow(l2 l2Func, x, rows []float32, d, lo, hi int) int {
	best, bd := lo, float32(math.Inf(1))
	for i := lo; i < hi; i++ {
		if v := l2(x, rows[i*d:(i+1)*d]); v < bd {
			best, bd = i, v
		}
	}
	return best
}

// trainCells builds the tree of k fine centroids on the m sample rows x.
func trainCells(l2 l2Func, x []float32, m, d, k, workers int, rng *rand.Rand) *cellTree {
	t := &cellTree{d: d, l2: l2}
	if m == 0 {
		t.coarse = make([]float32, d)
		t.fine = make([]float32, d)
		t.first = []int{0, 1}
		return t
	}
	k = min(k, m)
	kc := max(1, int(math.Round(math.Sqrt(float64(k)))))
	var assign []int32
	t.coarse, assign = kmeans(l2, x, m, d, kc, workers, rng)
	kc = len(t.coarse) / d
	members := make([][]int32, kc)
	for i, a := range assign {
		members[a] = append(members[a], int32(i))
	}
	share := shares(members, k-kc, m)
	t.first = make([]int, 1, kc+1)
	var cell []float32
	for ci, mem := range members { // none empty (kmeans drops those)
		// One fine centroid a cell plus its share of the rest: k in all.
		kf := min(len(mem), 1+share[ci])
		cell = cell[:0]
		for _, i := range mem {
			cell = append(cell, x[int(i)*d:(int(i)+1)*d]...)
		}
		f, _ := kmeans(l2, cell, len(mem), d, kf, workers, rng)
		t.fine = append(t.fine, f...)
		t.first = append(t.first, len(t.fine)/d)
	}
	return t
}

// shares splits extra among the cells in proportion to their m rows in
// all: floors, then one more to the largest remainders, so they sum to
// extra exactly.
func shares(members [][]int32, extra, m int) []int {
	out := make([]int, len(members))
	rem := make([]int, len(members))
	left := extra
	for i, mem := range members {
		out[i] = extra * len(mem) / m
		rem[i] = extra * len(mem) % m
		left -= out[i]
	}
	order := make([]int, len(members))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(rem[b], rem[a]) })
	for _, i := range order[:left] {
		out[i]++
	}
	return out
}

// kmeans runs Lloyd's iterations from k distinct sample rows and returns
// the centroids and each row's centroid. An emptied centroid restarts at a
// random row of the largest cluster; centroids still empty at the end
// (rows repeated, so fewer distinct points than k) are dropped, so every
// centroid returned has rows and there are at most min(k, m).
func kmeans(l2 l2Func, x []float32, m, d, k, workers int, rng *rand.Rand) ([]float32, []int32) {
	k = distinctRows(x, m, d, min(k, m)) // all-equal rows: one centroid, no iterations
	cents := make([]float32, k*d)
	for i, r := range rng.Perm(m)[:k] {
		copy(cents[i*d:(i+1)*d], x[r*d:(r+1)*d])
	}
	assign := make([]int32, m)
	if k == 1 {
		mean(cents, x, assign, m, d, 1, rng)
		return cents, assign
	}
	const chunk = 256
	assignAll := func() {
		par.For((m+chunk-1)/chunk, workers, func(b int) {
			for i := b * chunk; i < min(m, (b+1)*chunk); i++ {
				assign[i] = int32(nearestRow(l2, x[i*d:(i+1)*d], cents, d, 0, k))
			}
		})
	}
	for range kmeansIters {
		assignAll()
		mean(cents, x, assign, m, d, k, rng)
	}
	assignAll()
	return dropEmpty(cents, assign, d, k)
}

// distinctRows is the number of distinct rows among the m rows of x (d
// floats each, compared bit for bit), counted up to limit.
func distinctRows(x []float32, m, d, limit int) int {
	seen := make(map[string]struct{}, min(limit, 1024))
	raw := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 4*len(x))
	for i := range m {
		seen[unsafe.String(&raw[4*i*d], 4*d)] = struct{}{}
		if len(seen) >= limit {
			break
		}
	}
	return max(1, len(seen))
}

// dropEmpty removes the centroids no row is assigned to and renumbers
// assign.
func dropEmpty(cents []float32, assign []int32, d, k int) ([]float32, []int32) {
	used := make([]int32, k) // new number + 1, 0 for unused
	for _, a := range assign {
		used[a] = 1
	}
	n := int32(0)
	for c := range k {
		if used[c] != 0 {
			copy(cents[int(n)*d:int(n+1)*d], cents[c*d:(c+1)*d])
			n++
			used[c] = n
		}
	}
	for i, a := range assign {
		assign[i] = used[a] - 1
	}
	return cents[:int(n)*d], assign
}

// mean sets each centroid to the mean of its rows; an empty one to a
// random row of the largest cluster.
func mean(cents, x []float32, assign []int32, m, d, k int, rng *rand.Rand) {
	sum := make([]float64, k*d)
	count := make([]int, k)
	for i, a := range assign {
		count[a]++
		s := sum[int(a)*d : int(a+1)*d]
		for j, v := range x[i*d : (i+1)*d] {
			s[j] += float64(v)
		}
	}
	big := 0
	for c := range k {
		if count[c] > count[big] {
			big = c
		}
	}
	var pick []int // the largest cluster's rows, for emptied centroids
	for c := range k {
		dst := cents[c*d : (c+1)*d]
		if count[c] == 0 {
			if pick == nil {
				for i, a := range assign {
					if int(a) == big {
						pick = append(pick, i)
					}
				}
			}
			r := pick[rng.IntN(len(pick))]
			copy(dst, x[r*d:(r+1)*d])
			continue
		}
		for j := range dst {
			dst[j] = float32(sum[c*d+j] / float64(count[c]))
		}
	}
}
