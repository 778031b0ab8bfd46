// Package ctxend tells whether a context has ended, its deadline passed
// counting as its end before the context's own timer fires: the Limiter's
// Wait and the go-redis adapter read it after a call a socket's deadline
// may have failed first.
package ctxend
