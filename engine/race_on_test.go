//go:build race

package engine_test

// raceEnabled: the race detector makes sync.Pool drop items on purpose.
const raceEnabled = true
