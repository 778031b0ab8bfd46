// Package knownbad keeps the rate limiters users commonly write by hand,
// with their bugs, as controls for the conformance suite. Each one is wrong
// in a documented way, and the suite's own tests assert that the suite
// fails it on the property it violates: that is how we know a check can
// fail.
//
// Never use these to limit anything.
//
//   - GetThenIncr: GET, decide in the app, then SET or INCRBY in another
//     round trip. Races admit too many,
//     and a key that expires between the GET and the INCRBY comes back
//     without a TTL, blocking its subject forever.
//   - IncrThenExpire: INCRBY, then PEXPIRE on every call. The expiry moves on every call, so under steady traffic the
//     window slides forever; denied requests consume.
//   - RuleByRule: each rule checked by its own script, each consuming, EXPIRE in whole seconds. A request denied by one rule has
//     already eaten the others' quota; windows under a second vanish.
//   - NoScriptFallback: a store that runs EVALSHA and never falls back to EVAL
//     after the first load, so SCRIPT FLUSH or a restart breaks every call.
//   - Retrying: a store that retries a call whose reply was lost, as client
//     libraries do by default, counting a decision twice.
//   - Unmapped: a store that passes its client's errors through without the
//     store sentinels (nil replies, NOSCRIPT).
//   - FirstErrorFailsBatch: a store whose batch takes one command's error
//     (as a client's pipeline Exec returns it) for every command's.
//   - IgnoresDeadline: a store whose calls ignore the context's deadline, as
//     go-redis does without ContextTimeoutEnabled: a slow or blackholed Redis
//     holds each call for seconds.
//   - LateDeadline, TimeoutNotDeadline, DeadlineKnownOutcome, StaleReplies:
//     stores that get a reply past the deadline wrong in one way each: they
//     wait for it, report their own timeout, drop ErrUnknownOutcome, or leave
//     it on the connection for the next call to read.
//   - SlowRecovery: a store whose circuit breaker refuses every call for 5 s
//     after a timeout, long after Redis is back.
//   - ClientTimeout, BatchClientTimeout: stores whose calls (or Batch
//     alone) end at the client's own read timeout of 1.2 s, not at the
//     context's deadline: right errors, each too late.
//   - RefusedBackoff: a store that makes a call refused its connection
//     again after a backoff slept without the context: with Redis down,
//     every call takes over a second.
//   - LostTailKnown, ResendingBatch, UnmappedScripts: stores that get a
//     lost reply wrong in one place each: a Batch that calls the commands
//     written behind the lost one never sent, a Batch whose lost commands
//     the client sends again after reconnecting while reporting them
//     unknown, script calls that drop ErrUnknownOutcome (the Batch keeps
//     it).
//   - IntsAsText, FloatsAlone, ErrorRepliesDropped, NilForErrors,
//     ServerErrorsUnknown: stores that break the reply contract in one way
//     each: integer replies of Do as text, float64 arguments of a command
//     sent alone as "1e+06", an error reply in Do and Batch an empty reply,
//     or ErrNil, or an unknown outcome (a script's too).
//   - BatchNeedsKeys: a Batch that refuses a command without a key (PING,
//     an EVAL of no keys), as one that routes by slot does.
//   - RawEvalReply, RawEvalShaReply: script replies with their text left
//     as []byte on one path: EVAL's (the NOSCRIPT fallback), or EVALSHA's.
//   - UnmappedTx, TxRefusesWatch: a Watch's Tx whose errors lose the store
//     sentinels, or whose Do refuses WATCH as Store.Do does.
//   - UnmappedDo: a store whose Do passes its client's errors through (the
//     script calls map theirs): a refused MULTI is not ErrNotSupported.
//   - ExpireThenRead: a fixed window that reads its counter back after
//     giving it its expiry: on a key the server deleted at it, the call fails.
//   - UntaggedKeys: keys without a Cluster hash tag, as in hand-written
//     ("LIMIT:RATE:" + phone): one decision's keys land in different slots.
//   - GetInsideMulti: the GET issued inside MULTI is only
//     queued, its reply is QUEUED, so the counter always reads as absent and
//     every call writes a fresh one: all admitted, the window restarts.
//   - IncrTwoTrips: INCRBY, then PEXPIRE in a second
//     round trip on every call. A connection lost between them leaves a new
//     counter without TTL; the window slides; denied requests consume.
//   - BucketNoTTL (key-MMddHHmm): the window in
//     the key from the app server's local clock and zone, INCRBY, no TTL.
//     Every key is immortal; zones and skewed clocks count apart.
//   - AppClockBucket: time-bucketed keys with MULTI/INCRBY/PEXPIREAT done
//     right, but windows from the app clock, never aligned to Redis TIME:
//     skewed app servers count in different windows.
//   - ServerTimeBucket: the window picked from Redis TIME in one round
//     trip, counted in another: when a round trip is as long as a window,
//     the PEXPIREAT of a window that is over deletes the key in the same
//     transaction, and the admission is counted nowhere.
//   - PeekThenCount: Bucketed decided in two round trips, a read (Peek)
//     then the count, trusting the read: callers racing between them all
//     saw room, and under contention the window admits past its limit.
//   - AppClockGCRA: GCRA whose "now" is passed in by the app server, one
//     limit at a time: servers whose clocks disagree share one TAT wrongly,
//     its RetryAfter is the app's clock's, a denial by one limit has
//     already consumed the others.
//   - StampLog: a sliding log whose member is the timestamp alone: units
//     admitted in the same microsecond (a burst, a cost above 1) are one
//     member, so the log undercounts and admits too many.
//   - FloatTokenBucket: tokens kept as a float, refilled by a fraction on
//     every call: the fractions drift, and a unit that is due is denied.
//   - WholeMsTokenBucket: a token bucket whose interval Period/Rate is
//     counted in whole milliseconds (integer division): 3 per second
//     refills a token every 333 ms, 3 in 999 ms, each unit early.
//   - RateCapBucket: a token bucket whose capacity is taken to be its
//     rate: a refill is capped at Rate tokens, not the Burst, and its key
//     lives until it holds them: a bucket whose burst is below its rate
//     holds more than its burst once it has idled.
//   - SlidingExpiry: a sliding window counter whose admissions set the
//     key's expiry (its clock) two Periods ahead in a second round trip:
//     every admission starts the window again, and the previous window's
//     count never weighs less for a subject asked steadily.
//   - BlindReturn: a quota lease's unused units given back with DECRBY on
//     whatever counter holds the key: a window deleted and counted anew
//     meanwhile gets units it never counted.
//   - BlindBucketReturn: the same for time-bucketed keys, DECRBY on the
//     bucket of the server's current window: units leased in a window that
//     has ended go to the next one, and a deleted bucket is re-created
//     below 0.
//   - KeepsSubjects: a correct fixed window that keeps a local log of
//     every subject's last decisions and never evicts it: memory grows
//     with the number of distinct subjects.
//   - LongestWindow: a correct fixed window whose limits of one call all
//     get the call's longest period: 1 per second checked with 100 per hour
//     is held for an hour.
//   - StrictState: a correct fixed window that refuses a counter above its
//     limit's rate as corrupt: after a rules change lowers a rate, every
//     call of a subject whose window holds more fails until it ends.
//   - RateCountdown: a fixed window whose counter counts down from the
//     rate it was created with: a rule whose rate alone changes reads the
//     old rate's counter against the new one.
//   - CounterLeases, CountThenAdd: concurrency limits as a counter (INCR,
//     DECR; no expiry, no identity) and as a sorted set counted and added
//     to in two round trips.
//   - ReleaseAbandon: correct leases whose Abandon is a Release (ZREM): an
//     Acquire that reaches Redis after it takes a slot nobody holds.
//   - CallerTTLLeases, BareTombstone, OldestRetryLeases, TTLRetryLeases:
//     correct leases with one hand-written step: the set's TTL set to the
//     caller's (a shorter lease cuts a longer one's life), a tombstone
//     added without the set's expiry (it goes with a shorter lease), a
//     RetryAfter from the oldest lease (wrong for a lowered Max) or the
//     caller's TTL (late).
//   - UncheckedExtend, HeldAbandonKept, StrictRelease: an Extend that says
//     held whenever it ran, an Abandon that leaves a held ID as it is, a
//     Release that is an error when it removes nothing.
//   - RepairAtDenial: a first-request fixed window that gives a counter
//     stripped of its TTL its TTL back only when it denies: a stripped
//     counter that is never denied holds its subject past its window.
//   - InlinedLimits: FixedWindow with the limits written into the script's
//     source (a template filled with the rate and window): every distinct
//     limit is a new script, sent whole with EVAL, and the server's script
//     cache grows with the number of distinct limits.
//   - BatchOneCost: FixedWindow whose batched calls (AllowMany) send a
//     cost of 1 whatever each request asks for, as batching code that
//     builds one argument list for a whole batch does.
//   - ManyStopsAtError: FixedWindow whose many-request script (several
//     asks of AllowMany in one call) loops over them with nothing around
//     each: one corrupt counter fails every ask of the batch.
//   - BatchRawErrors, BatchDenialIsBadReply, BatchNoRetryAfter,
//     BatchNoResetAfter, BatchResetInSeconds, BatchAdmitsPastRate,
//     BatchDeniesLastUnit: FixedWindow whose batched calls (AllowMany)
//     are read by a reader written apart from its single calls', with one
//     mistake each: a corrupt counter's error passed through as it came
//     (not ErrCorruptCounter), a denial's count above the rate taken for a
//     malformed reply, a denial's RetryAfter left 0, ResetAfter left 0,
//     the reply's milliseconds read as seconds, a call admitted when the
//     count before it was within the rate (every call past the rate
//     admitted), a call admitted only when the count after it is below
//     the rate (the last unit denied, though counted).
//   - NoScriptFallbackBatch: a store whose Batch sends a script's source
//     (EVAL) once and refuses it afterwards: after SCRIPT FLUSH or a
//     restart every batched call fails.
//   - FullPeriodReset: a fixed window that leases its quota and reports
//     every admission's ResetAfter as the limit's whole period: a lease
//     outlives the window its units were counted in.
//   - ResetEveryone: a Reset that deletes its limits' keys by pattern,
//     every subject's.
//   - SubjectlessKeys: a correct fixed window whose keys name the limit
//     alone ("ratelimit:" + rule, the user's ID forgotten): every subject
//     counts in one counter.
//   - ExecWithoutMulti: a store whose watched connection's Exec sends a
//     plain pipeline (Pipelined for TxPipelined): the WATCH guards
//     nothing, and a connection lost among the writes leaves some done.
//   - BlindExpiryGCRA: GCRA whose state is the key's expiry, whose call
//     writes without looking at what the key held: a key holding another
//     program's value is overwritten, not reported.
//   - CallerCtxTakeBack: FixedWindow's keys counted first (MULTI, INCRBY)
//     and a denial taken back with DECRBY in a second round trip under the
//     caller's context, for calls of one limit or of several: a client
//     that goes away between the two leaves the denied cost counted.
//
// SwallowErrors: any error admits the request silently: not
// Degraded, no error, so the fail mode never applies and nobody can alert.
// ManyAdmitsLost: the same for AllowMany's asks whose reply never came (a
// lost reply, a deadline): each admitted, silently; single calls are right.
// ContentionAdmits: an optimistic strategy whose give-up under contention
// admits, as if contention were a backend failure (with Degraded, the
// admission marked Degraded, as a fail-open would mark it; with Room, only
// while a Peek shows half the limit left, uncounted, and a give-up
// otherwise).
// AbortDenies: a WATCH/MULTI transaction without a retry loop, whose
// aborted EXEC is a denial: a key that expires between the WATCH and the
// EXEC denies a request in a window that has just begun.
// ZeroCostExpire: a correct strategy whose cost-0 calls give each key its
// Period again (a TTL "repair" without NX): each restarts a live window.
// ContentionUnnamed: giving up under contention with an error of its own,
// not limiter.ErrContention.
// ErrorsAsContention: a retry loop that counts every failed attempt,
// a lost connection's too, as contention: with Redis down, FailOpen
// denies.
package knownbad
