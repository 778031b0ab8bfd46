package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: limiter check [-redis URL | -cluster HOST:PORT,...] [-tls-ca FILE] [-tls-cert FILE -tls-key FILE] [-tls-insecure] [-checks NAMES] [-known-bad] [-json] [-v]
       limiter bench [-redis URL] [-tls-ca FILE] [-tls-cert FILE -tls-key FILE] [-tls-insecure] [-adapters NAMES] [-strategies NAMES] [-workloads NAMES] [-callers N,...] [-rounds N] [-round D] [-allocs N] [-rueidis-flush-delay D] [-json] [-svg FILE]
       limiter serve [-addr ADDR] [-redis URL] [-rules FILE] [-hash KEY] [-interval D] [-fail-mode MODE] [-prefix P]`

// errUsage marks a usage error (exit status 2).
var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	commands := map[string]func(context.Context, []string, io.Writer, io.Writer) (int, error){
		"check": check, "bench": bench, "serve": serve,
	}
	if len(args) > 0 && (args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprintln(stdout, usage)
		return 0
	}
	if len(args) == 0 || commands[args[0]] == nil {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	command := commands[args[0]]
	code, err := command(ctx, args[1:], stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0 // -h: the command's flags were printed
	}
	if err != nil {
		fmt.Fprintln(stderr, "limiter:", err)
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return code
}

// parseFlags parses a command's args: no positional arguments, and a
// server flag (-redis, -cluster) given must name a server. An empty one,
// as a shell gives for an unset variable (-redis "$REDIS_URL"), is a
// usage error rather than a run on the embedded miniredis that would
// report on no server of the user's.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		if (f.Name == "redis" || f.Name == "cluster") && strings.TrimSpace(f.Value.String()) == "" && err == nil {
			err = fmt.Errorf("%w: -%s is empty (leave the flag out for the embedded miniredis)", errUsage, f.Name)
		}
	})
	return err
}
