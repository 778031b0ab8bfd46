package goredis

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
)

// refusal is a server's error reply, as go-redis reads one.
type refusal string

func (r refusal) Error() string { return string(r) }
func (refusal) RedisError()     {}

// TestGuardWritesAgainOnlyAfterARefusal: a command is written again only
// when its reply, read after its last write, refused it without running it
// (MOVED, ASK, CLUSTERDOWN, ...); after TRYAGAIN never (errTryAgain). An error left from before a write (go-redis
// does not set it when a write or an earlier command's read fails, nor
// between a Client's retries) lets nothing through: that write may have
// run. Neither does an error reply that may have run the command.
func TestGuardWritesAgainOnlyAfterARefusal(t *testing.T) {
	write := func(g *guard) error { _, err := g.MarshalBinary(); return err }
	for _, tc := range []struct {
		name  string
		steps []error // the command's error before each write after the first
		want  []bool  // whether each is let through
	}{
		{"MOVED, then its reply", []error{refusal("MOVED 12 127.0.0.1:7001")}, []bool{true}},
		{"MOVED, then ASK from the new node", []error{refusal("MOVED 12 127.0.0.1:7001"), refusal("ASK 12 127.0.0.1:7002")}, []bool{true, true}},
		{"MOVED left from before the last write", []error{refusal("MOVED 12 127.0.0.1:7001"), refusal("MOVED 12 127.0.0.1:7001")}, []bool{true, false}},
		{"a lost reply", []error{errors.New("read tcp: i/o timeout")}, []bool{false}},
		{"a lost reply after MOVED", []error{refusal("MOVED 12 127.0.0.1:7001"), errors.New("read tcp: i/o timeout")}, []bool{true, false}},
		{"an error reply of a command that ran", []error{refusal("ERR Error running script")}, []bool{false}},
		{"no error: a retry after a failed write of another", []error{nil}, []bool{false}},
		// TRYAGAIN lets nothing through, with errTryAgain: Script sends
		// the call again after a pause, a fresh command with a fresh guard.
		{"TRYAGAIN", []error{refusal("TRYAGAIN Multiple keys request during rehashing of slot")}, []bool{false}},
		{"TRYAGAIN after MOVED", []error{refusal("MOVED 12 127.0.0.1:7001"), refusal("TRYAGAIN Multiple keys request during rehashing of slot")}, []bool{true, false}},
		{"CLUSTERDOWN", []error{refusal("CLUSTERDOWN Hash slot not served")}, []bool{true}},
	} {
		cmd := redis.NewCmd(context.Background(), "EVALSHA", "x")
		g := &guard{val: 1, cmd: cmd}
		if err := write(g); err != nil {
			t.Fatalf("%s: first write: %v", tc.name, err)
		}
		for i, e := range tc.steps {
			cmd.SetErr(e)
			err := write(g)
			if got := err == nil; got != tc.want[i] {
				t.Errorf("%s: write %d after the command's error %v: let through = %v (%v); want %v", tc.name, i+2, e, got, err, tc.want[i])
			}
			want := errResend
			if isTryAgain(e) {
				want = errTryAgain
			}
			if err != nil && !errors.Is(err, want) {
				t.Errorf("%s: write %d refused with %v; want %v", tc.name, i+2, err, want)
			}
		}
	}
}
