//go:build race

package quant

const raceEnabled = true
