package rueidis

import (
	"fmt"
	"math"
	"net"
	"reflect"
	"strconv"
	"testing"

	"github.com/alicebob/miniredis/v2"
	rd "github.com/redis/rueidis"

	"github.com/quotagate/limiter/internal/argcache"
	"github.com/quotagate/limiter/store"
)

func TestArgTexts(t *testing.T) {
	args := []any{int64(1), "0", int64(1 << 40), 1000, -5, 2.5, []byte("b"), uint(7), true, nil, int64(math.MinInt64), -1, int64(-1), 99, int64(100)}
	want := []string{"1", "0", "1099511627776", "1000", "-5", "2.5", "b", "7", "1", "", "-9223372036854775808", "-1", "-1", "99", "100"}
	got := argTexts(args, make([]string, len(args)))
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("argTexts = %q, want %q", got, want)
	}
	for i, a := range args {
		if s := argText(a); s != want[i] {
			t.Errorf("argText(%#v) = %q, want %q", a, s, want[i])
		}
	}
}

// TestArgTextsSmall: the integers from -1 to 99 (a many-request call's
// counts and "-1"s) are formatted without an allocation, whatever their
// number.
func TestArgTextsSmall(t *testing.T) {
	args := make([]any, 0, 40)
	for i := range 20 {
		args = append(args, 1, int64(-1), i*5)
	}
	out := make([]string, len(args))
	if n := testing.AllocsPerRun(100, func() { argTexts(args, out) }); n != 0 {
		t.Errorf("argTexts of %d small integers: %.1f allocations, want 0", len(args), n)
	}
	for i, v := range args {
		if want := fmt.Sprint(v); out[i] != want {
			t.Fatalf("argument %d: %q, want %q", i, out[i], want)
		}
	}
}

// TestBuildLong: a command of more arguments than build keeps on its stack
// (a many-request call) is built with every argument, in order, and its
// first key routes it; building it again reuses the pooled texts.
func TestBuildLong(t *testing.T) {
	args := []any{"sha", 20}
	for i := range 20 {
		args = append(args, fmt.Sprintf("k%d", i))
	}
	for range 20 {
		args = append(args, 1, int64(1<<40), int64(-1))
	}
	c := store.Cmd{Name: "EVALSHA", Args: args}
	m := miniredis.RunT(t)
	client, err := rd.NewClient(rd.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true, ForceSingleClient: true, Dialer: net.Dialer{KeepAlive: -1, KeepAliveConfig: net.KeepAliveConfig{Enable: true}}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for range 3 {
		cmd, hasKey := build(client.B(), c)
		got := cmd.Commands()
		if !hasKey || len(got) != 1+len(args) || got[0] != "EVALSHA" || got[3] != "k0" || got[len(got)-2] != "1099511627776" || got[len(got)-1] != "-1" {
			t.Fatalf("built %q (has key %v)", got, hasKey)
		}
		for i, a := range args {
			if want := fmt.Sprint(a); got[1+i] != want {
				t.Fatalf("argument %d: %q, want %q", i, got[1+i], want)
			}
		}
	}
}

func TestIntTexts(t *testing.T) {
	args := []int64{1, 0, 1 << 40, 1000, -5, 99, 100, math.MinInt64, math.MaxInt64, 7}
	want := []string{"1", "0", "1099511627776", "1000", "-5", "99", "100", "-9223372036854775808", "9223372036854775807", "7"}
	if got := intTexts(nil, args, make([]string, len(args))); !reflect.DeepEqual(got, want) {
		t.Fatalf("intTexts = %q, want %q", got, want)
	}
	// More arguments than the stack arrays hold.
	many := make([]int64, 40)
	wantMany := make([]string, 40)
	for i := range many {
		many[i] = int64(i) * 1_000_003
		wantMany[i] = strconv.FormatInt(many[i], 10)
	}
	if got := intTexts(nil, many, make([]string, len(many))); !reflect.DeepEqual(got, wantMany) {
		t.Fatalf("intTexts of 40 = %q, want %q", got, wantMany)
	}
	few := args[:8] // what the stack arrays hold
	if n := testing.AllocsPerRun(100, func() { intTexts(nil, few, make([]string, 0, 8)[:len(few)]) }); n > 1 {
		t.Errorf("intTexts allocates %.0f times, want at most 1 (the one string)", n)
	}
}

func TestIntTextsCache(t *testing.T) {
	var tc argcache.Cache[string]
	args := []int64{1, 0, 1 << 40, 1000, -5}
	want := []string{"1", "0", "1099511627776", "1000", "-5"}
	for round := range 3 {
		if got := intTexts(&tc, args, make([]string, len(args))); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: intTexts = %q, want %q", round, got, want)
		}
	}
	// Once remembered, the same arguments cost nothing.
	if n := testing.AllocsPerRun(100, func() { intTexts(&tc, args, make([]string, 0, 8)[:len(args)]) }); n != 0 {
		t.Errorf("intTexts with every text cached allocates %.0f times, want 0", n)
	}
	for v := int64(100); v < 2000; v++ { // many share a slot
		if got := intTexts(&tc, []int64{v, v + 1}, make([]string, 2)); got[0] != strconv.FormatInt(v, 10) || got[1] != strconv.FormatInt(v+1, 10) {
			t.Fatalf("intTexts(%d, %d) = %q", v, v+1, got)
		}
	}
}
