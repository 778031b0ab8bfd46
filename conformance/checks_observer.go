package conformance

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/quotagate/limiter"
)

// observed counts what an Observer was told.
type observed struct {
	decisions, degraded, errors int
}

// countingObserver is a limiter.Observer that counts calls and checks that
// each one carries the caller's context and key.
type countingObserver struct {
	ctxKey  any
	subject string

	mu    sync.Mutex
	n     observed
	wrong []string
}

func (o *countingObserver) check(ctx context.Context, key, hook string) {
	if ctx.Value(o.ctxKey) != o.subject || key != o.subject {
		o.wrong = append(o.wrong, fmt.Sprintf("%s got key %q and a context without the caller's value", hook, key))
	}
}

func (o *countingObserver) OnDecision(ctx context.Context, key string, r limiter.Result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.check(ctx, key, "OnDecision")
	o.n.decisions++
	if r.Degraded {
		o.n.degraded++
	}
}

func (o *countingObserver) OnError(ctx context.Context, key string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.check(ctx, key, "OnError")
	if err == nil {
		o.wrong = append(o.wrong, "OnError got a nil error")
	}
	o.n.errors++
}

func (o *countingObserver) snapshot() (observed, []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n, append([]string(nil), o.wrong...)
}

// p26Key is the context key property 26 passes through the limiter.
type p26Key struct{}

// Property 26: no accidental fail-open. Every decision not backed by a
// Redis reply is Degraded (FailOpen, FailClosed) or an error (FailError),
// never a plain admission; and the observer hears of every call exactly
// once: OnDecision for each Result, OnError for each call that met an
// error, with the caller's context and key.
func checkNoAccidentalFailOpen(c *checker) {
	p, st := c.proxied()
	const subject = "p26"
	l := limiter.PerHour(1000)
	c.window(l)
	ctx := context.WithValue(c.ctx, p26Key{}, subject)
	modes := []limiter.FailMode{limiter.FailError, limiter.FailOpen, limiter.FailClosed}
	obs := make([]*countingObserver, len(modes))
	lims := make([]*limiter.Limiter, len(modes))
	up := make([]*limiter.Limiter, len(modes)) // the same, with a long timeout
	for i, m := range modes {
		obs[i] = &countingObserver{ctxKey: p26Key{}, subject: subject}
		lims[i] = c.limiter(st, limiter.WithTimeout(faultTimeout), limiter.WithFailMode(m), limiter.WithObserver(obs[i]))
		up[i] = c.limiter(st, limiter.WithTimeout(healthyTimeout), limiter.WithFailMode(m), limiter.WithObserver(obs[i]))
	}

	// Redis up: every call decided by Redis, told once to OnDecision.
	const healthy = 3
	for i, lim := range up {
		for j := 0; j < healthy; j++ {
			r, err, _ := c.timedCall(ctx, lim, subject, l)
			if err != nil || !r.Allowed || r.Degraded || r.Cause != nil {
				c.t.Errorf("property 26: Redis up, %s: call %d = %+v, %v; want admitted by Redis", modes[i], j, r, err)
			}
		}
		n, wrong := obs[i].snapshot()
		if n != (observed{decisions: healthy}) {
			c.t.Errorf("property 26: Redis up, %s: observer told %+v for %d decisions; want each decision once and no error", modes[i], n, healthy)
		}
		for _, w := range wrong {
			c.t.Errorf("property 26: %s: %s", modes[i], w)
		}
	}
	if c.spec.Counter {
		if n := c.counter(subject, l); n != healthy*int64(len(modes)) {
			c.t.Errorf("property 26: server counter %d after %d admitted calls", n, healthy*len(modes))
		}
	}

	// Redis unreachable: no call can be backed by a reply.
	unreachable := func(state string, calls int) {
		for i, lim := range lims {
			before, _ := obs[i].snapshot()
			for j := 0; j < calls; j++ {
				r, err, took := c.timedCall(ctx, lim, subject, l)
				if took > faultTimeout+faultMargin {
					c.t.Errorf("property 26: %s, %s: call took %s with a %s timeout", state, modes[i], took, faultTimeout)
				}
				switch {
				case modes[i] == limiter.FailError && err == nil:
					c.t.Errorf("property 26: %s, FailError: call %d = %+v and no error: a decision no Redis reply backs (admitted=%v) reached the caller as a plain Result", state, j, r, r.Allowed)
				case modes[i] == limiter.FailError:
				case err != nil:
					c.t.Errorf("property 26: %s, %s: call %d returned error %v; want a Degraded Result", state, modes[i], j, err)
				case !r.Degraded || r.Cause == nil:
					c.t.Errorf("property 26: %s, %s: call %d = %+v: a decision no Redis reply backs is not marked Degraded with its Cause", state, modes[i], j, r)
				case r.Allowed != (modes[i] == limiter.FailOpen):
					c.t.Errorf("property 26: %s, %s: call %d admitted=%v against the fail mode", state, modes[i], j, r.Allowed)
				}
			}
			after, wrong := obs[i].snapshot()
			want := observed{decisions: before.decisions, degraded: before.degraded, errors: before.errors + calls}
			if modes[i] != limiter.FailError {
				want.decisions += calls
				want.degraded += calls
			}
			if after != want {
				c.t.Errorf("property 26: %s, %s: after %d failed calls the observer was told %+v (from %+v); want %+v: OnError exactly once per failed call, OnDecision once per Degraded Result", state, modes[i], calls, after, before, want)
			}
			for _, w := range wrong {
				c.t.Errorf("property 26: %s, %s: %s", state, modes[i], w)
			}
		}
	}
	p.Blackhole(true)
	unreachable("blackholed", 1)
	p.Blackhole(false)
	_ = p.Close()
	unreachable("down", 2)
}

// timedCall calls lim.Allow with ctx under a watchdog and reports how long
// it took.
func (c *checker) timedCall(ctx context.Context, lim *limiter.Limiter, subject string, l limiter.Limit) (limiter.Result, error, time.Duration) {
	type out struct {
		r   limiter.Result
		err error
	}
	ch := make(chan out, 1)
	start := time.Now()
	go func() {
		r, err := lim.Allow(ctx, subject, l)
		ch <- out{r, err}
	}()
	select {
	case o := <-ch:
		return o.r, o.err, time.Since(start)
	case <-time.After(faultWatchdog):
		return limiter.Result{}, fmt.Errorf("no answer within %s", faultWatchdog), faultWatchdog
	}
}
