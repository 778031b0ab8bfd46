package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: limiter check [-redis URL | -cluster HOST:PORT,...] [-checks NAMES] [-known-bad] [-v]
       limiter serve [-addr ADDR] [-redis URL] [-rules FILE] [-hash KEY] [-interval D] [-fail-mode MODE] [-prefix P]`

// errUsage marks a usage error (exit status 2).
var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "check" && args[0] != "serve") {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	command := check
	if args[0] == "serve" {
		command = serve
	}
	code, err := command(ctx, args[1:], stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "limiter:", err)
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return code
}
