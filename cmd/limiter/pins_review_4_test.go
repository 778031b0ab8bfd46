package main

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/conformance"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
)

// TestStoreChecksRunWhereScriptsAllowed: a store check that needs scripts
// runs on a server that allows them; it skips only where they are refused
// (and a check without scripts runs everywhere).
func TestStoreChecksRunWhereScriptsAllowed(t *testing.T) {
	var scripted, plain conformance.StoreCheck
	for _, sc := range conformance.StoreChecks() {
		if sc.Scripts && scripted.Name == "" {
			scripted = sc
		}
		if !sc.Scripts && plain.Name == "" {
			plain = sc
		}
	}
	if scripted.Name == "" || plain.Name == "" {
		t.Fatal("no store check with and without scripts: the store checks changed, update the test")
	}
	allowed := &limiter.ServerReport{Version: "7.2.0", Mode: "standalone", Role: "master", Scripting: true}
	refused := &limiter.ServerReport{Version: "7.2.0", Mode: "standalone", Role: "master", Scripting: false}
	for _, c := range []struct {
		sc     conformance.StoreCheck
		r      *limiter.ServerReport
		skips  bool
		server string
	}{
		{scripted, nil, false, "miniredis"},
		{scripted, allowed, false, "scripts allowed"},
		{scripted, refused, true, "scripts refused"},
		{plain, allowed, false, "scripts allowed"},
		{plain, refused, false, "scripts refused"},
	} {
		if why := cannotRunStore(c.sc, c.r); (why != "") != c.skips {
			t.Errorf("store check %s (scripts %v) on %s: cannotRunStore = %q; want skip %v", c.sc.Name, c.sc.Scripts, c.server, why, c.skips)
		}
	}
}

// TestReportJSONFields: -json's report carries the backend, the total
// elapsed time, and per row its exact result word, note, messages and
// elapsed time.
func TestReportJSONFields(t *testing.T) {
	rows := []row{
		{adapter: "goredis", Outcome: conformance.Outcome{Spec: "FixedWindow", Check: "exact-admission", ID: 1, Passed: true, Elapsed: 1500 * time.Millisecond}},
		{adapter: "rueidis", Outcome: skipped("FixedWindow", "exact-admission", 1, "cannot run here: why")},
		{adapter: "goredis", expected: true, Outcome: conformance.Outcome{Spec: "GetThenIncr", Check: "exact-admission", ID: 1,
			Messages: []string{"property 1: 12 admitted under a limit of 10"}, Elapsed: 250 * time.Millisecond}},
		{adapter: "redigo", expected: true, Outcome: conformance.Outcome{Spec: "GetThenIncr", Check: "exact-admission", ID: 1, Passed: true}},
		{adapter: "redigo", Outcome: conformance.Outcome{Spec: "FixedWindow", Check: "weighted-costs", ID: 2, Messages: []string{"property 2: 11 admitted"}}},
	}
	var js bytes.Buffer
	code, err := reportJSON(&js, "redis at 127.0.0.1:1", rows, 4321*time.Millisecond, 7, false)
	if err != nil || code != 1 {
		t.Fatalf("reportJSON: exit %d, %v; want 1 (a failure and a control that passed)", code, err)
	}
	var rep jsonReport
	if err := json.Unmarshal(js.Bytes(), &rep); err != nil {
		t.Fatalf("does not parse: %v\n%s", err, js.String())
	}
	if rep.Backend != "redis at 127.0.0.1:1" || rep.ElapsedMS != 4321 || rep.Checks != 7 || rep.Passed != 1 || rep.Failed != 2 || rep.Skipped != 1 || rep.Caught != 1 {
		t.Errorf("report: backend %q, elapsed_ms %d, checks %d, passed %d failed %d skipped %d caught %d; want \"redis at 127.0.0.1:1\", 4321, 7, 1, 2, 1, 1",
			rep.Backend, rep.ElapsedMS, rep.Checks, rep.Passed, rep.Failed, rep.Skipped, rep.Caught)
	}
	var results []string
	for _, r := range rep.Rows {
		results = append(results, r.Result)
	}
	if want := []string{"pass", "skip", "fail-expected", "pass-unexpected", "fail"}; !slices.Equal(results, want) {
		t.Errorf("results %q; want %q", results, want)
	}
	if len(rep.Rows) == 5 {
		if r := rep.Rows[0]; r.ElapsedMS != 1500 {
			t.Errorf("row 0 elapsed_ms %d; want 1500", r.ElapsedMS)
		}
		if r := rep.Rows[1]; r.Note != "cannot run here: why" {
			t.Errorf("skipped row's note %q; want its reason", r.Note)
		}
		if r := rep.Rows[2]; r.ElapsedMS != 250 || !slices.Equal(r.Messages, []string{"property 1: 12 admitted under a limit of 10"}) {
			t.Errorf("caught control's row: elapsed_ms %d, messages %q; want 250 and its finding", r.ElapsedMS, r.Messages)
		}
		if r := rep.Rows[4]; !slices.Equal(r.Messages, []string{"property 2: 11 admitted"}) {
			t.Errorf("failed row's messages %q; want its finding", r.Messages)
		}
	}
}

