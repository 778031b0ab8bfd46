package limiter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/quotagate/limiter/internal/derive"
	"github.com/quotagate/limiter/store"
)

// Ask is one decision of AllowMany: consume Cost from every limit of Key,
// or nothing if any limit would be exceeded.
type Ask struct {
	// Key is the subject, as for Allow.
	Key string
	// Cost is the amount to consume. 0 is taken as 1: AllowMany always
	// consumes (use Peek to read a state).
	Cost int64
	// Limits are the subject's limits, as for Allow.
	Limits []Limit
}

// Answer is the outcome of one Ask: what AllowN would have returned for it.
type Answer struct {
	Result Result
	Err    error
}

// batchWorkers bounds the concurrent calls AllowMany makes when the
// strategy or the store cannot batch.
const batchWorkers = 16

// AllowMany makes many independent decisions (different subjects, limits
// and costs) at once, each exactly as AllowN would make it: answers[i] is
// the outcome of asks[i], with its own error. A bad ask (an empty key, an
// invalid limit, a negative cost) is its own sentinel error, and the others
// are decided; the fail mode applies to each decision Redis could not make.
//
// When the strategy decides with one script (a ScriptStrategy:
// FixedWindow, GCRA, TokenBucket, SlidingWindow and SlidingLog of package
// strategy; or its AlignedWindow) and the store can batch (store.Batcher:
// every adapter of this module), the decisions go in one pipeline per
// Redis server, the servers of a Cluster in parallel, and a script missing
// from a server's cache is sent once more for the batch. When the store
// reaches one server (store.OneServer) and the strategy's script has a
// many-request companion (ManyScriptStrategy: those five; and
// AlignedWindow's), up to 64 decisions go in one call of the companion,
// which makes each exactly as the script would alone: the server runs one
// script instead of 64, and an ask that fails there (a corrupt counter)
// gets its own error while the others are decided. AlignedWindow's calls
// that name another window than the server's clock is in (the app's clock
// jumped) are counted nowhere and go again, named from the server's time,
// in another batch, as its Decide makes them again, and the asks that
// name a key of one of them go again behind it. Otherwise (Bucketed,
// Optimistic: transactions; a type that embeds a strategy of package
// strategy, decided with its Decide, which may be its own) each decision is
// its own call, up to 16 subjects at a time. Asks of one subject are
// decided in their order, as the same calls one after another: through a
// store that may reach several servers (a Cluster, where a node may
// redirect a call, or refuse it for a moment during a slot's migration),
// an ask that names a key of an earlier one goes in a later pipeline, once
// the earlier one is decided. A call refused with TRYAGAIN (store.ErrTryAgain)
// goes again after a pause, as store.Script sends it. The Limiter's timeout
// bounds the whole batch.
func (l *Limiter) AllowMany(ctx context.Context, asks []Ask) []Answer {
	answers := make([]Answer, len(asks))
	ss, scripted := l.strategy.(ScriptStrategy)
	if sb, ok := l.strategy.(derive.ScriptBatcher); ok && !derive.Own(l.strategy, sb.BatchesItself(derive.Token{})) {
		scripted = false // a type that embeds one: its own Decide decides
	}
	rb, rounds := l.strategy.(roundBatcher)
	rounds = rounds && l.derives // not through a type that embeds one
	b, batcher := l.st.(store.Batcher)
	if !scripted && !rounds || !batcher {
		l.allowEach(ctx, asks, answers)
		return answers
	}
	if rounds {
		ss = nil
	}
	start := time.Now()
	sc := getBatchScratch(asks)
	defer sc.release()
	for i, a := range asks {
		req, script, args, err := l.batchRequest(ss, a, &sc.batchBacking)
		if err != nil {
			l.answer(ctx, answers, i, a.Key, Result{}, err, start)
			continue
		}
		if req.cachedOK {
			l.answer(ctx, answers, i, a.Key, req.cached, nil, start)
			continue
		}
		// (as decideDirect's: leases of another form of these limits are
		// not used after this call)
		if end := l.backs.flights(l.keys.prefix, a.Key, a.Limits); end != nil {
			defer end()
		}
		if ss != nil {
			sc.calls = append(sc.calls, scriptCall{Script: script, Keys: req.Keys, Args: args})
		}
		sc.pend, sc.reqs = append(sc.pend, i), append(sc.reqs, req.Request)
	}
	pend, reqs := sc.pend, sc.reqs
	if len(pend) == 0 {
		return answers
	}
	// a denial is remembered from when it was asked, on the deny cache's
	// clock (the Limiter's: WithClock), as Allow's
	var sent time.Time
	if l.deny != nil {
		sent = l.deny.now()
	}
	mark := l.backs.mark()
	bctx, cancel := l.withTimeout(ctx)
	sd := sender{b: b, sc: sc}
	if ms, ok := l.strategy.(manyScripter); ok && oneServer(l.st) {
		sd.many = ms
	}
	outs := slices.Grow(sc.outs[:0], len(pend))[:len(pend)]
	sc.outs = outs
	if rounds {
		rb.DecideRounds(derive.Token{}, bctx, l.st, reqs, sd.sendCalls(bctx), sd.many != nil, outs)
	} else {
		replies := sd.send(bctx, sc.calls)
		for j, req := range reqs {
			outs[j].Result, outs[j].Err = ss.BatchResult(req, replies[j])
		}
	}
	cancel()
	for j, i := range pend {
		req, res, err := reqs[j], outs[j].Result, outs[j].Err
		if err != nil {
			res, err = l.failed(err, req.Limits[0])
		} else {
			res.Limit = req.Limits[res.Index]
			if l.deny != nil && !res.Allowed {
				l.deny.remember(l.keys.prefix, asks[i].Key, req.Cost, req.Limits, res, sent, l.backs, mark)
			}
		}
		l.answer(ctx, answers, i, asks[i].Key, res, err, start)
	}
	return answers
}

