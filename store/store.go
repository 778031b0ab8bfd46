package store

import (
	"context"
	"errors"
)

// Sentinel errors every adapter maps its client's errors to. The client's own
// error stays reachable with errors.As.
var (
	// ErrNil is a nil reply (a missing key for GET, a nil bulk string).
	ErrNil = errors.New("store: nil reply")
	// ErrNoScript is the server's NOSCRIPT reply to EVALSHA: the script cache
	// does not hold the script (restart, failover, SCRIPT FLUSH).
	ErrNoScript = errors.New("store: script not in the server's cache (NOSCRIPT)")
	// ErrTxAborted is a nil EXEC reply: a watched key changed and the
	// transaction did not run.
	ErrTxAborted = errors.New("store: transaction aborted (watched key changed)")
	// ErrUnknownOutcome means the command was (or may have been) written to
	// the server but its reply was lost: the server may have performed it.
	// Callers must not retry a non-idempotent command on this error.
	ErrUnknownOutcome = errors.New("store: outcome unknown (reply lost after the command was sent)")
	// ErrTryAgain is a Redis Cluster's TRYAGAIN reply: the command names
	// several keys of a slot that is being migrated, some of which have
	// already moved to the slot's new node, so the node refused it without
	// running it. It passes once the migration has moved the rest, usually
	// within milliseconds: Script's Run and RunInt64s send the call again
	// after a pause (see TryAgainPause). An adapter returns it only for a
	// command whose own reply was TRYAGAIN, never for one that may have run.
	ErrTryAgain = errors.New("store: refused during a slot migration, not run (TRYAGAIN)")
	// ErrNotSupported is returned for an ability the store does not have.
	ErrNotSupported = errors.New("store: not supported by this store")
)

// Cmd is one Redis command: its name and arguments, e.g.
// Cmd{"PEXPIRE", []any{key, int64(1000)}}. Arguments are string, []byte,
// int, int64 or float64; keys are strings.
type Cmd struct {
	Name string
	Args []any
}

// Reply is the normalised reply to one command: Val is int64, string, []any
// or nil, an array's elements being of the same types or, for an element
// that is an error reply (in EXEC's array, in a script's table), an error;
// Err is the Redis error reply, or ErrNil for a nil reply.
type Reply struct {
	Val any
	Err error
}

// Store is what a strategy needs of a Redis client. Implementations are safe
// for concurrent use and keep none of the slices they are given (keys,
// arguments, commands) after a call returns: callers reuse them.
type Store interface {
	// Do sends cmds in one round trip (a pipeline) and returns one Reply per
	// command, in order. The error is for the round trip as a whole; it wraps
	// ErrUnknownOutcome when any command may have run without its reply
	// arriving. All keys of one call hash to one Cluster slot. cmds of the
	// form MULTI, commands, EXEC (IsTx) are one transaction; any other call
	// holding a command that changes a connection's state (ConnCommand: a
	// lone MULTI, WATCH, SUBSCRIBE, SELECT, inside a transaction too) is
	// refused with an error wrapping ErrNotSupported before anything is
	// sent (CheckConnCommands).
	Do(ctx context.Context, cmds ...Cmd) ([]Reply, error)
	// EvalSha runs the cached script sha. A NOSCRIPT reply is ErrNoScript; a
	// lost reply is ErrUnknownOutcome.
	EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error)
	// Eval sends and runs the script source src.
	Eval(ctx context.Context, src string, keys []string, args []any) (any, error)
}

// Watcher is the optional ability to run an optimistic transaction on one
// pinned connection: WATCH keys, read them, then MULTI/EXEC writes.
// Implementations un-watch the connection on every exit from Watch.
type Watcher interface {
	// Watch pins one connection, WATCHes keys on it and calls fn with it.
	// Whatever fn returns is returned; the connection is left un-watched.
	// When Watch returns nil, fn has returned; after an error (a deadline
	// past which the adapter stopped waiting) fn may still be running, and
	// must find ctx done.
	Watch(ctx context.Context, keys []string, fn func(Tx) error) error
}

// Tx is a connection pinned by Watcher.Watch.
type Tx interface {
	// Do runs cmds outside MULTI on the pinned connection (reads while the
	// keys are watched). A command on a key of the watched keys' slot that
	// a Cluster node refused because the slot moved after the WATCH
	// (MOVED, ASK, TRYAGAIN), as in a failover or a slot's migration, makes
	// Do return an error that wraps ErrTxAborted, as Exec does: the keys
	// are to be watched again where they are now. A command on another
	// slot's key is not ErrTxAborted: watching again changes nothing. A
	// command that changes the connection's state, but WATCH and UNWATCH,
	// is refused with an error wrapping ErrNotSupported before anything is
	// sent (CheckTxCommands): the connection goes back to its pool after
	// the Watch.
	Do(ctx context.Context, cmds ...Cmd) ([]Reply, error)
	// Exec runs cmds inside MULTI/EXEC on the pinned connection. A
	// transaction aborted by a watched key is ErrTxAborted. A command that
	// changes the connection's state is refused as in Do, WATCH and
	// UNWATCH too.
	Exec(ctx context.Context, cmds ...Cmd) ([]Reply, error)
}

// Batcher is the optional ability to send commands that are independent of
// one another, whose keys may hash to different Cluster slots, in as few
// round trips as the client can: one pipeline per server, the servers of a
// Cluster in parallel. Limiter.AllowMany uses it.
type Batcher interface {
	// Batch sends cmds and returns one Reply per command, in order. Each
	// command's own keys hash to one slot. A Reply's Err is the command's
	// error reply (NOSCRIPT as ErrNoScript), ErrNil, or the failure of the
	// round trip that carried it, which wraps ErrUnknownOutcome when the
	// command may have run: a failure is the failure of the commands it
	// touched, never of the others. A command that changes a connection's
	// state (ConnCommand) is not sent: its Err wraps ErrNotSupported
	// (SplitConnCommands).
	Batch(ctx context.Context, cmds []Cmd) []Reply
}

// OneServer is the optional ability of a store to say that every key it
// reaches is on one server, which runs a script on keys of any hash slot:
// a single Redis or a primary (with its replicas, through Sentinel), not a
// Cluster nor a proxy that spreads keys over servers. Limiter.AllowMany
// then decides the asks of different subjects in one script call.
type OneServer interface {
	// OneServer reports whether one script may touch any keys together.
	OneServer() bool
}
