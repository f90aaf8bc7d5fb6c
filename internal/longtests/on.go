//go:build long

package longtests

const On = true