// roundBatcher is implemented by this module's strategies whose decision
// is one script call on keys they name themselves, from their estimate of
// the server's clock, a call the server may answer "another window" and
// that is then made again (AlignedWindow). AllowMany hands such a strategy
// the batch's requests and a function that sends one batch of calls
// (packed in many-request script calls, derive.ManyPerCall each, when many
// is set); the strategy sends a batch per round (the calls to make again
// in the next) and writes each request's outcome in out. The method takes a type only
// this module can name, and AllowMany calls it only on a strategy that
// declares derive.KeyDeriver itself: a type that embeds AlignedWindow has
// its own Decide called.
type roundBatcher interface {
	DecideRounds(tok derive.Token, ctx context.Context, st store.Store, reqs []Request, send func([]derive.Call) []store.Reply, many bool, out []Answer)
}

// manyScripter is the method of ManyScriptStrategy that AllowMany needs:
// a strategy that decides in rounds has it without being a ScriptStrategy.
type manyScripter interface {
	ManyScript(s *store.Script) *store.Script
}

// sender sends a batch's script calls through b, packed in calls of their
// many-request companions when many is set (the store reaches one server).
type sender struct {
	b    store.Batcher
	sc   *batchScratch
	many manyScripter
}

// send sends calls and returns one reply per call (in sc when packed).
// Packed, the calls of each script go together, in the order of each
// script's first call: calls of different scripts on a common key would
// then run out of order, and so would a call sent again with its source
// (NOSCRIPT) after a later one that ran. So the calls are cut where a call
// names a key of an earlier call of another script, and each run of calls
// is sent once the one before it has its replies.
func (sd sender) send(ctx context.Context, calls []scriptCall) []store.Reply {
	if sd.many == nil {
		return sendInOrder(ctx, sd.b, calls)
	}
	sc := sd.sc
	replies := slices.Grow(sc.replies[:0], len(calls))[:len(calls)]
	for len(calls) > 0 {
		n := scriptRun(calls)
		packed, parts := sc.packMany(sd.many, calls[:n])
		unpackMany(sendScripts(ctx, sd.b, packed), parts, replies[len(replies)-len(calls):])
		calls = calls[n:]
	}
	sc.replies = replies
	return replies
}

// scriptRun returns how many of calls, from the first, name no key that a
// call of another script among them named earlier: all of them when they
// are calls of one script (the common batch, without a map).
func scriptRun(calls []scriptCall) int {
	j := 1
	for j < len(calls) && calls[j].Script == calls[0].Script {
		j++
	}
	if j == len(calls) {
		return j
	}
	owner := make(map[string]*store.Script)
	for i, c := range calls {
		for _, k := range c.Keys {
			if s, ok := owner[k]; ok && s != c.Script {
				return i
			}
		}
		for _, k := range c.Keys {
			owner[k] = c.Script
		}
	}
	return len(calls)
}

