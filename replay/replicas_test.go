package replay

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// replicaConfig is smallConfig with the default replicated run over w at
// the given replica counts.
func replicaConfig(w *Workload, counts ...int) Config {
	cfg := smallConfig(w)
	cfg.Replicas = DefaultReplicas(w.Span())
	cfg.Replicas.Counts = counts
	return cfg
}

func renderReplicas(t *testing.T, rep *ReplicaReport) (md, svg []byte) {
	t.Helper()
	var a, b bytes.Buffer
	require.NoError(t, rep.WriteMarkdown(&a, "replicas.svg"))
	require.NoError(t, rep.WritePlot(&b))
	return a.Bytes(), b.Bytes()
}

// R1.
func TestReplicasDeterministic(t *testing.T) {
	w := small(t, 12, 7)
	cfg := replicaConfig(w, 3)
	cfg.AmbiguousProb = 0.02
	r1, err := RunReplicas(context.Background(), cfg, w)
	require.NoError(t, err)
	r2, err := RunReplicas(context.Background(), cfg, small(t, 12, 7))
	require.NoError(t, err)
	md1, svg1 := renderReplicas(t, r1)
	md2, svg2 := renderReplicas(t, r2)
	require.Equal(t, string(md1), string(md2), "same seed, different report")
	require.True(t, bytes.Equal(svg1, svg2), "same seed, different SVG")
	require.Contains(t, string(svg1), "<svg")
	require.Contains(t, string(md1), "| claims      | 3 |")

	cfg.Seed = 8
	r3, err := RunReplicas(context.Background(), cfg, w)
	require.NoError(t, err)
	md3, _ := renderReplicas(t, r3)
	require.NotEqual(t, string(md1), string(md3), "another seed (another load balancer's draws) should change the report")
}

// R2 and R3: with one replica, none, best-effort and gossip-lww are the
// single router (Run's row of the same mode, field for field); claims
// answers the same requests with no split turn either; nothing splits.
func TestReplicasOneAgree(t *testing.T) {
	w := small(t, 12, 3)
	for _, mode := range []Policy{PlacementHard, PlacementSoft} {
		cfg := replicaConfig(w, 1)
		cfg.AmbiguousProb = 0.02
		cfg.Replicas.Mode = mode
		single := cfg
		single.Policies = []Policy{mode}
		one, err := Run(context.Background(), single, w)
		require.NoError(t, err)
		rep, err := RunReplicas(context.Background(), cfg, w)
		require.NoError(t, err)
		require.Len(t, rep.Results, 4)
		for _, r := range rep.Results {
			assert.Equal(t, len(w.Requests), r.Served, "%s %s", mode, r.Consistency)
			assert.Zero(t, r.ReconcilesLost, "%s %s", mode, r.Consistency)
			if r.Consistency == Claims {
				assert.Positive(t, r.Ops, "%s: the first turns' store operations", mode)
				continue
			}
			assert.Equal(t, one.Results[0], r.Result, "%s %s at R=1 is the single router", mode, r.Consistency)
			assert.Zero(t, r.Ops, "%s %s: nobody to send to", mode, r.Consistency)
		}
		if mode == PlacementHard {
			for _, r := range rep.Results {
				assert.Zero(t, r.SplitTurns, "%s: one router in hard mode never splits", r.Consistency)
				assert.Positive(t, r.Turns)
			}
		}
	}
}

// R4 and R5: with several replicas, none splits sessions; claims splits
// none outside the store's outage window; the sync policies send
// messages and claims makes store operations.
func TestReplicasSplits(t *testing.T) {
	for _, run := range []struct {
		seed   uint64
		counts []int
	}{{1, []int{3, 5}}, {2, []int{4}}} {
		seed := run.seed
		w := small(t, 12, seed)
		cfg := replicaConfig(w, run.counts...)
		cfg.Seed = seed
		cfg.AmbiguousProb = 0.01
		cfg.Replicas.StoreDownAt, cfg.Replicas.StoreDownFor = w.Span()/3, w.Span()/4
		rep, err := RunReplicas(context.Background(), cfg, w)
		require.NoError(t, err)
		unclaimed := 0
		splits := map[[2]int]int{}
		for _, r := range rep.Results {
			splits[[2]int{int(r.Consistency), r.Replicas}] = r.SplitTurns
			assert.Equal(t, len(w.Requests), r.Served, "%s R=%d", r.Consistency, r.Replicas)
			switch r.Consistency {
			case None:
				assert.Positive(t, r.SplitTurns, "none R=%d seed %d", r.Replicas, seed)
				assert.Zero(t, r.Ops)
			case Claims:
				assert.Equal(t, r.SplitInOutage, r.SplitTurns, "claims R=%d seed %d: a split outside the outage window", r.Replicas, seed)
				assert.Positive(t, r.Ops)
				unclaimed += r.Unclaimed
			default:
				assert.Positive(t, r.Ops, "%s: sync messages", r.Consistency)
			}
		}
		assert.Positive(t, unclaimed, "seed %d: sessions placed during the outage", seed)
		for _, n := range cfg.Replicas.Counts {
			for _, c := range []Consistency{BestEffort, Gossip} {
				assert.Less(t, splits[[2]int{int(c), n}], splits[[2]int{int(None), n}], "%s R=%d seed %d: syncing splits fewer than none", c, n, seed)
			}
		}
	}
}

