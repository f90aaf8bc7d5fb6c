// Package partialtest holds the conformance suite every partial.Storage
// backend must pass, and wrappers for tests: Faulty injects I/O errors and
// Trace records every read.
package partialtest