// sendCalls is send for a roundBatcher's calls.
func (sd sender) sendCalls(ctx context.Context) func([]derive.Call) []store.Reply {
	return func(calls []derive.Call) []store.Reply { return sd.send(ctx, calls) }
}

// scriptCall is one call of a script on keys with args: the form a
// round batcher hands AllowMany its calls in, too.
type scriptCall = derive.Call

// callCmd is c as a command: EVALSHA, or EVAL with the script's source.
func callCmd(c scriptCall, eval bool) store.Cmd {
	a := make([]any, 0, 2+len(c.Keys)+len(c.Args))
	name := "EVALSHA"
	if eval {
		name = "EVAL"
		a = append(a, c.Script.Source(), len(c.Keys))
	} else {
		a = append(a, c.Script.Hash(), len(c.Keys))
	}
	for _, k := range c.Keys {
		a = append(a, k)
	}
	return store.Cmd{Name: name, Args: append(a, c.Args...)}
}

// sendInOrder is sendScripts for a store that may reach several servers
// (a Cluster): a call that names a key of an earlier call of the batch goes
// in a later batch, sent once the earlier one's outcome is known. A node
// may refuse a call for a moment (TRYAGAIN: sendScripts sends it again
// after a pause) or redirect it (ASK, MOVED: the client follows), and a
// later call on the same keys in the same batch would then run first: the
// asks of one subject would not be decided in their order. A batch
// without a key named twice goes as one.
func sendInOrder(ctx context.Context, b store.Batcher, calls []scriptCall) []store.Reply {
	if len(calls) < 2 {
		return sendScripts(ctx, b, calls)
	}
	// round[j]: the batch of call j, one after the last batch that holds a
	// call on one of its keys
	round := make([]int, len(calls))
	last := make(map[string]int, len(calls))
	rounds := 1
	for j, c := range calls {
		r := 1
		for _, k := range c.Keys {
			r = max(r, last[k]+1)
		}
		for _, k := range c.Keys {
			last[k] = r
		}
		round[j], rounds = r, max(rounds, r)
	}
	if rounds == 1 {
		return sendScripts(ctx, b, calls)
	}
	replies := make([]store.Reply, len(calls))
	var idx []int
	var sub []scriptCall
	for r := 1; r <= rounds; r++ {
		idx, sub = idx[:0], sub[:0]
		for j, c := range calls {
			if round[j] == r {
				idx, sub = append(idx, j), append(sub, c)
			}
		}
		for k, rep := range sendScripts(ctx, b, sub) {
			replies[idx[k]] = rep
		}
	}
	return replies
}

// sendScripts sends calls as one batch of EVALSHAs. A server that lost its
// script cache answers NOSCRIPT without running anything: those calls go
// once more, with the source. A Cluster node that answers TRYAGAIN (a
// call's keys split by a slot migration) ran nothing either: those calls go
// again after a pause, while store.TryAgainPause allows.
func sendScripts(ctx context.Context, b store.Batcher, calls []scriptCall) []store.Reply {
	cmds := make([]store.Cmd, len(calls))
	for j, c := range calls {
		cmds[j] = callCmd(c, false)
	}
	replies := b.Batch(ctx, cmds)
	var evaled []bool // the calls sent with their source
	gaveUp := false   // on TRYAGAIN
	for try := 1; ; {
		var again []int
		wait := false
		for j, r := range replies {
			switch {
			case r.Err == nil:
			case errors.Is(r.Err, store.ErrNoScript) && (evaled == nil || !evaled[j]):
				if evaled == nil {
					evaled = make([]bool, len(calls))
				}
				evaled[j] = true
				again = append(again, j)
			case !gaveUp && errors.Is(r.Err, store.ErrTryAgain):
				again, wait = append(again, j), true
			}
		}
		if wait {
			if store.TryAgainPause(ctx, try) {
				try++
			} else {
				// only the calls to send with their source go again
				gaveUp = true
				again = slices.DeleteFunc(again, func(j int) bool { return errors.Is(replies[j].Err, store.ErrTryAgain) })
			}
		}
		if len(again) == 0 {
			return replies
		}
		resend := make([]store.Cmd, len(again))
		for k, j := range again {
			resend[k] = callCmd(calls[j], evaled != nil && evaled[j])
		}
		for k, r := range b.Batch(ctx, resend) {
			replies[again[k]] = r
		}
	}
}

