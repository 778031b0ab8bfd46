package limiter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/quotagate/limiter/store"
)

// MaxInFlight is the largest InFlight.Max: a lease set holds one member per
// lease.
const MaxInFlight = 10_000

// InFlight is a concurrency limit: at most Max leases held at once for a
// subject. A lease ends when it is released, or TTL after it was taken (or
// last extended), so that a holder that crashed frees its slot by itself.
type InFlight struct {
	// Max is the most leases held at once, in [1, MaxInFlight].
	Max int64
	// TTL is how long a lease lasts unless released or extended first, in
	// whole milliseconds within [MinPeriod, MaxPeriod]. Choose it longer
	// than the work a lease covers.
	TTL time.Duration
	// Name names the lease set, so that one subject can have several
	// (e.g. "export" and "upload"); empty is the default set.
	Name string
}

func (f InFlight) validate() error {
	switch {
	case f.Max <= 0 || f.Max > MaxInFlight:
		return fmt.Errorf("%w: in-flight max %d must be in [1, %d]", ErrInvalidLimit, f.Max, MaxInFlight)
	case f.TTL < MinPeriod || f.TTL > MaxPeriod || f.TTL%time.Millisecond != 0:
		return fmt.Errorf("%w: lease TTL %s must be whole milliseconds in [%s, %s]", ErrInvalidLimit, f.TTL, MinPeriod, MaxPeriod)
	case len(f.Name) > MaxNameLen:
		return fmt.Errorf("%w: name is longer than %d bytes", ErrInvalidLimit, MaxNameLen)
	}
	return nil
}

// LeaseRequest is what a Leaser is asked to do for one lease.
type LeaseRequest struct {
	// Key is the subject's lease set, built by the Concurrency.
	Key string
	// ID identifies the lease: random, unique per Acquire. Acquiring an ID
	// that is already held renews it and takes no second slot, so a retried
	// Acquire never holds two.
	ID string
	// Limit is the call's limit, validated.
	Limit InFlight
}

// LeaseState is a Leaser's answer to Acquire or Extend.
type LeaseState struct {
	// Held reports whether the lease is held after the call.
	Held bool
	// InFlight is the number of leases held, this one included when Held.
	InFlight int64
	// RetryAfter is, for a refused Acquire, the time until enough held
	// leases expire for it (the oldest, or more when more than Max are
	// held: a Max lowered meanwhile): the longest wait for a slot if no
	// holder releases.
	RetryAfter time.Duration
}

// Leaser holds concurrency leases in Redis (strategy.Concurrency).
// Implementations are safe for concurrent use and keep every lease set's
// key expiring no later than its last lease.
type Leaser interface {
	// Acquire takes the lease req.ID in req.Key when fewer than
	// req.Limit.Max other unexpired leases are held (renewing it when it
	// is held already), or reports that the set is full.
	Acquire(ctx context.Context, st store.Store, req LeaseRequest) (LeaseState, error)
	// Extend renews a held lease for another TTL; Held is false when the
	// lease had expired or was released (nothing is written then).
	Extend(ctx context.Context, st store.Store, req LeaseRequest) (LeaseState, error)
	// Release ends the lease req.ID. Releasing a lease that expired, was
	// released already or never existed is not an error.
	Release(ctx context.Context, st store.Store, req LeaseRequest) error
}

// LeaseAbandoner is implemented by a Leaser that can end the lease of an
// Acquire whose outcome is unknown (a lost reply, a timeout) durably: a
// Release may reach Redis before the Acquire itself, still on its way, and
// that Acquire would then take a slot no caller holds until its TTL ends.
// Abandon ends the lease req.ID if it is held and makes an Acquire or
// Extend of req.ID that runs later, within req.Limit.TTL, a refusal.
// Concurrency calls it, when the Leaser has it, in place of Release after
// such an Acquire.
type LeaseAbandoner interface {
	Abandon(ctx context.Context, st store.Store, req LeaseRequest) error
}

// ErrNilLeaser is a nil Leaser given to NewConcurrency.
var ErrNilLeaser = errors.New("limiter: nil leaser")

// Concurrency caps the requests in flight per subject with leases held in
// Redis. It is safe for concurrent use; construct it with NewConcurrency.
type Concurrency struct {
	cfg    Limiter // the store, prefix, fail mode and timeout
	leaser Leaser
}

