package replicaetcd_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/replica"
)

const waitFor, tick = 10 * time.Second, 2 * time.Millisecond

// countingStore counts a store's CreateOrGet calls (n) and every call a
// replica's turns make (total: the replica's own count, Stats.StoreCalls,
// read through the coordinator it is attached to).
type countingStore struct {
	claims.Store
	mu      sync.Mutex
	creates int
	rep     atomic.Pointer[replica.Coordinator]
}

func newCounting(s claims.Store) *countingStore { return &countingStore{Store: s} }

func (s *countingStore) CreateOrGet(ctx context.Context, key string, propose func() (claims.Target, error)) (claims.Claim, bool, error) {
	s.mu.Lock()
	s.creates++
	s.mu.Unlock()
	return s.Store.CreateOrGet(ctx, key, propose)
}

// n returns how often method m ("CreateOrGet") was called.
func (s *countingStore) n(m string) int {
	if m != "CreateOrGet" {
		panic("countingStore counts CreateOrGet only")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.creates
}

// calls returns the store calls of the replica on s so far.
func (s *countingStore) calls() uint64 { return s.rep.Load().Stats().StoreCalls }

// to proposes worker w.
func to(w string) replica.Propose {
	return func([]claims.Member, []claims.Target) (claims.Target, error) {
		return claims.Target{Worker: w}, nil
	}
}

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// serve runs one whole turn of key on c and returns what the turn said
// before its Done (a Turn is inert after it).
func serve(t *testing.T, c *replica.Coordinator, key string, propose replica.Propose, out placement.Outcome, final bool) served {
	t.Helper()
	tu, err := c.Start(tctx(t), key, propose)
	require.NoError(t, err)
	require.NoError(t, tu.Complete(out))
	sv := served{hit: tu.Hit(), unclaimed: tu.Unclaimed()}
	tu.Done(final)
	return sv
}

// served is what a turn said just before its Done.
type served struct{ hit, unclaimed bool }

func (s served) Hit() bool       { return s.hit }
func (s served) Unclaimed() bool { return s.unclaimed }