// replicaSim builds (without running) a replicated simulation over a
// small workload, its workers joined.
func replicaSim(t *testing.T, cons Consistency, replicas int) *sim {
	t.Helper()
	w := small(t, 4, 1)
	cfg := replicaConfig(w, replicas)
	cfg.Churn = nil
	s, err := newSimRun(&cfg, PlacementHard, w, &replicaRun{cfg: &cfg.Replicas, cons: cons, replicas: replicas})
	require.NoError(t, err)
	t.Cleanup(s.close)
	for i := range cfg.Workers {
		s.join(i)
	}
	return s
}

// at moves the simulation (and every replica's clock) to d.
func (s *sim) at(t *testing.T, d time.Duration) {
	s.now = d
	for _, rep := range s.reps {
		require.NoError(t, rep.clk.Set(d))
	}
}

// bind dispatches request i on replica k (pinned to rk when not nil) and
// accepts it, returning the target.
func (s *sim) bind(t *testing.T, k, i int, rk *rank) affinity.Target {
	t.Helper()
	s.use(k)
	var pin affinity.Target
	if rk != nil {
		pin = rk.target
	}
	got, h, ok := s.routePlacement(i, pin, rk != nil)
	require.True(t, ok)
	h.complete(s, got, placement.Accepted, true)
	return got.target
}

// R6: best-effort's first live binding wins, on the layer or learned, and
// a learned binding lapses with the local TTL.
func TestBestEffortFirstWins(t *testing.T) {
	s := replicaSim(t, BestEffort, 2)
	rep := s.reps[1]
	a, b := s.up[0], s.up[2]
	s.receive(1, &syncMsg{key: 0, rk: a, gen: a.w.gen})
	require.Equal(t, a, rep.view[0].rk)
	s.at(t, time.Second)
	s.receive(1, &syncMsg{key: 0, rk: b, gen: b.w.gen})
	require.Equal(t, a, rep.view[0].rk, "the first live binding wins")
	s.at(t, time.Second+s.idleTTL())
	s.receive(1, &syncMsg{key: 0, rk: b, gen: b.w.gen})
	require.Equal(t, b, rep.view[0].rk, "a lapsed binding is replaced")
	rk, h, _, ok := s.routeReplicaOn(1, 0)
	require.True(t, ok)
	require.Equal(t, b, rk, "a turn on a replica without a binding follows the learned one")
	h.complete(s, rk, placement.Accepted, true)

	// A binding on the layer wins over any message.
	i := 0
	for s.kid[i] != 1 {
		i++
	}
	got := s.bind(t, 1, i, s.up[3])
	require.Equal(t, s.up[3].target, got)
	s.receive(1, &syncMsg{key: 1, rk: a, gen: a.w.gen})
	require.Nil(t, rep.view[1], "the layer's live binding is kept")
}