// NewConcurrency returns a Concurrency that holds leases with l on st. It
// takes the Limiter's options: WithPrefix, WithFailMode and WithTimeout
// apply as they do to a Limiter; observers are not told about leases.
func NewConcurrency(st store.Store, l Leaser, opts ...Option) (*Concurrency, error) {
	if isNil(st) {
		return nil, ErrNilStore
	}
	if isNil(l) {
		return nil, ErrNilLeaser
	}
	c := &Concurrency{cfg: Limiter{st: st, keys: keyBuilder{prefix: DefaultPrefix}, backs: new(giveBacks)}, leaser: l}
	if err := c.cfg.apply(nil, opts); err != nil {
		return nil, err
	}
	return c, nil
}

// Lease is the outcome of Acquire. When Held, the caller holds one of the
// subject's Max slots until it calls Release or the lease's TTL passes.
type Lease struct {
	// Held reports whether the lease was granted.
	Held bool
	// InFlight is the number of the subject's leases held after the call.
	InFlight int64
	// RetryAfter is, for a refused lease, the time until enough held leases
	// expire for it (the longest wait if no holder releases); 0 when Held.
	RetryAfter time.Duration
	// Limit is the call's limit.
	Limit InFlight
	// Degraded reports a lease granted or refused by the fail mode, not by
	// Redis; a degraded lease holds nothing, and its Release does nothing.
	Degraded bool
	// Cause is the backend error behind a Degraded lease.
	Cause error

	c   *Concurrency
	req LeaseRequest
}

// ID returns the lease's identity in Redis ("" for a refused or degraded
// lease).
func (l Lease) ID() string {
	if !l.Held || l.Degraded {
		return ""
	}
	return l.req.ID
}

// Acquire takes one of subject's limit.Max slots for limit.TTL. A full set
// is a Lease with Held false, not an error. Bad input (an empty subject, a
// limit out of bounds) is an error in every fail mode and writes nothing;
// a backend error follows the fail mode: FailError returns it, FailOpen
// grants a Degraded lease, FailClosed refuses with a Degraded lease whose
// RetryAfter is limit.TTL, at most a second. When the call may have run
// without its reply arriving (a lost reply, a timeout), Acquire releases
// the slot it may have taken (a release that fails is made once more; one
// that fails again leaves it until its TTL ends); with a LeaseAbandoner
// (strategy.Concurrency) also when the Acquire reaches Redis only after
// the release. After a lost reply it does so before it returns, so that a
// retry finds the slot free; after the context ended, it returns at once
// and the release follows, bounded by the Limiter's timeout or a second.
// A context that has ended before the call sends nothing and writes
// nothing.
func (c *Concurrency) Acquire(ctx context.Context, subject string, limit InFlight) (Lease, error) {
	req, err := c.request(subject, limit)
	if err != nil {
		return Lease{}, err
	}
	if err := ctx.Err(); err != nil {
		// Nothing is sent, so nothing is left to release.
		return c.failed(limit, err)
	}
	caller := ctx
	ctx, cancel := c.cfg.withTimeout(ctx)
	defer cancel()
	st, err := c.leaser.Acquire(ctx, c.cfg.st, req)
	if err != nil {
		if errors.Is(err, ErrInvalidLimit) {
			return Lease{}, err
		}
		if errors.Is(err, store.ErrUnknownOutcome) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			// The call may have taken a slot under an ID no caller
			// holds: released now, or the slot would stay taken until
			// its TTL ends (a release of a lease never taken is
			// harmless; a store that reports a context's end without
			// ErrUnknownOutcome may have sent the call). The caller
			// waits for the release until its own context ends (not
			// the Limiter's timeout, which may be what ended the call),
			// never past it; the release then goes on without it.
			released := make(chan struct{})
			go func() {
				defer close(released)
				c.releaseUnknown(ctx, req)
			}()
			select {
			case <-released:
			case <-caller.Done():
			}
		}
		return c.failed(limit, err)
	}
	return Lease{Held: st.Held, InFlight: st.InFlight, RetryAfter: st.RetryAfter, Limit: limit, c: c, req: req}, nil
}

