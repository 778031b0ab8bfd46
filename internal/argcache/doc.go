// Package argcache holds small, bounded caches the store adapters use to
// pass a decision's integer arguments without formatting or boxing them
// anew on every call: a limit's rate and period are the same from call to
// call, and on a fast client their per-call allocation is a measurable
// share of a decision's cost.
package argcache
