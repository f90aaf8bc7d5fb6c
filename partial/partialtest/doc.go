// Package partialtest holds the conformance suite every partial.Storage
// backend must pass (Run), the one every cache passes over a stalled
// storage (RunStalledFill), and wrappers for tests: Faulty injects I/O
// errors, Stall holds reads as a stalled store does, and Trace records
// every read.
package partialtest