// failed is Acquire's answer to a backend error err, as the fail mode says.
func (c *Concurrency) failed(limit InFlight, err error) (Lease, error) {
	switch c.cfg.failMode {
	case FailOpen:
		return Lease{Held: true, Degraded: true, Cause: err, Limit: limit}, nil
	case FailClosed:
		return Lease{Degraded: true, Cause: err, Limit: limit, RetryAfter: min(limit.TTL, time.Second)}, nil
	}
	return Lease{}, fmt.Errorf("limiter: acquire: %w", err)
}

// releaseUnknown ends the lease of an Acquire whose outcome is unknown
// (LeaseAbandoner's Abandon, else Release), on a context of its own (the
// call's may have ended), bounded by the Limiter's timeout or a second.
// A first attempt that fails is made once more: a lost reply often means
// a broken connection, and a client may fail the next call on it without
// sending it (rueidis does, in the instant before it marks the connection
// broken); both are idempotent. Its error is not returned: a slot it could
// not free ends at its TTL.
func (c *Concurrency) releaseUnknown(ctx context.Context, req LeaseRequest) {
	d := c.cfg.timeout
	if d <= 0 {
		d = time.Second
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
	defer cancel()
	end := c.leaser.Release
	if a, ok := c.leaser.(LeaseAbandoner); ok {
		end = a.Abandon
	}
	if err := end(rctx, c.cfg.st, req); err != nil && rctx.Err() == nil {
		_ = end(rctx, c.cfg.st, req)
	}
}

// Extend renews a held lease for another TTL, for work that runs longer
// than expected. It reports false when the lease was lost (it expired, or
// was released): the slot may be someone else's now. A lease that is not
// Held, or Degraded, is not extended (false, nil).
func (l Lease) Extend(ctx context.Context) (bool, error) {
	if !l.Held || l.Degraded || l.c == nil {
		return false, nil
	}
	ctx, cancel := l.c.cfg.withTimeout(ctx)
	defer cancel()
	st, err := l.c.leaser.Extend(ctx, l.c.cfg.st, l.req)
	if err != nil {
		return false, fmt.Errorf("limiter: extend lease: %w", err)
	}
	return st.Held, nil
}

// Release gives the slot back. Releasing twice, after the lease expired,
// or a lease that is not Held or Degraded, does nothing and returns nil; an
// error means Redis could not be reached, and the lease then ends at its
// TTL.
func (l Lease) Release(ctx context.Context) error {
	if !l.Held || l.Degraded || l.c == nil {
		return nil
	}
	ctx, cancel := l.c.cfg.withTimeout(ctx)
	defer cancel()
	if err := l.c.leaser.Release(ctx, l.c.cfg.st, l.req); err != nil {
		return fmt.Errorf("limiter: release lease: %w", err)
	}
	return nil
}

// InFlightKey returns the key of subject's lease set for limit, as a
// Concurrency with prefix lays it out: prefix:{subject}:lease, or
// prefix:{subject}:lease=name for a named set.
func InFlightKey(prefix, subject string, limit InFlight) (string, error) {
	if err := validPrefix(prefix); err != nil {
		return "", err
	}
	return keyBuilder{prefix: prefix}.lease(subject, limit)
}

func (c *Concurrency) request(subject string, limit InFlight) (LeaseRequest, error) {
	key, err := c.cfg.keys.lease(subject, limit)
	if err != nil {
		return LeaseRequest{}, err
	}
	return LeaseRequest{Key: key, ID: newLeaseID(), Limit: limit}, nil
}

// lease validates subject and limit and returns the lease set's key.
func (b keyBuilder) lease(subject string, limit InFlight) (string, error) {
	if subject == "" {
		return "", fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if err := limit.validate(); err != nil {
		return "", err
	}
	subject = hashTag(subject)
	if limit.Name != "" {
		return b.prefix + ":{" + subject + "}:lease=" + limit.Name, nil
	}
	return b.prefix + ":{" + subject + "}:lease", nil
}

// newLeaseID returns 126 random bits as 32 hex digits (each half's top bit
// is set, so that both halves have 16 digits): unique across processes
// without coordination.
func newLeaseID() string {
	var b [32]byte
	out := strconv.AppendUint(b[:0], rand.Uint64()|1<<63, 16)
	out = strconv.AppendUint(out, rand.Uint64()|1<<63, 16)
	return string(out)
}
