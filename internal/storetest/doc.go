// Package storetest holds store.Store wrappers that the conformance suite
// and the module's tests use to put a store under conditions a real
// network makes: Late hands replies back late; Batches counts what a
// batch sends.
package storetest
