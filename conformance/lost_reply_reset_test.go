package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/rueidis"

	"github.com/quotagate/limiter/conformance"
	"github.com/quotagate/limiter/store"
	rueidisstore "github.com/quotagate/limiter/store/rueidis"
)

// resetNotSent reports a call whose connection was reset as an error that
// says nothing of its outcome, as an adapter does that takes every socket
// error for one that stopped the command before it was written.
type resetNotSent struct{ store.Store }

func (s resetNotSent) hide(err error) error {
	if errors.Is(err, syscall.ECONNRESET) {
		return fmt.Errorf("not sent: %v", err) // %v: the identities go
	}
	return err
}

func (s resetNotSent) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	v, err := s.Store.EvalSha(ctx, sha, keys, args)
	return v, s.hide(err)
}

func (s resetNotSent) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	v, err := s.Store.Eval(ctx, src, keys, args)
	return v, s.hide(err)
}

// Property 19 loses a reply to a connection reset too: a store that takes
// the reset for a command never sent fails it.
func TestLostReplyToAResetFailsAStoreThatHidesIt(t *testing.T) {
	p19, ok := conformance.CheckByName("lost-reply-counted-once")
	if !ok {
		t.Fatal("no lost-reply-counted-once check")
	}
	// through rueidis, which reports the reset as it came (go-redis reads
	// it as the end of the stream)
	viaRueidis := func(_ context.Context, addr string) (store.Store, func(), error) {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true, PipelineMultiplex: -1})
		if err != nil {
			return nil, nil, err
		}
		st := rueidisstore.New(c)
		return resetNotSent{st}, func() { st.Close(); c.Close() }, nil
	}
	mk := conformance.Miniredis(viaRueidis)
	for _, o := range conformance.Run(context.Background(), mk, []conformance.Spec{conformance.FixedWindow(), conformance.GCRA()}, []conformance.Check{p19}, false) {
		if msgs := strings.Join(o.Messages, " | "); o.Passed || !strings.Contains(msgs, "lost to a connection reset") {
			t.Errorf("%s: passed=%v: %s; want property 19 failing on the reply lost to a connection reset", o.Spec, o.Passed, msgs)
		}
	}
}