// oneServer reports whether st says one server holds all its keys.
func oneServer(st store.Store) bool {
	o, ok := st.(store.OneServer)
	return ok && o.OneServer()
}

// manyPerCall is the most requests AllowMany puts in one many-request
// script call (see derive.ManyPerCall).
const manyPerCall = derive.ManyPerCall

// manyPart is the calls that one call of packMany's carries: one call
// alone (many false) or those of a many-request script, in order.
type manyPart struct {
	calls []int
	many  bool
}

// packMany puts the calls whose script has a many-request companion in
// calls of it, up to manyPerCall each (one alone as well), and leaves the
// others as they are.
// parts[k] says which of calls the call packed[k] carries. What it returns
// lives in sc.
func (sc *batchScratch) packMany(ms manyScripter, calls []scriptCall) (packed []scriptCall, parts []manyPart) {
	// the calls of each script, in order: one script (the common batch)
	// without a map
	idx := sc.idx[:0]
	var order []*store.Script
	var groups map[*store.Script][]int
	for j, c := range calls {
		idx = append(idx, j)
		if c.Script != calls[0].Script && groups == nil {
			groups = make(map[*store.Script][]int)
		}
	}
	sc.idx = idx
	if groups == nil {
		order = []*store.Script{calls[0].Script}
	} else {
		for j, c := range calls {
			if _, seen := groups[c.Script]; !seen {
				order = append(order, c.Script)
			}
			groups[c.Script] = append(groups[c.Script], j)
		}
	}
	packed, parts = sc.packed[:0], sc.parts[:0]
	keys, args := sc.mkeys[:0], sc.margs[:0]
	for _, s := range order {
		many := ms.ManyScript(s)
		js := idx
		if groups != nil {
			js = groups[s]
		}
		for len(js) > 0 {
			if many == nil {
				packed = append(packed, calls[js[0]])
				parts = append(parts, manyPart{calls: js[:1]})
				js = js[1:]
				continue
			}
			// (a call left alone goes in a many-request call too: calls
			// of one script under two SHAs, one cached and one not, would
			// run out of order, the NOSCRIPT ones after)
			n := min(len(js), manyPerCall)
			part := js[:n]
			js = js[n:]
			var m scriptCall
			m, keys, args = manyCall(many, calls, part, keys, args)
			packed = append(packed, m)
			parts = append(parts, manyPart{calls: part, many: true})
		}
	}
	sc.packed, sc.parts, sc.mkeys, sc.margs = packed, parts, keys, args
	return packed, parts
}

// manyCall is the call of the many-request script many that carries the
// calls part of calls: their keys, then for each its number of keys, its
// number of arguments and its arguments, or -1 for arguments equal to the
// call's before it (asks under the same limits and cost: sent once). Its
// keys and arguments are appended to keys and args, which are returned
// extended.
func manyCall(many *store.Script, calls []scriptCall, part []int, keys []string, args []any) (scriptCall, []string, []any) {
	nkeys, nargs := 0, 0
	for _, j := range part {
		nkeys += len(calls[j].Keys)
		nargs += 2 + len(calls[j].Args)
	}
	// a call's own full slices: appending to one never writes another's
	keys, args = slices.Grow(keys, nkeys), slices.Grow(args, nargs)
	k0, a0 := len(keys), len(args)
	m := scriptCall{Script: many, Keys: keys[k0 : k0 : k0+nkeys], Args: args[a0 : a0 : a0+nargs]}
	var prev []any
	for _, j := range part {
		c := calls[j]
		m.Keys = append(m.Keys, c.Keys...)
		if prev != nil && sameArgs(c.Args, prev) {
			m.Args = append(m.Args, len(c.Keys), -1)
			continue
		}
		m.Args = append(m.Args, len(c.Keys), len(c.Args))
		m.Args = append(m.Args, c.Args...)
		prev = c.Args
	}
	return m, keys[:k0+len(m.Keys)], args[:a0+len(m.Args)]
}

