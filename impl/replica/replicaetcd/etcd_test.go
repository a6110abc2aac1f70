package replicaetcd_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/etcdstore"
	"github.com/placementlab/placement/impl/claims/etcdstore/embedded"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/replica"
)

// Replicas as goroutines against the embedded etcd server (loopback
// ports, in this process). Each test starts its own cluster and is
// bounded by its context.

// etcdEnv is a cluster with workers registered and replicas on it.
type etcdEnv struct {
	t    *testing.T
	c    *embedded.Cluster
	opts claims.Options
	// timeout bounds each store call (the etcd requests and the
	// replicas' StoreTimeout).
	timeout time.Duration
	setup   claims.Store
	stores  map[string]*countingStore
}

func newEtcdEnv(t *testing.T, members, workers int, timeout time.Duration) *etcdEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := embedded.Start(ctx, embedded.Config{Members: members})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	e := &etcdEnv{t: t, c: c, opts: claims.Options{IdleTTL: time.Minute, Prefix: "replica-test/"},
		stores: map[string]*countingStore{}, timeout: 10 * time.Second}
	e.setup = e.store("setup") // the test's own reads: generous timeouts
	for i := range workers {
		_, err := e.setup.Register(ctx, fmt.Sprintf("w%d", i), "boot-1")
		require.NoError(t, err)
	}
	e.timeout = timeout
	return e
}

// store opens replica's etcdstore with its own client of endpoints (every
// member's when none), shut down at the end of the test.
func (e *etcdEnv) store(replica string, endpoints ...string) *countingStore {
	e.t.Helper()
	cli, err := e.c.NewClient(endpoints...)
	require.NoError(e.t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := etcdstore.New(ctx, cli, replica, e.opts,
		etcdstore.WithSessionTTL(10*time.Second), etcdstore.WithRequestTimeout(e.timeout),
		etcdstore.WithProbe(100*time.Millisecond, e.timeout))
	if err != nil {
		_ = cli.Close()
	}
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = s.Shutdown(); _ = cli.Close() })
	cs := newCounting(s)
	e.stores[replica] = cs
	return cs
}

// replica starts a Coordinator of name on its own store.
func (e *etcdEnv) replica(name string, endpoints ...string) *replica.Coordinator {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs := e.store(name, endpoints...)
	c, err := replica.New(ctx, replica.Config{Store: cs, Name: name, IdleTTL: e.opts.IdleTTL,
		StoreTimeout: e.timeout, StoreRetry: 200 * time.Millisecond})
	require.NoError(e.t, err)
	cs.rep.Store(c)
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

// claim reads key's claim through the setup store.
func (e *etcdEnv) claim(key string) (claims.Claim, bool) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, ok, err := e.setup.Get(ctx, key)
	require.NoError(e.t, err)
	return cl, ok
}

// obs is what one turn saw.
type obs struct {
	replica, key string
	target       claims.Target
	rev          int64
	hit          bool
}

