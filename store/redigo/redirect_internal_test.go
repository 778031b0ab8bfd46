package redigo

import (
	"testing"

	"github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"
)

// TestRedirectFollowsMovedAndAskOnly: a call is sent again after MOVED or
// ASK, up to maxRedirects times (to the node itself after a second MOVED
// to it), never after TRYAGAIN: its reply goes back
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
		last    hop
		vs      []any
		next    hop
		again   bool
	}{
		{"MOVED", 0, hop{}, []any{moved}, hop{moved: "127.0.0.1:7001"}, true},
		// the pool's connection for the slot went elsewhere again: redisc
		// could not reach the node; dial it, so that its failure shows
		{"MOVED twice to one node", 1, hop{moved: "127.0.0.1:7001"}, []any{moved}, hop{addr: "127.0.0.1:7001", moved: "127.0.0.1:7001"}, true},
		{"MOVED to another node", 1, hop{moved: "127.0.0.1:7009"}, []any{moved}, hop{moved: "127.0.0.1:7001"}, true},
		{"ASK", 2, hop{}, []any{ask}, hop{addr: "127.0.0.1:7002", asking: true}, true},
		{"ASK past the budget", maxRedirects, hop{}, []any{ask}, hop{}, false},
		{"TRYAGAIN", 0, hop{}, []any{tryAgain}, hop{}, false},
		{"MOVED beside TRYAGAIN", 0, hop{}, []any{moved, tryAgain}, hop{}, false},
		{"MOVED beside a reply", 0, hop{}, []any{moved, int64(1)}, hop{}, false},
	} {
		next, again := s.redirect(tc.attempt, tc.last, tc.vs...)
		if next != tc.next || again != tc.again {
			t.Errorf("%s: redirect = %+v, %v; want %+v, %v", tc.name, next, again, tc.next, tc.again)
		}
	}
	if !redirected(moved) || !redirected(ask) || redirected(tryAgain) {
		t.Errorf("redirected: MOVED %v, ASK %v, TRYAGAIN %v; want true, true, false", redirected(moved), redirected(ask), redirected(tryAgain))
	}
}
