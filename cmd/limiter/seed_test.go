package main

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/rules"
)

// writeAfterHLen is a go-redis hook that, once HLEN has been answered,
// has another client write the hash: a writer racing serve's seeding.
type writeAfterHLen struct {
	other *redis.Client
	key   string
}

func (h writeAfterHLen) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h writeAfterHLen) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h writeAfterHLen) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if cmd.Name() == "hlen" {
			h.other.HSet(ctx, h.key, "theirs", `[{"name":"q","rate":1,"period":"1s"}]`)
		}
		return err
	}
}

// TestSeedHashRace: serve seeds its rules hash only when it is missing or
// empty, and says whether it created it (to delete it at exit). A hash
// another client fills between serve's check and its write is left as
// that client wrote it and is not reported as created (it got serve's
// rules merged into it, and serve deleted it, theirs included, at exit).
func TestSeedHashRace(t *testing.T) {
	m := redistest.NewMini(t)
	other := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer other.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	const key = "rules-race"
	rdb.AddHook(writeAfterHLen{other: other, key: key})
	base, err := rules.ParseYAML([]byte(demoRules))
	if err != nil {
		t.Fatal(err)
	}
	created, err := seedHash(context.Background(), rdb, key, base)
	if err != nil || created {
		t.Fatalf("seedHash beside a writer: created=%v, %v; want false, nil", created, err)
	}
	fields, err := other.HKeys(context.Background(), key).Result()
	if err != nil || len(fields) != 1 || fields[0] != "theirs" {
		t.Errorf("the hash after the race: %v, %v; want only the other writer's field", fields, err)
	}
	// without a writer: seeded and created
	created, err = seedHash(context.Background(), other, "rules-alone", base)
	if n, _ := other.HLen(context.Background(), "rules-alone").Result(); err != nil || !created || n != int64(len(base.Subjects)) {
		t.Errorf("seedHash alone: created=%v, %v, %d fields; want true, nil, %d", created, err, n, len(base.Subjects))
	}
}
