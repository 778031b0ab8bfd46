package knownbad

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/derive"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// clientTimeout is the read timeout of ClientTimeout's and
// BatchClientTimeout's client: longer than a Limiter's timeout, as a
// client's default (go-redis's is 3 s) is, and than the 1 s the fault
// checks allow a call.
const clientTimeout = 1200 * time.Millisecond

// bounded is ctx without its deadline or cancellation, bounded by the
// client's own read timeout instead.
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), clientTimeout)
}

// ClientTimeout wraps st so that its calls (Do, EvalSha, Eval) end at the
// client's own read timeout of 1.2 s, not at the context's deadline, as an
// adapter that calls its client without the context, trusting the
// client's timeouts, does: a slow or blackholed Redis holds every call for
// 1.2 s, whatever the Limiter's timeout, and then fails it as it should (an
// unknown outcome). Its Batch is st's own, with the context.
func ClientTimeout(st store.Store) store.Store { return clientTimeoutStore{st} }

type clientTimeoutStore struct{ store.Store }

func (s clientTimeoutStore) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	bctx, cancel := bounded(ctx)
	defer cancel()
	return s.Store.Do(bctx, cmds...)
}

func (s clientTimeoutStore) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	bctx, cancel := bounded(ctx)
	defer cancel()
	return s.Store.EvalSha(bctx, sha, keys, args)
}

func (s clientTimeoutStore) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	bctx, cancel := bounded(ctx)
	defer cancel()
	return s.Store.Eval(bctx, src, keys, args)
}

func (s clientTimeoutStore) Batch(ctx context.Context, cmds []store.Cmd) []store.Reply {
	return s.Store.(store.Batcher).Batch(ctx, cmds)
}

// BatchClientTimeout wraps st so that its Batch ends at the client's own
// read timeout of 1.2 s, not at the context's deadline (Do and the script
// calls keep the context's), as a Batch written over a client's pipeline
// that takes no context does: a blackholed Redis holds Limiter.AllowMany
// for 1.2 s past a Limiter's timeout of 100 ms, and then fails every ask as
// it should.
func BatchClientTimeout(st store.Store) store.Store { return batchClientTimeout{st} }

type batchClientTimeout struct{ store.Store }

func (s batchClientTimeout) Batch(ctx context.Context, cmds []store.Cmd) []store.Reply {
	bctx, cancel := bounded(ctx)
	defer cancel()
	return s.Store.(store.Batcher).Batch(bctx, cmds)
}

// RefusedBackoff wraps st so that a call refused its connection (Redis
// down: ECONNREFUSED, which a command that was never sent met) is made
// again, until it succeeds, after a backoff of 150 ms, 300 ms, then 600 ms,
// slept with time.Sleep, as retry code that knows such a call is safe to
// make again but not that its caller has a deadline does: with Redis down,
// every call takes over 1 s, whatever the Limiter's timeout. A blackholed
// Redis, which accepts connections, shows nothing.
func RefusedBackoff(st store.Store) store.Store { return refusedBackoff{st} }

type refusedBackoff struct{ store.Store }

// refusedBackoffs are the pauses before each call made again.
var refusedBackoffs = []time.Duration{150 * time.Millisecond, 300 * time.Millisecond, 600 * time.Millisecond}

// refused reports whether err is a refused connection: ECONNREFUSED in
// its chain, or in its text (a client that wraps its dial error with %v).
func refused(err error) bool {
	return err != nil && (errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(err.Error(), "connection refused"))
}

// refusedAgain makes call, and once more after each backoff while it
// fails, when its first try met a refused connection.
func refusedAgain[T any](call func() (T, error)) (T, error) {
	v, err := call()
	if !refused(err) {
		return v, err
	}
	for _, pause := range refusedBackoffs {
		time.Sleep(pause)
		if v, err = call(); err == nil {
			break
		}
	}
	return v, err
}

func (s refusedBackoff) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	return refusedAgain(func() ([]store.Reply, error) { return s.Store.Do(ctx, cmds...) })
}

func (s refusedBackoff) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	return refusedAgain(func() (any, error) { return s.Store.EvalSha(ctx, sha, keys, args) })
}

func (s refusedBackoff) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	return refusedAgain(func() (any, error) { return s.Store.Eval(ctx, src, keys, args) })
}

// LostTailKnown wraps st so that, of the commands of a Batch whose
// round trip broke, only the first whose reply was lost is an unknown
// outcome: the commands behind it get a plain error, as if never sent, as
// a Batch that takes the command being read when the connection broke for
// the only one that reached the server does. They were written with it,
// and may have run: a caller told they were not may count them again.
func LostTailKnown(st store.Store) store.Store { return lostTailKnown{st} }

type lostTailKnown struct{ store.Store }

func (s lostTailKnown) Batch(ctx context.Context, cmds []store.Cmd) []store.Reply {
	rs := s.Store.(store.Batcher).Batch(ctx, cmds)
	first := true
	for i := range rs {
		if errors.Is(rs[i].Err, store.ErrUnknownOutcome) {
			if !first {
				rs[i].Err = fmt.Errorf("knownbad: not sent, the connection broke before it: %v", rs[i].Err)
			}
			first = false
		}
	}
	return rs
}

// ResendingBatch wraps st so that the commands of a Batch whose replies
// were lost are sent again once the client has reconnected, while the
// Batch still reports them as unknown outcomes, as a client that replays
// the commands in flight on a broken connection (an auto-reconnect with
// its queue kept) does: the caller is told the outcome is unknown, and the
// command has run twice.
func ResendingBatch(st store.Store) store.Store { return resendingBatch{st} }

type resendingBatch struct{ store.Store }

func (s resendingBatch) Batch(ctx context.Context, cmds []store.Cmd) []store.Reply {
	b := s.Store.(store.Batcher)
	rs := b.Batch(ctx, cmds)
	if again, _ := lost(cmds, rs); len(again) > 0 {
		// the replay's replies go to nobody
		b.Batch(context.WithoutCancel(ctx), again)
	}
	return rs
}

// ManyAdmitsLost is FixedWindow whose batched results (Limiter.AllowMany)
// read an ask whose reply never came (a lost reply, an unknown outcome; a
// deadline met before it) as admitted, silently: batching code that takes
// a missing reply for a slow server that surely counted the request, and
// lets it pass. The Result is not Degraded and no error reaches the
// Limiter, whose fail mode never applies: with Redis blackholed, every ask
// of a batch passes. Its single calls are right.
type ManyAdmitsLost struct{ strategy.FixedWindow }

// BatchesItself tells AllowMany to batch ManyAdmitsLost's own calls.
func (s ManyAdmitsLost) BatchesItself(derive.Token) any { return s }

// BatchResult implements limiter.ScriptStrategy, wrongly.
func (s ManyAdmitsLost) BatchResult(req limiter.Request, r store.Reply) (limiter.Result, error) {
	if errors.Is(r.Err, store.ErrUnknownOutcome) || errors.Is(r.Err, context.DeadlineExceeded) {
		l := req.Limits[0]
		return limiter.Result{Allowed: true, Remaining: max(l.Rate-req.Cost, 0), ResetAfter: l.Period}, nil
	}
	return s.FixedWindow.BatchResult(req, r)
}