// TestEtcd_ReplicasAsGoroutines: three replicas, four goroutines each,
// run turns of the same sessions in random orders: every turn of a
// session on every replica goes to its claim's target at the claim's
// revision, each replica reads each claim once (its later turns are
// cached), and the sessions' final turns delete every claim.
func TestEtcd_ReplicasAsGoroutines(t *testing.T) {
	for _, members := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d members", members), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// Generous timeouts: a slow answer on a busy machine would
			// place a session unclaimed (a store found unreachable).
			e := newEtcdEnv(t, members, 3, 10*time.Second)
			eps := e.c.Endpoints()
			const replicas, goroutines, sessions, turns = 3, 4, 12, 3
			reps := make([]*replica.Coordinator, replicas)
			for i := range reps {
				reps[i] = e.replica(fmt.Sprintf("r%d", i), eps[i%len(eps)])
			}
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			var mu sync.Mutex
			var seen []obs
			var wg sync.WaitGroup
			for i, r := range reps {
				for g := range goroutines {
					wg.Add(1)
					go func() {
						defer wg.Done()
						rng := rand.New(rand.NewPCG(seed, uint64(i*goroutines+g)))
						for range turns {
							for _, k := range rng.Perm(sessions) {
								key := fmt.Sprintf("s%d", k)
								tu, err := r.Start(ctx, key, nil)
								if !assert.NoError(t, err) {
									return
								}
								o := obs{replica: r.Name(), key: key, target: tu.Target(), rev: tu.Rev(), hit: tu.Hit()}
								assert.NoError(t, tu.Complete(placement.Accepted))
								tu.Done(false)
								mu.Lock()
								seen = append(seen, o)
								mu.Unlock()
							}
						}
					}()
				}
			}
			wg.Wait()
			require.Len(t, seen, replicas*goroutines*sessions*turns)
			cls := map[string]claims.Claim{}
			for k := range sessions {
				key := fmt.Sprintf("s%d", k)
				cl, ok := e.claim(key)
				require.True(t, ok, key)
				cls[key] = cl
			}
			for _, o := range seen {
				cl := cls[o.key]
				require.Equal(t, cl.Target, o.target, "%s on %s", o.key, o.replica)
				require.Equal(t, cl.Rev, o.rev, "%s on %s (hit %v)", o.key, o.replica, o.hit)
			}
			created := 0
			for _, r := range reps {
				st := r.Stats()
				created += int(st.ClaimsCreated)
				assert.EqualValues(t, goroutines*sessions*turns, st.FirstTurns+st.CachedTurns, r.Name())
				if st.Resets == 0 && st.MovedEvictions == 0 {
					// Each claim read once; every later turn cached.
					assert.EqualValues(t, sessions, st.FirstTurns, "%s: %+v", r.Name(), st)
					assert.Equal(t, sessions, e.stores[r.Name()].n("CreateOrGet"), r.Name())
					continue
				}
				// A Reset (a probe that timed out on a busy machine)
				// evicts the cache: a session is read again only after an
				// eviction.
				t.Logf("%s: %d Resets: %+v", r.Name(), st.Resets, st)
				assert.LessOrEqual(t, st.FirstTurns, uint64(sessions)+st.ResetEvictions+st.MovedEvictions+st.DeleteEvictions, r.Name())
			}
			assert.Equal(t, sessions, created, "one writer per session")

			// Every replica's final turn of each session: the first
			// close marks the claim Closing (the others hold it), a
			// replica that has seen that refuses the turn (replica.ErrClosing),
			// and the last holder's close or unhold deletes the claim.
			for _, r := range reps {
				for k := range sessions {
					tu, err := r.Start(ctx, fmt.Sprintf("s%d", k), nil)
					if errors.Is(err, replica.ErrClosing) {
						continue
					}
					require.NoError(t, err)
					require.NoError(t, tu.Complete(placement.Accepted))
					tu.Done(true)
				}
			}
			for k := range sessions {
				key := fmt.Sprintf("s%d", k)
				require.Eventually(t, func() bool { _, ok := e.claim(key); return !ok }, 10*time.Second, 10*time.Millisecond, key)
			}
		})
	}
}

