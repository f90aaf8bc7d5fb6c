// Package buildinfo describes the running binary: its module version and the
// version-control state it was built from, as the Go toolchain recorded them
// (runtime/debug.ReadBuildInfo). `go build` in a git checkout records the
// revision; `go run` and `go test` do not, and then only the version
// ("(devel)" outside a tagged module) and the Go version are known.
package buildinfo
