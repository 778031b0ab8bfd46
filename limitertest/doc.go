// Package limitertest gives tests a Limiter on an embedded Redis
// (miniredis) whose clock the test moves, so that code that rate-limits can
// be tested without a Redis server and without sleeping:
//
//	func TestLogin(t *testing.T) {
//		lim, clock := limitertest.New(t, strategy.NewFixedWindow())
//		svc := NewService(lim) // the code under test
//		...
//		clock.Advance(time.Minute) // the window is over
//	}
//
// The Limiter is a real one: the strategy's script runs in the embedded
// server, keys expire with the clock, and Wait sleeps on the clock (it
// advances it instead of sleeping). Everything is closed with the test.
//
// It is a package for tests: it talks to the embedded server through the
// go-redis adapter.
package limitertest