// TestEtcd_MemberStoppedAndRestarted: three members, each replica's
// client on one of them. The member of replica r0 stops: r0 keeps serving
// its cached session with no store call, places a new session and a
// contested one unclaimed, while r1 claims the contested one elsewhere.
// The member restarts: r0 processes the Reset, reconciles (its own
// session claimed, the contested one lost to r1's claim) and every replica
// agrees on every session; the time that takes is logged.
func TestEtcd_MemberStoppedAndRestarted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	e := newEtcdEnv(t, 3, 3, time.Second)
	eps := e.c.Endpoints()
	reps := []*replica.Coordinator{e.replica("r0", eps[0]), e.replica("r1", eps[1]), e.replica("r2", eps[2])}
	for _, r := range reps {
		serve(t, r, "cached", to("w0"), placement.Accepted, false)
	}

	require.NoError(t, e.c.StopMember(0))
	calls := e.stores["r0"].calls()
	hit := serve(t, reps[0], "cached", nil, placement.Accepted, false)
	assert.True(t, hit.Hit())
	assert.Equal(t, calls, e.stores["r0"].calls(), "a cached turn called the store")
	own := serve(t, reps[0], "own", to("w1"), placement.Accepted, false)
	assert.True(t, own.Unclaimed())
	contested := serve(t, reps[0], "contested", to("w1"), placement.Accepted, false)
	assert.True(t, contested.Unclaimed())
	won := serve(t, reps[1], "contested", to("w2"), placement.Accepted, false)
	assert.False(t, won.Unclaimed())
	assert.EqualValues(t, 2, reps[0].Stats().UnclaimedPlacements)

	require.NoError(t, e.c.RestartMember(ctx, 0))
	restarted := time.Now()
	require.Eventually(t, func() bool { return reps[0].Stats().Reconciles >= 2 }, 20*time.Second, 10*time.Millisecond)
	agree := func() bool {
		for _, key := range []string{"cached", "own", "contested"} {
			cl, ok := e.claim(key)
			if !ok {
				return false
			}
			for _, r := range reps {
				tu, err := r.Start(ctx, key, nil)
				if err != nil {
					return false
				}
				same := tu.Target() == cl.Target && tu.Rev() == cl.Rev && !tu.Unclaimed()
				_ = tu.Complete(placement.Accepted)
				tu.Done(false)
				if !same {
					return false
				}
			}
		}
		return true
	}
	require.Eventually(t, agree, 20*time.Second, 10*time.Millisecond)
	t.Logf("every replica agrees %v after the member's restart", time.Since(restarted))
	st := reps[0].Stats()
	assert.EqualValues(t, 1, st.ReconcilesWon, "%+v", st)
	assert.EqualValues(t, 1, st.ReconcilesLost, "%+v", st)
	assert.GreaterOrEqual(t, st.Resets, uint64(1))
	cl, _ := e.claim("contested")
	assert.Equal(t, claims.Target{Worker: "w2"}, cl.Target)
	cl, _ = e.claim("own")
	assert.Equal(t, claims.Target{Worker: "w1"}, cl.Target)
}

// lateQuarantineStore lets the next Quarantine reach the store and then
// answers it as a deadline that passed (the reply came too late), as a
// wrapped etcd client sees when the leader answers after the request's
// deadline.
type lateQuarantineStore struct {
	claims.Store
	lose atomic.Bool
}

func (s *lateQuarantineStore) Quarantine(ctx context.Context, key string, rev int64, attempt uint64, gen int64) (claims.Claim, error) {
	q, err := s.Store.Quarantine(ctx, key, rev, attempt, gen)
	if err == nil && s.lose.CompareAndSwap(true, false) {
		return claims.Claim{}, fmt.Errorf("quarantine %q: the reply came after the deadline: %w", key, context.DeadlineExceeded)
	}
	return q, err
}

// On the embedded etcd server: a quarantine written whose reply came
// after its deadline is settled by reading the claim; Resolve settles it
// in etcd, and another replica serves the session (issue 25, item 1).
func TestEtcd_LateQuarantineReplySettled(t *testing.T) {
	e := newEtcdEnv(t, 1, 1, 10*time.Second)
	ls := &lateQuarantineStore{Store: e.store("r1")}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r1, err := replica.New(ctx, replica.Config{Store: ls, Name: "r1", StoreTimeout: e.timeout, StoreRetry: 200 * time.Millisecond})
	require.NoError(t, err)
	defer func() { _ = r1.Close() }()
	r2 := e.replica("r2")
	tu, err := r1.Start(ctx, "s", to("w0"))
	require.NoError(t, err)
	ls.lose.Store(true)
	var qe *replica.QuarantinedError
	require.ErrorAs(t, tu.Complete(placement.Ambiguous), &qe)
	tu.Done(false)
	cl, ok := e.claim("s")
	require.True(t, ok)
	require.Equal(t, claims.Quarantined, cl.State, "the quarantine landed")
	require.NoError(t, r1.Resolve(ctx, "s", qe.Attempt, qe.Gen, true))
	cl, ok = e.claim("s")
	require.True(t, ok)
	require.Equal(t, claims.Bound, cl.State, "Resolve returned nil, yet etcd keeps the quarantine")
	require.Eventually(t, func() bool {
		tu, err := r2.Start(ctx, "s", nil)
		if err != nil {
			return false
		}
		defer tu.Done(false)
		if !tu.Hit() {
			require.NoError(t, tu.Complete(placement.Accepted))
		}
		return tu.Target() == claims.Target{Worker: "w0"}
	}, waitFor, tick, "r2 does not serve the session")
}
