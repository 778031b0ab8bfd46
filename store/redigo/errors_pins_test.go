package redigo_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/redigo"
)

// A call whose context is already done sends nothing, on any pool (here
// one without Wait, whose GetContext does not look at ctx), and is not an
// unknown outcome: the doc's "once a command was written,
// store.ErrUnknownOutcome" and nothing else.
func TestDoneContextSendsNothing(t *testing.T) {
	srv := redistest.StartServer(t)
	nd := &net.Dialer{}
	p := &redis.Pool{
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redigo.Dial(ctx, nd, "tcp", srv.Addr())
		},
		MaxIdle: 4, // Wait false, MaxActive 0
	}
	defer p.Close()
	st := redigo.New(p, redigo.WithSharedPipelines(0))
	bg := context.Background()
	if _, err := st.Do(bg, store.Cmd{Name: "SET", Args: []any{"k", "0"}}); err != nil {
		t.Fatal(err) // leaves an idle connection in the pool
	}
	s := store.NewScript(`return redis.call("INCR", KEYS[1])`)
	if _, err := s.Run(bg, st, []string{"warm"}, nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		ctx, cancel := context.WithCancel(bg)
		cancel()
		_, err := s.Run(ctx, st, []string{"k"}, nil)
		if err == nil || errors.Is(err, store.ErrUnknownOutcome) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Run with a done ctx = %v; want context.Canceled without ErrUnknownOutcome", err)
		}
		_, err = st.Do(ctx, store.Cmd{Name: "INCR", Args: []any{"k"}})
		if err == nil || errors.Is(err, store.ErrUnknownOutcome) {
			t.Fatalf("Do with a done ctx = %v; want an error without ErrUnknownOutcome", err)
		}
		_, err = st.Do(ctx, store.Cmd{Name: "INCR", Args: []any{"k"}}, store.Cmd{Name: "INCR", Args: []any{"k"}})
		if err == nil || errors.Is(err, store.ErrUnknownOutcome) {
			t.Fatalf("Do of a pipeline with a done ctx = %v; want an error without ErrUnknownOutcome", err)
		}
	}
	rs, err := st.Do(bg, store.Cmd{Name: "GET", Args: []any{"k"}})
	if err != nil || rs[0].Val != "0" {
		t.Fatalf("k = %v, %v; want 0: a call with a done ctx ran", rs, err)
	}
}

// A shared pipeline whose reply is lost after its commands were written:
// every call in it that may have run is store.ErrUnknownOutcome (doc of
// WithSharedPipelines: "one whose context ends after is
// store.ErrUnknownOutcome"; package doc: "When the reply to a written
// command is lost (connection cut, ...) the call fails with an error
// wrapping store.ErrUnknownOutcome").
func TestSharedPipelineLostReplyIsUnknown(t *testing.T) {
	srv := redistest.StartServer(t)
	px := redistest.NewProxy(t, srv.Addr())
	p := newPool(px.Addr(), 8)
	defer p.Close()
	st := redigo.New(p, redigo.WithSharedPipelines(1))
	bg := context.Background()
	s := store.NewScript(`return redis.call("INCR", KEYS[1])`)
	if _, err := s.Run(bg, st, []string{"warm"}, nil); err != nil {
		t.Fatal(err)
	}
	px.Delay(300 * time.Millisecond)
	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); _, _ = s.Run(ctx, st, []string{"a"}, nil) }() // alone, in flight
	time.Sleep(100 * time.Millisecond)
	px.DropReply("EVALSHA")
	keys := []string{"b", "c", "d"}
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = s.Run(ctx, st, []string{k}, nil) }()
	}
	wg.Wait()
	<-done
	px.Delay(0)
	ran := 0
	for i, k := range keys {
		rs, err := st.Do(bg, store.Cmd{Name: "GET", Args: []any{k}})
		if err != nil {
			t.Fatal(err)
		}
		if rs[0].Val == "1" {
			ran++
			if !errors.Is(errs[i], store.ErrUnknownOutcome) && errs[i] != nil {
				t.Errorf("call on %s ran (counter 1) but its error %v does not wrap ErrUnknownOutcome", k, errs[i])
			}
		}
		t.Logf("%s: %v, %v", k, rs[0].Val, errs[i])
	}
	if px.Disarm() {
		t.Fatal("the fault never fired: the calls did not share a pipeline")
	}
}

// An error element of EXEC's array is the adapter's error: prefixed
// "redigo: ", a NOSCRIPT one wrapping store.ErrNoScript as a command's
// own NOSCRIPT does (package doc, Replies), as the go-redis adapter's.
func TestErrorElementMapped(t *testing.T) {
	srv := redistest.StartServer(t)
	p := newPool(srv.Addr(), 2)
	defer p.Close()
	st := redigo.New(p)
	rs, err := st.Do(context.Background(),
		store.Cmd{Name: "MULTI"},
		store.Cmd{Name: "EVALSHA", Args: []any{"0000000000000000000000000000000000000000", 0}},
		store.Cmd{Name: "EXEC"})
	if err != nil {
		t.Fatal(err)
	}
	arr, err := store.Slice(rs[2].Val)
	if err != nil || len(arr) != 1 {
		t.Fatalf("EXEC = %#v, %v", rs[2], err)
	}
	e, ok := arr[0].(error)
	if !ok || !errors.Is(e, store.ErrNoScript) || !strings.HasPrefix(e.Error(), "redigo: ") {
		t.Errorf("EXEC's NOSCRIPT element = %#v; want a \"redigo: \" error wrapping store.ErrNoScript", arr[0])
	}
}
