//go:build !long

// Package longtests says whether the tests are built with -tags long, as
// .ci/run builds them. Without it, tests whose cases repeat the same check
// on slower paths (FAISS parity on every storage configuration, every byte
// of every cut, hundreds of rounds of a race) run a sample that still
// reaches each code path, so that go test -race ./... ends in minutes;
// with it, every case runs (docs/testing.md). It imports nothing, so any
// package's tests can use it.
package longtests

// On is true in tests built with -tags long.
const On = false
