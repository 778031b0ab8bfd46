package limiter

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/quotagate/limiter/store"
)

// ServerReport is what CheckServer learned of a Redis server: the facts a
// rate limiter's correctness depends on, and warnings where they put it at
// risk. A field CheckServer could not read (INFO refused by an ACL, a
// server that lacks the field) is empty or zero.
type ServerReport struct {
	// Version is the server's redis_version.
	Version string
	// Mode is redis_mode: "standalone", "cluster" or "sentinel".
	Mode string
	// Role is the server's role: "master", or "slave" for a replica, whose
	// counts the primary does not see (and which refuses writes unless
	// replica-read-only is off).
	Role string
	// MaxMemory is maxmemory in bytes; 0 is no limit.
	MaxMemory int64
	// MaxMemoryPolicy is maxmemory-policy, such as "noeviction".
	MaxMemoryPolicy string
	// Scripting reports that this connection may run Lua (EVAL): the
	// server allows it and the user's ACL does; ScriptingErr is the
	// refusal otherwise.
	Scripting    bool
	ScriptingErr error
	// Warnings say what on this server can make a limit fail, one sentence
	// each; none when nothing was found.
	Warnings []string
}

// CheckServer reports on the Redis server behind st, for an application to
// log at start-up: its version and mode, its eviction policy (a limiter's
// counters all carry a TTL, so a volatile-* policy evicts them first, and
// an allkeys-* policy may evict them: either resets counts and lets a limit
// be exceeded), and whether this user may run scripts (every strategy but
// Bucketed and Optimistic needs EVAL and EVALSHA, as do quota leases). It
// writes nothing: it runs INFO and a script that returns 1. The error is
// non-nil only when the server could not be reached, did not answer,
// refused the connection as not authenticated (NOAUTH, WRONGPASS), or
// cannot answer now (BUSY running another client's script, LOADING its
// data): a report then would be of a passing state. A Sentinel, which
// holds no keys, is reported with a warning saying so. On a Cluster the
// report is of one master.
func CheckServer(ctx context.Context, st store.Store) (ServerReport, error) {
	var r ServerReport
	if isNil(st) {
		return r, ErrNilStore
	}
	// One INFO (its default sections hold server and memory): a Cluster
	// client sends keyless commands to any master, so one command keeps
	// the report to one node.
	rs, err := st.Do(ctx, store.Cmd{Name: "INFO"})
	if err != nil {
		return r, fmt.Errorf("limiter: check server: %w", err)
	}
	info := map[string]string{}
	for _, reply := range rs {
		text, _ := store.String(reply.Val)
		for _, line := range strings.Split(text, "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
				info[k] = v
			}
		}
	}
	r.Version, r.Mode, r.Role, r.MaxMemoryPolicy = info["redis_version"], info["redis_mode"], info["role"], info["maxmemory_policy"]
	r.MaxMemory, _ = strconv.ParseInt(info["maxmemory"], 10, 64)
	var infoErr error // INFO's refusal
	if len(rs) == 1 {
		infoErr = rs[0].Err
	}
	switch {
	case infoErr != nil && authRefused(infoErr):
		// Every command will be refused alike: not a report of the
		// server, but of a connection that cannot use it.
		return r, fmt.Errorf("limiter: check server: the server needs a password (or another user) for this connection: %w", infoErr)
	case infoErr != nil && notReady(infoErr):
		return r, fmt.Errorf("limiter: check server: INFO: the server cannot answer now: %w", infoErr)
	case infoErr != nil:
		r.Warnings = append(r.Warnings, fmt.Sprintf("INFO is refused (%v): the eviction policy is unknown; check that it is noeviction", infoErr))
	case r.Mode == "sentinel":
		// Its EVAL is an unknown command: not a refusal of scripts on a
		// server that holds keys, which none here does.
		r.Warnings = append(r.Warnings, "this is a Redis Sentinel, which holds no keys: no strategy can run on it; give the address of the primary it monitors (or use a Sentinel-aware client)")
	}

	// Through Do, a refusal (an error reply: scripting disabled, an ACL) is
	// the command's reply, and a failure to reach the server the call's
	// error.
	rs, err = st.Do(ctx, store.Cmd{Name: "EVAL", Args: []any{"return 1", 0}})
	switch {
	case err != nil:
		return r, fmt.Errorf("limiter: check server: EVAL: %w", err)
	case len(rs) != 1:
		return r, fmt.Errorf("limiter: check server: EVAL: %d replies to one command", len(rs))
	case rs[0].Err != nil && notReady(rs[0].Err):
		return r, fmt.Errorf("limiter: check server: EVAL: the server cannot answer now: %w", rs[0].Err)
	case rs[0].Err != nil:
		r.ScriptingErr = rs[0].Err
		if r.Mode != "sentinel" {
			r.Warnings = append(r.Warnings, fmt.Sprintf("scripts are refused (%v): the strategies that run Lua (FixedWindow, AlignedWindow, GCRA, TokenBucket, SlidingWindow, SlidingLog, Concurrency) and quota leases cannot run here; Bucketed and Optimistic can", rs[0].Err))
		}
	default:
		r.Scripting = true
	}
	if r.Role == "slave" {
		r.Warnings = append(r.Warnings, fmt.Sprintf("this server is a replica of %s:%s: it refuses the limiter's writes (READONLY), or, writable, keeps counts its primary never sees; use the primary", info["master_host"], info["master_port"]))
	}
	switch p := r.MaxMemoryPolicy; {
	case p == "" || p == "noeviction":
	case r.MaxMemory == 0:
		// No memory limit: the policy never applies.
	case strings.HasPrefix(p, "volatile-"):
		r.Warnings = append(r.Warnings, fmt.Sprintf("maxmemory-policy %s evicts keys with a TTL first, and every limiter key has one: under memory pressure counters vanish and limits are exceeded; use noeviction (or a Redis of its own)", p))
	default:
		r.Warnings = append(r.Warnings, fmt.Sprintf("maxmemory-policy %s may evict limiter keys under memory pressure: counters vanish and limits are exceeded; use noeviction (or a Redis of its own)", p))
	}
	if v := r.Version; v != "" && !r.VersionAtLeast("6.0.9") {
		r.Warnings = append(r.Warnings, fmt.Sprintf("Redis %s: strategy.Optimistic needs 6.0.9 or later (an expired watched key must abort EXEC)", v))
	}
	return r, nil
}

// authRefused reports a reply refusing a connection that has not
// authenticated (or whose credentials are wrong).
func authRefused(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "NOAUTH") || strings.Contains(msg, "WRONGPASS")
}

// notReady reports a refusal that says the server cannot answer now, not
// what it allows: BUSY (another client's script runs past its time limit)
// or LOADING (a restarted server reading its data).
func notReady(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "BUSY ") || strings.Contains(msg, "LOADING ")
}

// VersionAtLeast reports whether the server's Version is min ("6.0.9") or
// later. An unknown or unparsable version is taken to be recent enough.
func (r ServerReport) VersionAtLeast(min string) bool {
	got, ok1 := parseVersion(r.Version)
	want, ok2 := parseVersion(min)
	if !ok1 || !ok2 {
		return true
	}
	for i := range got {
		if got[i] != want[i] {
			return got[i] > want[i]
		}
	}
	return true
}

// parseVersion reads a dotted version of up to three numbers.
func parseVersion(v string) ([3]int, bool) {
	var out [3]int
	parts := strings.SplitN(v, ".", 3)
	for i, part := range parts {
		n, err := strconv.Atoi(part)
		if err != nil {
			return out, false
		}
		out[i] = n
	}
	return out, v != ""
}
