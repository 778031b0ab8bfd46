package rueidis_test

import (
	"context"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"
)

// go-redis logs from goroutines of its own (a pool re-dialling a server a
// check stopped) through the standard logger, which formats the time in
// time.Local; property 14 changes time.Local while it runs. A logger
// without timestamps keeps go-redis from reading it.
func init() { redis.SetLogger(timelessLogger{}) }

type timelessLogger struct{}

func (timelessLogger) Printf(_ context.Context, format string, v ...any) {
	fmt.Fprintf(os.Stderr, "redis: "+format+"\n", v...)
}
