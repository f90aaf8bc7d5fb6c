// Package backendkit is what the storage backends of partial and its
// subpackages share and their callers need not see: the closed error, the
// range check every read makes, and the life of a backend's resources
// (Close while reads are in flight).
package backendkit