// R6: gossip's later write wins everywhere: an earlier one is ignored,
// and a later one ends the layer's own binding when it differs.
func TestGossipLastWins(t *testing.T) {
	s := replicaSim(t, Gossip, 3)
	rep := s.reps[1]
	a, b, c := s.up[0], s.up[2], s.up[4]
	s.receive(1, &syncMsg{key: 0, rk: a, gen: a.w.gen, stamp: stamp{at: time.Second, writer: 0}})
	s.receive(1, &syncMsg{key: 0, rk: b, gen: b.w.gen, stamp: stamp{at: time.Second / 2, writer: 2}})
	require.Equal(t, a, rep.view[0].rk, "an earlier write loses")
	s.receive(1, &syncMsg{key: 0, rk: b, gen: b.w.gen, stamp: stamp{at: time.Second, writer: 2}})
	require.Equal(t, b, rep.view[0].rk, "the same time: the higher writer wins")

	i := 0
	for s.kid[i] != 1 {
		i++
	}
	s.bind(t, 1, i, c)
	_, ok := rep.layer.Query(s.kak[1], affinity.PhaseDecode)
	require.True(t, ok)
	s.at(t, 2*time.Second)
	s.receive(1, &syncMsg{key: 1, rk: a, gen: a.w.gen, stamp: stamp{at: time.Second, writer: 0}})
	_, ok = rep.layer.Query(s.kak[1], affinity.PhaseDecode)
	require.False(t, ok, "a later write ends the layer's other binding")
	rk, h, _, ok := s.routeReplicaOn(1, i)
	require.True(t, ok)
	require.Equal(t, a, rk, "the next turn follows the later write")
	h.complete(s, rk, placement.Accepted, true)
}

// routeReplicaOn routes request i through replica k (as routeReplica does
// after the load balancer's draw).
func (s *sim) routeReplicaOn(k, i int) (*rank, handle, time.Duration, bool) {
	for tries := 0; s.lbPeek(i) != k; tries++ {
		if tries > 1000 {
			panic("the load balancer never picks replica k")
		}
		s.sends[i]++
	}
	return s.routeReplica(i)
}

// routeAfterMove routes request i through replica k whose layer's binding
// is to a worker that failed: the layer's move (B2) with the simulation's
// cancelled context is refused once (the client sends again) and the
// second sending is placed.
func (s *sim) routeAfterMove(k, i int) (*rank, handle, time.Duration, bool) {
	if rk, h, d, ok := s.routeReplicaOn(k, i); ok {
		return rk, h, d, ok
	}
	return s.routeReplicaOn(k, i)
}

// lbPeek is the replica request i's next sending goes to.
func (s *sim) lbPeek(i int) int {
	n := s.sends[i]
	defer func() { s.sends[i] = n }()
	return s.lbPick(i)
}

// R7: claims' store operations: a first turn's CreateOrGet (its dispatch a
// round trip late), none for a later turn on the replica holding the
// claim, a fenced rewrite for a move, and of two movers the first wins.
func TestClaimsStoreOps(t *testing.T) {
	s := replicaSim(t, Claims, 2)
	lat := s.rr2.cfg.StoreLatency
	i, j := 0, 1
	for s.kid[j] != s.kid[i] {
		j++
	}
	rk, h, d, ok := s.routeReplicaOn(0, i)
	require.True(t, ok)
	require.Equal(t, lat, d, "a first turn waits for the store")
	h.complete(s, rk, placement.Accepted, true)
	require.Equal(t, 1, s.rstat.ops)
	key := s.kid[i]
	require.Equal(t, uint64(1), s.store.claims[key].rev)

	rk2, h, d, ok := s.routeReplicaOn(0, j)
	require.True(t, ok)
	require.Zero(t, d, "a later turn on the holder: no store call")
	require.Equal(t, rk, rk2)
	h.complete(s, rk2, placement.Accepted, true)
	require.Equal(t, 1, s.rstat.ops)

	rk3, h, d, ok := s.routeReplicaOn(1, j)
	require.True(t, ok)
	require.Equal(t, lat, d, "the session's first turn on replica 1")
	require.Equal(t, rk, rk3, "the claim is adopted")
	h.complete(s, rk3, placement.Accepted, true)
	require.Equal(t, 2, s.rstat.ops)

	// The claim's worker fails: replica 1 moves first (a fenced
	// rewrite), replica 0 then finds the rewritten claim and follows it.
	s.change(Change{Worker: rk.w.idx, Kind: Fail})
	s.at(t, time.Second)
	moved, h, _, ok := s.routeAfterMove(1, j)
	require.True(t, ok)
	require.NotEqual(t, rk.w, moved.w)
	h.complete(s, moved, placement.Accepted, true)
	require.Equal(t, uint64(2), s.store.claims[key].rev, "the move rewrote the claim")
	require.Equal(t, 3, s.rstat.ops)
	follow, h, _, ok := s.routeAfterMove(0, j)
	require.True(t, ok)
	require.Equal(t, moved, follow, "the first move wins")
	h.complete(s, follow, placement.Accepted, true)
	require.Equal(t, uint64(2), s.store.claims[key].rev)
	require.Equal(t, 4, s.rstat.ops)

	// The rewrite's event evicts the old revision from replica 0's
	// cache; a newer cached revision stays.
	s.reps[0].cache[key] = cachedClaim{rk: rk, gen: rk.w.gen, rev: 1}
	s.claimEvent(0, &syncMsg{key: key, rev: 2})
	require.NotContains(t, s.reps[0].cache, key)
	s.reps[0].cache[key] = cachedClaim{rk: moved, gen: moved.w.gen, rev: 2}
	s.claimEvent(0, &syncMsg{key: key, rev: 2})
	require.Contains(t, s.reps[0].cache, key)
}

