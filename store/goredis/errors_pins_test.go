package goredis_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

func pinStore(t *testing.T) store.Store {
	srv := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	return goredis.New(rdb)
}

// A RESP3 boolean (a script's Lua boolean after redis.setresp(3); go-redis
// speaks RESP3 by default) is normalised to int64 1 or 0: Reply.Val is
// int64, string, []any or nil (store.Reply).
func TestRESP3Boolean(t *testing.T) {
	st := pinStore(t)
	ctx := context.Background()
	v, err := st.Eval(ctx, `redis.setresp(3) return redis.call("EXISTS", KEYS[1]) == 0`, []string{"k"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := st.Do(ctx, store.Cmd{Name: "EVAL", Args: []any{`redis.setresp(3) return {true, false}`, 0}})
	if err != nil {
		t.Fatal(err)
	}
	if v != int64(1) || rs[0].Err != nil {
		t.Errorf("boolean true = %#v; want int64(1)", v)
	}
	if arr, ok := rs[0].Val.([]any); !ok || len(arr) != 2 || arr[0] != int64(1) || arr[1] != int64(0) {
		t.Errorf("boolean array = %#v; want [1 0]", rs[0].Val)
	}
}

// A server that refuses every command with LOADING ran nothing. A Client
// retries the refusal as it retries a lost reply, without telling the
// adapter which it met: with its defaults the script call is written once
// and ends as an unknown outcome; with MaxRetries -1 the refusal is the
// call's error (the package doc).
func TestLoadingOnAClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var scripts atomic.Int64 // EVALSHA and EVAL commands that arrived
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					// one RESP array command: *N, then N bulk strings
					line, err := r.ReadString('\n')
					if err != nil || len(line) < 2 {
						return
					}
					n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
					for i := 0; i < 2*n; i++ {
						arg, err := r.ReadString('\n')
						if err != nil {
							return
						}
						if i == 1 && strings.HasPrefix(strings.ToUpper(arg), "EVAL") {
							scripts.Add(1)
						}
					}
					if _, err := c.Write([]byte("-LOADING Redis is loading the dataset in memory\r\n")); err != nil {
						return
					}
				}
			}(c)
		}
	}()
	for _, retries := range []int{0, -1} { // 0: go-redis's default, 3
		rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), MaxRetries: retries})
		st := goredis.New(rdb, goredis.WithSharedPipelines(0))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		scripts.Store(0)
		_, err := store.NewScript(`return redis.call("INCR", KEYS[1])`).RunInt64s(ctx, st, []string{"k"}, nil, nil)
		sent := scripts.Load()
		if retries == 0 {
			if !errors.Is(err, store.ErrUnknownOutcome) || sent != 1 {
				t.Errorf("default retries: a script call refused with LOADING = %v, written %d times; want ErrUnknownOutcome, written once", err, sent)
			}
		} else if err == nil || errors.Is(err, store.ErrUnknownOutcome) || !strings.Contains(err.Error(), "LOADING") || sent != 1 {
			t.Errorf("MaxRetries -1: a script call refused with LOADING = %v, written %d times; want the LOADING refusal, written once", err, sent)
		}
		cancel()
		_ = rdb.Close()
	}
}

// A Batch given up at its deadline before its commands were written (the
// connection's set-up is not answered) fails without ErrUnknownOutcome:
// package doc "one that the pipeline never wrote (... or the call was
// given up before it left) fails without store.ErrUnknownOutcome".
func TestBatchGivenUpBeforeWriteIsKnown(t *testing.T) {
	srv := redistest.StartServer(t)
	px := redistest.NewProxy(t, srv.Addr())
	px.Blackhole(true)
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr()}) // no ContextTimeoutEnabled: the adapter bounds calls
	defer rdb.Close()
	st := goredis.New(rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	out := st.Batch(ctx, []store.Cmd{{Name: "INCR", Args: []any{"a"}}, {Name: "INCR", Args: []any{"b"}}})
	for i, r := range out {
		if !errors.Is(r.Err, context.DeadlineExceeded) || errors.Is(r.Err, store.ErrUnknownOutcome) {
			t.Errorf("reply %d = %v; want DeadlineExceeded, not ErrUnknownOutcome", i, r.Err)
		}
	}
}
