//go:build !race

package hnswsearch

const raceEnabled = false
