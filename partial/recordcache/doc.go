// Package recordcache keeps fixed-size records addressed by a dense id (an
// index's vectors by node id) in a fixed amount of memory outside the Go
// heap, with lock-free lookups.
package recordcache