// sameArgs reports whether a and b are the same integer and string
// arguments (another type, a []byte say, is never taken as the same).
func sameArgs(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i, x := range a {
		switch x.(type) {
		case int64, int, string:
			if x != b[i] {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// unpackMany spreads the replies to packMany's calls over the calls they
// carried, into out (one per call): a many-request call's array gives each
// its element (an error element is the call's error reply); a failed call
// fails each.
func unpackMany(replies []store.Reply, parts []manyPart, out []store.Reply) []store.Reply {
	for k, p := range parts {
		r := replies[k]
		if !p.many {
			out[p.calls[0]] = r
			continue
		}
		elems, ok := r.Val.([]any)
		if r.Err == nil && (!ok || len(elems) != len(p.calls)) {
			r.Err = fmt.Errorf("limiter: a many-request script answered %T (%d elements) to %d requests", r.Val, len(elems), len(p.calls))
		}
		for i, j := range p.calls {
			switch {
			case r.Err != nil:
				out[j] = store.Reply{Err: r.Err}
			case elems[i] == nil:
				out[j] = store.Reply{Err: store.ErrNil}
			default:
				if e, isErr := elems[i].(error); isErr {
					out[j] = store.Reply{Err: e}
				} else {
					out[j] = store.Reply{Val: elems[i]}
				}
			}
		}
	}
	return out
}

// batchReq is one ask's Request, or the deny cache's answer (cachedOK).
type batchReq struct {
	Request
	cached   Result
	cachedOK bool
}

// batchBacking holds the keys and the copies of the limits of a batch's
// requests, each request's a full slice of them.
type batchBacking struct {
	keys   []string
	limits []Limit
}

// batchScratch is AllowMany's working memory. Nothing in it outlives the
// call: the store gets commands of their own (callCmd copies),
// strategies bind results by value, and the deny cache copies the limits
// it keeps. So it is pooled, and cleared before it goes back.
type batchScratch struct {
	batchBacking
	// the asks that go to Redis: their indexes, their requests and (for a
	// ScriptStrategy) their calls, and their outcomes
	pend  []int
	reqs  []Request
	calls []scriptCall
	outs  []Answer
	// packMany's: the calls' indexes, the packed calls, their parts, and
	// the packed calls' keys and arguments
	idx    []int
	packed []scriptCall
	parts  []manyPart
	mkeys  []string
	margs  []any
	// the replies unpacked, one per call
	replies []store.Reply
}

var batchScratches = sync.Pool{New: func() any { return new(batchScratch) }}

// maxPooledAsks bounds the batches whose scratch goes back to the pool, so
// that one huge batch does not keep its memory alive.
const maxPooledAsks = 1024

// getBatchScratch returns a scratch with room for asks' requests.
func getBatchScratch(asks []Ask) *batchScratch {
	n := 0
	for _, a := range asks {
		n += len(a.Limits)
	}
	sc := batchScratches.Get().(*batchScratch)
	sc.keys, sc.limits = slices.Grow(sc.keys[:0], n), slices.Grow(sc.limits[:0], n)
	sc.pend, sc.reqs = slices.Grow(sc.pend[:0], len(asks)), slices.Grow(sc.reqs[:0], len(asks))
	sc.calls = slices.Grow(sc.calls[:0], len(asks))
	return sc
}

// release clears what sc holds, so that the pool keeps no caller's data
// alive, and returns it to the pool.
func (sc *batchScratch) release() {
	if cap(sc.pend) > maxPooledAsks || cap(sc.keys) > maxPooledAsks*MaxLimits {
		return
	}
	clear(sc.keys)
	clear(sc.limits)
	clear(sc.pend)
	clear(sc.calls)
	clear(sc.packed)
	clear(sc.parts)
	clear(sc.mkeys)
	clear(sc.margs)
	clear(sc.replies)
	clear(sc.reqs)
	clear(sc.outs)
	sc.keys, sc.limits, sc.pend, sc.calls = sc.keys[:0], sc.limits[:0], sc.pend[:0], sc.calls[:0]
	sc.idx, sc.packed, sc.parts, sc.mkeys, sc.margs = sc.idx[:0], sc.packed[:0], sc.parts[:0], sc.mkeys[:0], sc.margs[:0]
	sc.replies, sc.reqs, sc.outs = sc.replies[:0], sc.reqs[:0], sc.outs[:0]
	batchScratches.Put(sc)
}

// batchRequest makes ask a's request, its keys and limits in b, and its
// call of ss's script (none when ss is nil: a strategy that decides in
// rounds, whose keys are laid out with Request.AppendKey).
func (l *Limiter) batchRequest(ss ScriptStrategy, a Ask, b *batchBacking) (batchReq, *store.Script, []any, error) {
	cost := a.Cost
	if cost == 0 {
		cost = 1
	}
	if cost < 0 {
		return batchReq{}, nil, nil, fmt.Errorf("%w: %d is negative", ErrInvalidCost, cost)
	}
	var req Request
	var dst []string
	if from, to := len(b.keys), len(b.keys)+len(a.Limits); ss != nil && to <= cap(b.keys) {
		dst = b.keys[from:to:to]
	}
	if err := l.layKeys(&req, a.Key, a.Limits, ss == nil, dst); err != nil {
		return batchReq{}, nil, nil, err
	}
	if dst != nil {
		b.keys = b.keys[:len(b.keys)+len(req.Keys)] // built in place
	}
	if l.deny != nil {
		if r, ok := l.deny.lookup(l.keys.prefix, a.Key, cost, a.Limits); ok {
			return batchReq{cached: r, cachedOK: true}, nil, nil, nil
		}
	}
	from := len(b.limits)
	b.limits = append(b.limits, a.Limits...)
	req.Limits, req.Cost = b.limits[from:len(b.limits):len(b.limits)], cost
	if ss == nil {
		return batchReq{Request: req}, nil, nil, nil
	}
	script, args, err := ss.BatchScript(req)
	if err != nil {
		return batchReq{}, nil, nil, err
	}
	return batchReq{Request: req}, script, args, nil
}

// answer records one decision of a batch and tells the observer.
func (l *Limiter) answer(ctx context.Context, answers []Answer, i int, key string, r Result, err error, start time.Time) {
	answers[i] = Answer{Result: r, Err: err}
	if l.obs != nil {
		l.observeCall(ctx, key, r, err, time.Since(start))
	}
}

// allowEach decides each ask with its own call, the asks of one subject in
// their order, batchWorkers subjects at a time.
func (l *Limiter) allowEach(ctx context.Context, asks []Ask, answers []Answer) {
	// One deadline for the batch; no quota leases (AllowMany goes to
	// Redis): a copy of l without them makes the decisions. The observer
	// is told them afterwards, on the caller's goroutine and outside the
	// batch's deadline (a slow observer would use it up, and the later
	// asks would go to the fail mode; a panicking one would end the
	// process from a worker).
	obs := l
	tctx, cancel := l.withTimeout(ctx)
	defer cancel()
	c := *l
	c.leases, c.obs = nil, nil
	l = &c
	var took []time.Duration
	if obs.obs != nil {
		took = make([]time.Duration, len(asks))
	}
	// The asks of one subject one after another, in their order (they may
	// count in the same keys), as the same Allows would be; subjects side
	// by side.
	bySubject := make(map[string][]int)
	var subjects []string
	for i, a := range asks {
		if _, ok := bySubject[a.Key]; !ok {
			subjects = append(subjects, a.Key)
		}
		bySubject[a.Key] = append(bySubject[a.Key], i)
	}
	sem := make(chan struct{}, batchWorkers)
	var wg sync.WaitGroup
	for _, subject := range subjects {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			for _, i := range bySubject[subject] {
				a := asks[i]
				cost := a.Cost
				if cost == 0 {
					cost = 1
				}
				start := time.Now()
				r, err := l.decide(tctx, a.Key, cost, false, a.Limits)
				answers[i] = Answer{Result: r, Err: err}
				if took != nil {
					took[i] = time.Since(start)
				}
			}
		}()
	}
	wg.Wait()
	cancel()
	if took == nil {
		return
	}
	for i, a := range asks {
		obs.observeCall(ctx, a.Key, answers[i].Result, answers[i].Err, took[i])
	}
}
