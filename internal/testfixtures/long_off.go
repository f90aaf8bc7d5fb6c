//go:build !long

package testfixtures

// Long is true in tests built with -tags long, as .ci/run builds them.
// Without it, tests whose every case costs the same check again on slower
// paths (FAISS parity on every storage configuration, large data sets)
// run a sample that still reaches each code path at least once, so that
// go test -race ./... ends in minutes; with it, every case runs
// (docs/testing.md).
const Long = false
