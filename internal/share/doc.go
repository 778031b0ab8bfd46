// Package share lets the calls of concurrent goroutines share round trips
// to one server: a Gate keeps at most n round trips in flight; a call that
// finds them all out queues, and when one returns, the calls queued
// meanwhile leave together as the next round trip, sent by the first of
// them. A call that finds one free goes at once, alone, so a lone caller
// waits for nothing. The store adapters use it for single script calls.
package share
