package hnswsearch

import (
	"math"
	"math/bits"
)

// A CAGRA-built graph (IHc2, IHNc, IBHc) stored with base_level_only set is
// searched as FAISS ≥ 1.9 searches it: not from the entry point down
// through the upper levels, but on level 0 alone, from the nearest of
// NumBaseLevelSearchEntrypoints nodes drawn uniformly at random from
// [0, ntotal) (repeats allowed; the first of equally near draws wins; inner
// products compare as the search's −inner product). From there the level-0
// search is the usual one: stop rule efSearch (the query's, else the
// index's), candidate pool max(efSearch, k). With base_level_only clear the
// search is exactly the HNSW one.
//
// FAISS draws from std::random_device, so its results vary from run to
// run. Here each query draws from a small generator seeded by
// Options.CAGRASeed mixed with a hash of the query's bytes: a query gets
// the same entry points, and so the same results, every time and whatever
// ran before or beside it, and another seed gives another draw.

// searchBaseLevel is the base_level_only search.
func (x *Index) searchBaseLevel(s *scratch, p Params) error {
	efStop := int(x.efSearch)
	if p.EfSearch > 0 {
		efStop = p.EfSearch
	}
	nearest, dn, err := x.baseLevelEntry(s)
	if err != nil {
		return err
	}
	s.pool.reset(max(efStop, p.K), true)
	s.pool.push(nearest, dn)
	s.advance()
	_, err = x.searchLevel(s, 0, &s.res, efStop)
	return err
}

// baseLevelEntry draws x.baseLevel nodes and returns the nearest (the
// first drawn among equals) with its distance.
func (x *Index) baseLevelEntry(s *scratch) (int32, float32, error) {
	rng := x.querySeed(s)
	nearest, dn := int32(-1), float32(math.Inf(1))
	for range x.baseLevel {
		v := int32(uniform(&rng, uint64(x.n)))
		d, err := x.vecs.dist(s, v)
		if err != nil {
			return 0, 0, err
		}
		if nearest < 0 || d < dn {
			nearest, dn = v, d
		}
	}
	return nearest, dn, nil
}

// querySeed mixes Options.CAGRASeed with an FNV-1a hash of the query's
// bytes (the float components' bits, or the binary code).
func (x *Index) querySeed(s *scratch) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	if x.binary {
		for _, b := range s.qb[:x.codeSize] {
			h = (h ^ uint64(b)) * prime
		}
	} else {
		for _, f := range s.q {
			h = (h ^ uint64(math.Float32bits(f))) * prime
		}
	}
	return h ^ x.opts.CAGRASeed
}

// splitmix64 advances *state and returns the next 64 random bits.
func splitmix64(state *uint64) uint64 {
	*state += 0x9e3779b97f4a7c15
	z := *state
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// uniform returns a uniformly distributed value in [0, n), n > 0
// (Lemire's multiply-and-reject).
func uniform(state *uint64, n uint64) uint64 {
	hi, lo := bits.Mul64(splitmix64(state), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(splitmix64(state), n)
		}
	}
	return hi
}
