// Package conformance is the reusable suite that proves a rate-limiting
// strategy and a store adapter correct on a real Redis.
//
// It checks invariants, not "no error": exact admission under contention,
// weighted and hostile costs, all-or-nothing multi-limit decisions, no key
// ever left without a TTL (even when it expires between a read and a write),
// windows that never slide, sub-second and month-long windows, self-repair
// of a key stripped of its TTL, quota that comes back exactly when it
// refills (no drift), a quota lease's unused units given back to their own
// window and no other, NOSCRIPT after SCRIPT FLUSH or a restart, and a lost
// reply counted exactly once. Each check carries its number, as the
// README's table of properties lists it.
//
// The shape follows gocloud.dev's drivertest: a Harness gives the suite a
// store on one backend, a HarnessMaker makes one per check, and every check
// goes through the public limiter.Limiter, where users meet the behaviour.
// An adapter proves itself with a short test:
//
//	func TestConformance(t *testing.T) {
//		conformance.RunStoreTests(t, conformance.Miniredis(dial))
//		conformance.RunStoreTests(t, conformance.RedisServer(dial))
//	}
//
// (and UnservedSlot(t, dialCluster, dial) on a Cluster it starts with one
// slot left without a node: the other commands of a Batch still run; and
// MigratingSlot on a Cluster whose slots it moves: decisions by a script,
// by MULTI/EXEC and by WATCH stay exact through ASK, MOVED and TRYAGAIN;
// and FailingOver on a Cluster whose master fails over to a replica, and
// back, and over again: the counts carry over, the demoted master's MOVED
// is followed, and a transaction the failover interrupts, a decision's or
// a quota return's, is tried again), and a strategy with RunStrategyTests
// and a Spec that declares its guarantees; the suite holds it to exactly
// those. The Spec's shape drives
// the checks: a fixed window (Window, Aligned), a strategy whose quota
// comes back continuously (Refills, as GCRA), keys that outlive one Period
// (KeyPeriods), or an algorithm's own bound on admissions in any interval
// (Bound). A Spec with a Leaser instead of a Strategy gets the lease checks
// (exact under contention, a crashed holder's slot freed at its TTL). Run is the same suite without the
// testing package (the limiter command reports with it).
//
// Each check is shown to fail: KnownBad lists hand-written designs common in
// the wild (package knownbad), each with the
// checks it must fail, and the package's tests assert that it does.
package conformance
