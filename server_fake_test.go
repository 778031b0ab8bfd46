package limiter_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

// fakeServer answers INFO and EVAL with fixed replies.
type fakeServer struct {
	info, eval []store.Reply
}

func (f fakeServer) Do(_ context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	if cmds[0].Name == "INFO" {
		return f.info, nil
	}
	return f.eval, nil
}
func (fakeServer) EvalSha(context.Context, string, []string, []any) (any, error) {
	return nil, errors.New("unused")
}
func (fakeServer) Eval(context.Context, string, []string, []any) (any, error) {
	return nil, errors.New("unused")
}

func infoReply(lines ...string) []store.Reply {
	return []store.Reply{{Val: "# Server\r\n" + strings.Join(lines, "\r\n") + "\r\n"}}
}

var evalOK = []store.Reply{{Val: int64(1)}}

// Redis before 6.0.9: the report warns that Optimistic cannot rely on it.
func TestCheckServerFakeOldVersion(t *testing.T) {
	r, err := limiter.CheckServer(context.Background(), fakeServer{
		info: infoReply("redis_version:6.0.8", "redis_mode:standalone", "role:master", "maxmemory:0", "maxmemory_policy:noeviction"),
		eval: evalOK,
	})
	if err != nil || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "6.0.9") || !strings.Contains(r.Warnings[0], "Optimistic") {
		t.Errorf("Redis 6.0.8: %+v, %v; want one warning naming Optimistic and 6.0.9", r, err)
	}
	r, err = limiter.CheckServer(context.Background(), fakeServer{
		info: infoReply("redis_version:6.0.9", "redis_mode:standalone", "role:master", "maxmemory:0", "maxmemory_policy:noeviction"),
		eval: evalOK,
	})
	if err != nil || len(r.Warnings) != 0 {
		t.Errorf("Redis 6.0.9: %+v, %v; want no warning", r, err)
	}
}

// WRONGPASS, like NOAUTH, is a connection that cannot use the server: an
// error, not a report.
func TestCheckServerFakeWrongPass(t *testing.T) {
	wrong := errors.New("WRONGPASS invalid username-password pair or user is disabled.")
	r, err := limiter.CheckServer(context.Background(), fakeServer{
		info: []store.Reply{{Err: wrong}},
		eval: []store.Reply{{Err: wrong}},
	})
	if err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Errorf("WRONGPASS: %+v, %v; want an error saying WRONGPASS", r, err)
	}
}

// INFO refused by an ACL: one warning that the eviction policy is unknown,
// and no claim about a role CheckServer could not read.
func TestCheckServerFakeInfoRefused(t *testing.T) {
	r, err := limiter.CheckServer(context.Background(), fakeServer{
		info: []store.Reply{{Err: errors.New("NOPERM User limiter has no permissions to run the 'info' command")}},
		eval: evalOK,
	})
	if err != nil || !r.Scripting || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "INFO is refused") || !strings.Contains(r.Warnings[0], "noeviction") {
		t.Errorf("INFO refused: %+v, %v; want scripting and exactly one warning, that INFO is refused", r, err)
	}
}

// A store that answers one command with no reply breaks the contract: an
// error, not a panic.
func TestCheckServerFakeNoReply(t *testing.T) {
	r, err := limiter.CheckServer(context.Background(), fakeServer{
		info: infoReply("redis_version:7.2.4", "redis_mode:standalone", "role:master", "maxmemory:0", "maxmemory_policy:noeviction"),
		eval: nil,
	})
	if err == nil {
		t.Errorf("EVAL with no reply: %+v, nil error; want an error", r)
	}
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("INFO with no reply: CheckServer panicked: %v", p)
		}
	}()
	_, _ = limiter.CheckServer(context.Background(), fakeServer{info: nil, eval: evalOK})
}

// TestCheckServerFakeLoading: a restarted server answers INFO while it
// loads its data but refuses EVAL with LOADING: an error (it cannot answer
// now), not a report that scripts are refused.
func TestCheckServerFakeLoading(t *testing.T) {
	r, err := limiter.CheckServer(context.Background(), fakeServer{
		info: infoReply("redis_version:7.0.15", "redis_mode:standalone", "role:master", "loading:1"),
		eval: []store.Reply{{Err: errors.New("LOADING Redis is loading the dataset in memory")}},
	})
	if err == nil || !strings.Contains(err.Error(), "LOADING") || len(r.Warnings) != 0 {
		t.Errorf("EVAL refused with LOADING: %+v, %v; want an error saying the server cannot answer now", r, err)
	}
}
