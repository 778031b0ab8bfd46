package store

import (
	"fmt"
	"strings"
)

// ConnCommand reports a command that changes the state of the connection
// it is sent on rather than answering once: MULTI, EXEC, DISCARD, WATCH,
// UNWATCH, MONITOR and the (P|S)SUBSCRIBE family; SELECT (another
// database for every later command), RESET, HELLO and AUTH (another
// protocol or user), READONLY and READWRITE (a Cluster replica's reads),
// QUIT, SYNC and PSYNC (a replication stream); and CLIENT REPLY, TRACKING,
// CACHING, NO-EVICT and NO-TOUCH. Sent on a connection that other calls
// share (a pipelining client) or reuse later (a pool), it changes what
// their commands do: after a lone MULTI they are queued, and run by
// whoever sends EXEC, while their callers were told they failed; after
// SELECT they count in another database.
func ConnCommand(c Cmd) bool {
	name := c.Name
	switch len(name) {
	case 4:
		return strings.EqualFold(name, "EXEC") || strings.EqualFold(name, "AUTH") || strings.EqualFold(name, "QUIT") || strings.EqualFold(name, "SYNC")
	case 5:
		return strings.EqualFold(name, "MULTI") || strings.EqualFold(name, "WATCH") || strings.EqualFold(name, "RESET") || strings.EqualFold(name, "HELLO") || strings.EqualFold(name, "PSYNC")
	case 6:
		if strings.EqualFold(name, "SELECT") {
			return true
		}
		if !strings.EqualFold(name, "CLIENT") || len(c.Args) == 0 {
			return false
		}
		sub, _ := argText(c.Args[0])
		switch strings.ToUpper(sub) {
		case "REPLY", "TRACKING", "CACHING", "NO-EVICT", "NO-TOUCH":
			return true
		}
		return false
	case 7:
		return strings.EqualFold(name, "DISCARD") || strings.EqualFold(name, "UNWATCH") || strings.EqualFold(name, "MONITOR")
	case 8:
		return strings.EqualFold(name, "READONLY")
	}
	// (SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE, UNSUBSCRIBE, ...)
	return strings.EqualFold(name, "READWRITE") || len(name) >= 9 && strings.EqualFold(name[len(name)-9:], "SUBSCRIBE")
}

// CheckConnCommands returns an error wrapping ErrNotSupported, naming the
// command, when cmds hold a ConnCommand other than the MULTI and EXEC of
// one whole transaction (IsTx), which an adapter keeps on one connection.
// Store.Do refuses such a call before sending anything; Watcher.Watch is
// the way to WATCH.
func CheckConnCommands(cmds []Cmd) error {
	inner := cmds
	if IsTx(cmds) {
		inner = cmds[1 : len(cmds)-1]
	}
	for _, c := range inner {
		if ConnCommand(c) {
			return connCommandErr(c.Name)
		}
	}
	return nil
}

// CheckTxCommands is CheckConnCommands for the commands a Watch's Tx sends
// on its pinned connection, which goes back to its pool after the Watch:
// in Tx.Exec (inMulti) no ConnCommand, in Tx.Do none but WATCH and
// UNWATCH (more keys watched, or none, until the Watch ends); MULTI, EXEC
// and DISCARD are Tx.Exec's own.
func CheckTxCommands(cmds []Cmd, inMulti bool) error {
	for _, c := range cmds {
		if !ConnCommand(c) {
			continue
		}
		if !inMulti && (strings.EqualFold(c.Name, "WATCH") || strings.EqualFold(c.Name, "UNWATCH")) {
			continue
		}
		return connCommandErr(c.Name)
	}
	return nil
}

func connCommandErr(name string) error {
	return fmt.Errorf("store: %s changes the state of a connection other calls share: %w", name, ErrNotSupported)
}

// SplitConnCommands is CheckConnCommands for a Batch, whose commands are
// independent: each ConnCommand gets the error as its reply in out, and
// the others are returned with their indexes in cmds, for the adapter to
// send. When there is none, it returns cmds and a nil at, allocating
// nothing.
func SplitConnCommands(cmds []Cmd, out []Reply) (rest []Cmd, at []int) {
	bad := -1
	for i, c := range cmds {
		if ConnCommand(c) {
			bad = i
			break
		}
	}
	if bad < 0 {
		return cmds, nil
	}
	rest, at = make([]Cmd, 0, len(cmds)-1), make([]int, 0, len(cmds)-1)
	for i, c := range cmds {
		if ConnCommand(c) {
			out[i].Err = connCommandErr(c.Name)
			continue
		}
		rest, at = append(rest, c), append(at, i)
	}
	return rest, at
}
