package etcdstore

import (
	"testing"
	"time"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/storetest"
)

// TestContract runs the backend-neutral contract suite on real etcd (the
// shared one-member cluster, a prefix per subtest). Claims live 2 s idle;
// etcd's lessor checks expiry every 500 ms.
func TestContract(t *testing.T) {
	const idle = 2 * time.Second
	storetest.Run(t, storetest.Harness{
		Parallel:     true,
		EventTimeout: 10 * time.Second,
		Quiet:        200 * time.Millisecond,
		New: func(t *testing.T) (func(string) claims.Store, storetest.Controls) {
			o := newOpener(t, shared, idle)
			return func(replica string) claims.Store { return o.open(replica) }, storetest.Controls{
				IdleTTL:     idle,
				ExpirySlack: time.Second,
				Crash:       o.crash,
			}
		},
	})
}
