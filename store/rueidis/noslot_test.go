package rueidis_test

import (
	"testing"

	"github.com/quotagate/limiter/conformance"
)

// TestUnservedSlot: on a Cluster serving all slots but one, rueidis fails
// a whole pipeline, before sending it, when one of its commands has the
// unserved slot (rueidis.ErrNoSlot): a Batch decides the others and fails
// only those of that slot, not as an unknown outcome, and AllowMany under
// FailOpen decides the asks beside one of that slot by Redis.
func TestUnservedSlot(t *testing.T) { conformance.UnservedSlot(t, dialCluster, dial) }
