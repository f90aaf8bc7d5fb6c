//go:build race

package hnswsearch

// raceEnabled: the race detector makes sync.Pool drop items on purpose.
const raceEnabled = true