// TestReportVerbosePrintsPassingMessages: -v prints the messages of every
// row, a passing one's too; without -v only the failures'.
func TestReportVerbosePrintsPassingMessages(t *testing.T) {
	rows := []row{{adapter: "goredis", Outcome: conformance.Outcome{Spec: "FixedWindow", Check: "exact-admission", ID: 1, Passed: true,
		Messages: []string{"admitted 10 of 20 as it must"}}}}
	var quiet, verbose bytes.Buffer
	if code := report(&quiet, rows, false, time.Second); code != 0 || strings.Contains(quiet.String(), "admitted 10 of 20") {
		t.Errorf("without -v: exit %d; want 0 and no message of a passing check\n%s", code, quiet.String())
	}
	if code := report(&verbose, rows, true, time.Second); code != 0 || !strings.Contains(verbose.String(), "FixedWindow/goredis/exact-admission:\n  admitted 10 of 20 as it must") {
		t.Errorf("with -v: exit %d; want 0 and the passing check's message\n%s", code, verbose.String())
	}
}

// TestCheckJSONControlSkipsAreKnownBad: with -known-bad -json on a server
// that refuses scripts, a control's check that cannot run there is a
// skipped row marked known_bad, as the control's rows that run are; the
// strategies' and store contract's own skipped rows are not.
func TestCheckJSONControlSkipsAreKnownBad(t *testing.T) {
	s := serverWithUser(t, "noscript", "nspw", "-@scripting")
	code, out, errOut := runCmd(t, "check", "-redis", "redis://noscript:nspw@"+s.Addr(), "-known-bad", "-json", "-checks", "scripts-and-noscript")
	var rep jsonReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("exit %d: output does not parse: %v\n%s\n%s", code, err, out, errOut)
	}
	controlSkips, ownSkips := 0, 0
	for _, r := range rep.Rows {
		if r.Result != "skip" {
			t.Errorf("row %+v; want every row skipped (scripts-and-noscript needs scripts)", r)
			continue
		}
		if strings.Contains(r.Adapter, "+") { // adapter+Control
			controlSkips++
			if !r.KnownBad {
				t.Errorf("control's skipped row %+v: known_bad false; want true", r)
			}
		} else {
			ownSkips++
			if r.KnownBad {
				t.Errorf("store check's skipped row %+v: known_bad true; want false", r)
			}
		}
	}
	// the store controls that must fail scripts-and-noscript, per adapter
	controls := 0
	for _, ctl := range conformance.KnownBad() {
		if ctl.Store != "" && slices.Contains(ctl.MustFail, "scripts-and-noscript") {
			controls++
		}
	}
	if n := len(adapters()); controls == 0 || controlSkips != n*controls || ownSkips != n {
		t.Errorf("%d control rows and %d store rows skipped; want %d and %d (%d controls)\n%s", controlSkips, ownSkips, n*controls, n, controls, out)
	}
}

// aclUser makes the server at addr's default user need the password defpw
// and adds a user alice of password alicepw: a client that loses its
// username authenticates as the default user and is refused.
func aclUser(t *testing.T, ctx context.Context, addr string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	if err := rdb.Do(ctx, "ACL", "SETUSER", "alice", "on", ">alicepw", "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "requirepass", "defpw").Err(); err != nil {
		t.Fatal(err)
	}
}

// TestAdaptersSingleUseUserAndDatabase: each adapter dialled for -redis
// redis://alice:alicepw@host:port/3 authenticates as alice and writes in
// database 3, not database 0.
func TestAdaptersSingleUseUserAndDatabase(t *testing.T) {
	ctx := context.Background()
	s := redistest.StartServer(t)
	aclUser(t, ctx, s.Addr())
	addr, conn, err := parseRedisURL("redis://alice:alicepw@" + s.Addr() + "/3")
	if err != nil {
		t.Fatal(err)
	}
	db3 := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "alice", Password: "alicepw", DB: 3})
	defer db3.Close()
	db0 := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "alice", Password: "alicepw", DB: 0})
	defer db0.Close()
	for _, ad := range adapters() {
		key := "pin4:" + ad.name
		st, closeFn, err := ad.single(conn)(ctx, addr)
		if err != nil {
			t.Errorf("%s: dial: %v", ad.name, err)
			continue
		}
		rs, err := st.Do(ctx, store.Cmd{Name: "SET", Args: []any{key, ad.name}})
		closeFn()
		if err != nil || len(rs) != 1 || rs[0].Err != nil {
			t.Errorf("%s: SET as alice: %v %+v; want OK", ad.name, err, rs)
			continue
		}
		if v, err := db3.Get(ctx, key).Result(); err != nil || v != ad.name {
			t.Errorf("%s: database 3 holds %q (%v); want %q: the adapter did not write in the URL's database", ad.name, v, err, ad.name)
		}
		if n, _ := db0.Exists(ctx, key).Result(); n != 0 {
			t.Errorf("%s: wrote %s in database 0; want database 3", ad.name, key)
		}
	}
}

// TestAdaptersClusterUseUser: each adapter dialled for -cluster
// redis://alice:alicepw@host:port authenticates as alice on the nodes.
func TestAdaptersClusterUseUser(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartCluster(t)
	for _, a := range c.Addrs() {
		aclUser(t, ctx, a)
	}
	addrs, conn, err := parseClusterNodes("redis://alice:alicepw@" + c.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, ad := range adapters() {
		st, closeFn, err := ad.cluster(conn)(ctx, addrs)
		if err != nil {
			t.Errorf("%s: dial the Cluster as alice: %v", ad.name, err)
			continue
		}
		key := "{pin4}:" + ad.name
		rs, err := st.Do(ctx, store.Cmd{Name: "SET", Args: []any{key, ad.name}}, store.Cmd{Name: "DEL", Args: []any{key}})
		closeFn()
		if err != nil || len(rs) != 2 || rs[0].Err != nil || rs[1].Err != nil {
			t.Errorf("%s: SET and DEL on the Cluster as alice: %v %+v; want both done", ad.name, err, rs)
		}
	}
}
