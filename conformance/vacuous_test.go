package conformance_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quotagate/limiter/conformance"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
)

// broken fails every script call, as a store that cannot reach its server.
type broken struct{ store.Store }

var errBroken = errors.New("broken: connection refused")

func (broken) EvalSha(context.Context, string, []string, []any) (any, error) { return nil, errBroken }
func (broken) Eval(context.Context, string, []string, []any) (any, error)    { return nil, errBroken }

// TestChecksThatCannotPassVacuously: checks whose verdict rests on what
// they saw fail when they saw nothing, instead of passing. Property 27 on a
// store whose every call fails (it passed: 0 admitted, 0 denied); and
// properties 8 and 17 with a Dialer that ignores the address it is given,
// so that the fault proxy forwards nothing (they passed, and the known-bad
// controls that fail them escaped).
func TestChecksThatCannotPassVacuously(t *testing.T) {
	run := func(mk conformance.HarnessMaker, name, want string) {
		t.Helper()
		check, ok := conformance.CheckByName(name)
		if !ok {
			t.Fatalf("no check %s", name)
		}
		outcomes := conformance.Run(context.Background(), mk, []conformance.Spec{conformance.FixedWindow()}, []conformance.Check{check}, false)
		if len(outcomes) != 1 {
			t.Fatalf("%s: %d outcomes", name, len(outcomes))
		}
		o := outcomes[0]
		if msgs := strings.Join(o.Messages, " | "); o.Passed || o.Skipped || !strings.Contains(msgs, want) {
			t.Errorf("%s: passed=%v skipped=%v: %s; want a failure saying %q", name, o.Passed, o.Skipped, msgs, want)
		}
	}
	wrap := func(st store.Store) store.Store { return broken{st} }
	run(conformance.Miniredis(conformance.WrapDialer(dial, wrap)), "replies-slower-than-window", "no call was decided")

	elsewhere := redistest.NewMini(t) // where the Dialer connects, whatever it is told
	stray := func(ctx context.Context, _ string) (store.Store, func(), error) { return dial(ctx, elsewhere.Addr()) }
	for _, name := range []string{"crash-between-commands", "scripts-are-constants"} {
		run(conformance.Miniredis(stray), name, "forwarded no command")
	}
}

// TestScriptsConstantOnSharedServer: on a server the suite shares with
// other clients (RedisAt, as limiter check -redis runs), property 17 judges
// the strategy by the commands its proxy forwards, not by the server's
// script cache, which other clients fill (here one loading a script every
// few milliseconds): FixedWindow passes. (It failed, blaming the strategy
// for the others' scripts.)
func TestScriptsConstantOnSharedServer(t *testing.T) {
	srv := redistest.StartServer(t)
	other, closeOther, err := dial(context.Background(), srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer closeOther()
	ctx, cancel := context.WithCancel(context.Background())
	loaded := make(chan int)
	go func() {
		n := 0
		defer func() { loaded <- n }()
		for ctx.Err() == nil {
			src := "return " + strconv.Itoa(n)
			if _, err := other.Do(ctx, store.Cmd{Name: "SCRIPT", Args: []any{"LOAD", src}}); err == nil {
				n++
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	check, _ := conformance.CheckByName("scripts-are-constants")
	outcomes := conformance.Run(context.Background(), conformance.RedisAt(srv.Addr(), dial), []conformance.Spec{conformance.FixedWindow()}, []conformance.Check{check}, false)
	cancel()
	n := <-loaded
	if o := outcomes[0]; !o.Passed || n == 0 {
		t.Errorf("property 17 on a shared server beside a client that loaded %d scripts: passed=%v skipped=%v: %s; want passed", n, o.Passed, o.Skipped, strings.Join(o.Messages, " | "))
	}
}