// R7: while the store is unreachable, replicas place sessions locally
// (unclaimed, no store call); when it is back each reconciles through
// CreateOrGet, first writer wins, and the loser follows the claim.
func TestClaimsOutage(t *testing.T) {
	s := replicaSim(t, Claims, 2)
	s.rr2.cfg.StoreDownAt, s.rr2.cfg.StoreDownFor = 0, time.Minute
	i, j := 0, 1
	for s.kid[j] != s.kid[i] {
		j++
	}
	key := s.kid[i]
	ra, h, d, ok := s.routeReplicaOn(0, i)
	require.True(t, ok)
	require.Zero(t, d, "no store call while it is unreachable")
	h.complete(s, ra, placement.Accepted, true)
	// Replica 1 places the session elsewhere (ra's worker flaps).
	s.change(Change{Worker: ra.w.idx, Kind: Fail})
	rb, h, _, ok := s.routeReplicaOn(1, j)
	require.True(t, ok)
	require.NotEqual(t, ra.w, rb.w)
	h.complete(s, rb, placement.Accepted, true)
	s.change(Change{Worker: ra.w.idx, Kind: Recover})
	require.Equal(t, 2, s.rstat.unclaimed)
	require.Zero(t, s.rstat.ops)

	s.at(t, time.Minute)
	s.storeBack()
	require.Equal(t, 2, s.rstat.ops, "one reconcile each")
	require.Equal(t, 1, s.rstat.lost, "replica 1's reconcile found replica 0's claim")
	require.Equal(t, ra, s.store.claims[key].rk, "first writer wins")
	follow, h, d, ok := s.routeAfterMove(1, j)
	require.True(t, ok)
	require.Equal(t, s.rr2.cfg.StoreLatency, d)
	require.Equal(t, ra, follow, "the loser follows the claim at its next turn")
	h.complete(s, follow, placement.Accepted, true)
}

// R8: bad replica parameters are a *ParamError.
func TestReplicasBadInput(t *testing.T) {
	w := small(t, 2, 1)
	bad := []func(*ReplicaConfig){
		func(c *ReplicaConfig) { c.Counts = nil },
		func(c *ReplicaConfig) { c.Counts = []int{0} },
		func(c *ReplicaConfig) { c.Counts = []int{65} },
		func(c *ReplicaConfig) { c.Policies = nil },
		func(c *ReplicaConfig) { c.Policies = []Consistency{NumConsistencies} },
		func(c *ReplicaConfig) { c.Mode = RoundRobin },
		func(c *ReplicaConfig) { c.SyncDelay = -time.Second },
		func(c *ReplicaConfig) { c.StoreDownFor = -time.Second },
	}
	for k, f := range bad {
		cfg := replicaConfig(w, 2)
		f(&cfg.Replicas)
		_, err := RunReplicas(context.Background(), cfg, w)
		require.ErrorIs(t, err, ErrInvalidParams, "case %d", k)
		var pe *ParamError
		require.ErrorAs(t, err, &pe)
	}
	cfg := replicaConfig(w, 2)
	cfg.Workers = 0
	_, err := RunReplicas(context.Background(), cfg, w)
	require.ErrorIs(t, err, ErrInvalidParams)
	_, err = ParseConsistency("nope")
	require.ErrorIs(t, err, ErrInvalidParams)
	for _, c := range AllConsistencies() {
		got, err := ParseConsistency(c.String())
		require.NoError(t, err)
		require.Equal(t, c, got)
	}
	require.Equal(t, "Consistency(9)", Consistency(9).String())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = RunReplicas(ctx, replicaConfig(w, 2), w)
	require.ErrorIs(t, err, context.Canceled)
}
