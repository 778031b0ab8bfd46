package store

import (
	"fmt"
	"strings"
)

// ConnCommand reports a command that changes the state of the connection
// it is sent on rather than answering once: MULTI, EXEC, DISCARD, WATCH,
// UNWATCH, MONITOR, and the (P|S)SUBSCRIBE family. Sent on a connection
// that other calls share (a pipelining client) or reuse later (a pool), it
// changes what their commands do: after a lone MULTI they are queued, and
// run by whoever sends EXEC, while their callers were told they failed.
func ConnCommand(name string) bool {
	switch len(name) {
	case 4:
		return strings.EqualFold(name, "EXEC")
	case 5:
		return strings.EqualFold(name, "MULTI") || strings.EqualFold(name, "WATCH")
	case 7:
		return strings.EqualFold(name, "DISCARD") || strings.EqualFold(name, "UNWATCH") || strings.EqualFold(name, "MONITOR")
	}
	return len(name) >= 9 && strings.EqualFold(name[len(name)-9:], "SUBSCRIBE")
}

// CheckConnCommands returns an error wrapping ErrNotSupported, naming the
// command, when cmds hold a ConnCommand and are not one whole transaction
// (IsTx), which an adapter keeps on one connection. Store.Do refuses such
// a call before sending anything; Watcher.Watch is the way to WATCH.
func CheckConnCommands(cmds []Cmd) error {
	for _, c := range cmds {
		if ConnCommand(c.Name) {
			if IsTx(cmds) {
				return nil
			}
			return connCommandErr(c.Name)
		}
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
		if ConnCommand(c.Name) {
			bad = i
			break
		}
	}
	if bad < 0 {
		return cmds, nil
	}
	rest, at = make([]Cmd, 0, len(cmds)-1), make([]int, 0, len(cmds)-1)
	for i, c := range cmds {
		if ConnCommand(c.Name) {
			out[i].Err = connCommandErr(c.Name)
			continue
		}
		rest, at = append(rest, c), append(at, i)
	}
	return rest, at
}
