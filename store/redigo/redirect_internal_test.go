package redigo

import (
	"testing"

	"github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"
)

// TestRedirectFollowsMovedAndAskOnly: a call is sent again after MOVED or
// ASK, up to maxRedirects times, never after TRYAGAIN: its reply goes back
// (store.ErrTryAgain) and store.Script sends the call again after a pause,
// with a budget of redirections of its own. (When TRYAGAIN was sent again
// here, three TRYAGAINs while a slot's keys moved used up the budget of
// the ASK that followed them once they had moved, and the ASK reached the
// caller as a failure.)
func TestRedirectFollowsMovedAndAskOnly(t *testing.T) {
	s := &Store{cluster: &redisc.Cluster{}}
	moved := redis.Error("MOVED 12 127.0.0.1:7001")
	ask := redis.Error("ASK 12 127.0.0.1:7002")
	tryAgain := redis.Error("TRYAGAIN Multiple keys request during rehashing of slot")
	for _, tc := range []struct {
		name    string
		attempt int
		vs      []any
		ask     string
		again   bool
	}{
		{"MOVED", 0, []any{moved}, "", true},
		{"ASK", 2, []any{ask}, "127.0.0.1:7002", true},
		{"ASK past the budget", maxRedirects, []any{ask}, "", false},
		{"TRYAGAIN", 0, []any{tryAgain}, "", false},
		{"MOVED beside TRYAGAIN", 0, []any{moved, tryAgain}, "", false},
		{"MOVED beside a reply", 0, []any{moved, int64(1)}, "", false},
	} {
		gotAsk, again := s.redirect(tc.attempt, tc.vs...)
		if gotAsk != tc.ask || again != tc.again {
			t.Errorf("%s: redirect = %q, %v; want %q, %v", tc.name, gotAsk, again, tc.ask, tc.again)
		}
	}
	if !redirected(moved) || !redirected(ask) || redirected(tryAgain) {
		t.Errorf("redirected: MOVED %v, ASK %v, TRYAGAIN %v; want true, true, false", redirected(moved), redirected(ask), redirected(tryAgain))
	}
}
