package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/etcdstore/embedded"
)

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func startCluster(t *testing.T, members int) *embedded.Cluster {
	t.Helper()
	c, err := embedded.Start(testContext(t, 30*time.Second), embedded.Config{Members: members})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// events is a test's view of one event stream.
type events struct {
	t  *testing.T
	ch <-chan claims.Event
}

func subscribe(t *testing.T, s claims.Store) *events {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := s.Events(ctx)
	require.NoError(t, err)
	return &events{t: t, ch: ch}
}

// next returns the next event other than MembersChanged.
func (e *events) next(timeout time.Duration) claims.Event {
	e.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-e.ch:
			require.True(e.t, ok, "event stream closed")
			if ev.Kind == claims.MembersChanged {
				continue
			}
			return ev
		case <-deadline:
			e.t.Fatalf("no event within %v", timeout)
		}
	}
}

func (e *events) reset(timeout time.Duration) claims.Event {
	e.t.Helper()
	ev := e.next(timeout)
	require.Equal(e.t, claims.Reset, ev.Kind, "want a Reset, got %+v", ev)
	return ev
}

func (e *events) deleted(key string, rev int64, timeout time.Duration) {
	e.t.Helper()
	ev := e.next(timeout)
	require.Equal(e.t, claims.Event{Kind: claims.Delete, Key: key, Rev: rev}, ev)
}

// skipResets skips Resets until the Delete of key's rev.
func (e *events) deletedAfterResets(key string, rev int64, timeout time.Duration) {
	e.t.Helper()
	for {
		ev := e.next(timeout)
		if ev.Kind == claims.Reset {
			continue
		}
		require.Equal(e.t, claims.Event{Kind: claims.Delete, Key: key, Rev: rev}, ev)
		return
	}
}

func to(w string) func() (claims.Target, error) {
	return func() (claims.Target, error) { return claims.Target{Worker: w}, nil }
}

// eventually retries f until it succeeds or d passes, and returns its
// last error.
func eventually(d time.Duration, f func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func withBeforeWatch(f func(rev int64)) Option {
	return func(s *settings) { s.beforeWatch = f }
}

func TestNewRejectsBadInput(t *testing.T) {
	ctx := testContext(t, 10*time.Second)
	cli := shared.Client()
	var nilCtx context.Context
	for name, f := range map[string]func() error{
		"nil context":      func() error { _, err := New(nilCtx, cli, "r", claims.Options{}); return err },
		"nil client":       func() error { _, err := New(ctx, nil, "r", claims.Options{}); return err },
		"empty replica":    func() error { _, err := New(ctx, cli, "", claims.Options{}); return err },
		"negative TTL":     func() error { _, err := New(ctx, cli, "r", claims.Options{IdleTTL: -time.Second}); return err },
		"zero session":     func() error { _, err := New(ctx, cli, "r", claims.Options{}, WithSessionTTL(0)); return err },
		"zero timeout":     func() error { _, err := New(ctx, cli, "r", claims.Options{}, WithRequestTimeout(0)); return err },
		"negative probe":   func() error { _, err := New(ctx, cli, "r", claims.Options{}, WithProbe(-1, time.Second)); return err },
		"zero event queue": func() error { _, err := New(ctx, cli, "r", claims.Options{}, WithEventBuffer(0)); return err },
	} {
		require.ErrorIs(t, f(), claims.ErrInvalidArgument, name)
	}
}

// A store whose etcd cannot be reached fails with a
// *claims.UnavailableError, within its request timeout.
func TestNewUnreachable(t *testing.T) {
	c := startCluster(t, 1)
	cli, err := c.NewClient()
	require.NoError(t, err)
	defer cli.Close()
	require.NoError(t, c.StopMember(0))
	start := time.Now()
	_, err = New(testContext(t, 10*time.Second), cli, "r", claims.Options{}, WithRequestTimeout(300*time.Millisecond))
	var ue *claims.UnavailableError
	require.ErrorAs(t, err, &ue)
	require.ErrorIs(t, err, claims.ErrUnavailable)
	require.Equal(t, "new", ue.Op)
	require.Less(t, time.Since(start), 5*time.Second)
}

// The keys and values are the layout the package doc promises.
func TestKeyLayout(t *testing.T) {
	ctx := testContext(t, 20*time.Second)
	o := newOpener(t, shared, time.Minute)
	s := o.open("r/1")
	m, err := s.Register(ctx, "w", "boot-1")
	require.NoError(t, err)
	// Keys with slashes do not share holders.
	c1, _, err := s.CreateOrGet(ctx, "a", to("w"))
	require.NoError(t, err)
	c2, _, err := s.CreateOrGet(ctx, "a/b", to("w"))
	require.NoError(t, err)
	require.NoError(t, s.Hold(ctx, "a/b", c2.Rev, "r/1"))
	id, err := s.ReplicaID(ctx, "r/1")
	require.NoError(t, err)

	p := o.opts.Prefix
	resp, err := shared.Client().Get(ctx, p, clientv3.WithPrefix())
	require.NoError(t, err)
	type entry struct {
		value      string
		lease, mod int64
	}
	got := map[string]entry{}
	for _, kv := range resp.Kvs {
		got[strings.TrimPrefix(string(kv.Key), p)] = entry{string(kv.Value), kv.Lease, kv.ModRevision}
	}
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	require.ElementsMatch(t, []string{"claims/a", "claims/a/b", "holders/a%2Fb/r%2F1", "workers/w", "replica-id"}, keys)

	var v claimValue
	require.NoError(t, json.Unmarshal([]byte(got["claims/a"].value), &v))
	require.Equal(t, claimValue{Target: targetValue{Worker: "w"}, Gen: m.Gen, State: "bound", Lease: got["claims/a"].lease}, v)
	require.NotZero(t, v.Lease, "the claim is on its own lease")
	require.Equal(t, c1.Rev, got["claims/a"].mod)
	require.NotEqual(t, got["claims/a"].lease, got["claims/a/b"].lease, "each claim has its lease")
	require.Equal(t, int64(s.SessionLease()), got["holders/a%2Fb/r%2F1"].lease, "holds are on the session lease")
	require.Equal(t, int64(s.SessionLease()), got["workers/w"].lease, "registrations are on the session lease")
	require.Equal(t, m.Gen, got["workers/w"].mod, "the generation is the registration's mod revision")
	require.JSONEq(t, `{"identity":"boot-1"}`, got["workers/w"].value)
	require.Equal(t, fmt.Sprint(id), got["replica-id"].value)

	ttl, err := shared.Client().TimeToLive(ctx, clientv3.LeaseID(v.Lease))
	require.NoError(t, err)
	require.Equal(t, int64(60), ttl.GrantedTTL, "the claim lease's TTL is IdleTTL")
}

// A registration with the current identity is a transaction that takes
// its Then branch: the key keeps its mod revision (the generation), its
// version and the lease of the session that wrote it; the cluster's
// revision does not move. Another identity is a Put on the caller's lease.
func TestReRegisterSameIdentityWritesNothing(t *testing.T) {
	ctx := testContext(t, 20*time.Second)
	o := newOpener(t, shared, time.Minute)
	a, b := o.open("a"), o.open("b")
	m, err := a.Register(ctx, "w", "boot-1")
	require.NoError(t, err)
	key := o.opts.Prefix + "workers/w"
	before, err := shared.Client().Get(ctx, key)
	require.NoError(t, err)
	require.Len(t, before.Kvs, 1)

	again, err := b.Register(ctx, "w", "boot-1")
	require.NoError(t, err)
	require.Equal(t, m, again)
	after, err := shared.Client().Get(ctx, key)
	require.NoError(t, err)
	require.Len(t, after.Kvs, 1)
	require.Equal(t, before.Header.Revision, after.Header.Revision, "nothing was written")
	require.Equal(t, before.Kvs[0], after.Kvs[0])
	require.Equal(t, int64(a.SessionLease()), after.Kvs[0].Lease, "the registration stays on a's session lease")

	restarted, err := b.Register(ctx, "w", "boot-2")
	require.NoError(t, err)
	require.Greater(t, restarted.Gen, m.Gen)
	now, err := shared.Client().Get(ctx, key)
	require.NoError(t, err)
	require.Len(t, now.Kvs, 1)
	require.Equal(t, restarted.Gen, now.Kvs[0].ModRevision)
	require.Equal(t, int64(b.SessionLease()), now.Kvs[0].Lease, "a restart is a Put on the caller's lease")
}

// Idle expiry is etcd's lease expiry: an untouched claim goes about
// IdleTTL after its write, a touched one stays, and Hold alone does not
// keep a claim alive.
func TestIdleExpiryAndTouch(t *testing.T) {
	ctx := testContext(t, 30*time.Second)
	const idle = time.Second
	o := newOpener(t, shared, idle)
	s := o.open("r")
	st := subscribe(t, s)
	st.reset(5 * time.Second)
	_, err := s.Register(ctx, "w", "1")
	require.NoError(t, err)

	// start is before the idle claim's write (its lease's grant): the
	// lower bound below holds however slow the machine is.
	start := time.Now()
	idleC, _, err := s.CreateOrGet(ctx, "idle", to("w"))
	require.NoError(t, err)
	require.NoError(t, s.Hold(ctx, "idle", idleC.Rev, "r"))
	used, _, err := s.CreateOrGet(ctx, "used", to("w"))
	require.NoError(t, err)

	// Touch "used" every IdleTTL/4 for 3 IdleTTLs.
	touched := make(chan error, 1)
	go func() {
		for time.Since(start) < 3*idle {
			if err := s.Touch(ctx, "used", used.Rev); err != nil {
				touched <- err
				return
			}
			time.Sleep(idle / 4)
		}
		touched <- nil
	}()

	st.deleted("idle", idleC.Rev, 5*time.Second)
	gone := time.Since(start)
	assert.GreaterOrEqual(t, gone, idle, "expired before IdleTTL")
	t.Logf("untouched claim expired %v after its write (IdleTTL %v)", gone, idle)
	_, ok, err := s.Get(ctx, "idle")
	require.NoError(t, err)
	require.False(t, ok)

	require.NoError(t, <-touched)
	got, ok, err := s.Get(ctx, "used")
	require.NoError(t, err)
	require.True(t, ok, "a touched claim lives past 3 IdleTTLs")
	require.Equal(t, used, got)
	// Untouched now, it goes too.
	st.deleted("used", used.Rev, 5*time.Second)
	require.ErrorIs(t, s.Touch(ctx, "used", used.Rev), claims.ErrClaimMoved)
}

// Replicas as goroutines, each with its own client, race CreateOrGet on
// a three-member cluster; a member stopped and restarted loses nothing.
func TestThreeMembers(t *testing.T) {
	ctx := testContext(t, 60*time.Second)
	c := startCluster(t, 3)
	// Sessions outlive the outage, so holds survive it.
	o := newOpener(t, c, time.Minute, WithSessionTTL(10*time.Second), WithRequestTimeout(15*time.Second),
		WithProbe(200*time.Millisecond, 500*time.Millisecond)) // the probe must notice the stopped member
	setup := o.open("setup")
	for i := range 4 {
		_, err := setup.Register(ctx, fmt.Sprintf("w%d", i), "1")
		require.NoError(t, err)
	}

	// Each replica's client talks to one member.
	const replicas = 9
	stores := make([]*handle, replicas)
	for i := range stores {
		stores[i] = o.open(fmt.Sprintf("r%d", i), c.Endpoints()[i%3])
	}
	type result struct {
		c       claims.Claim
		created bool
		err     error
	}
	for round := range 3 {
		key := fmt.Sprintf("race-%d", round)
		results := make([]result, replicas)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, s := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				cl, created, err := s.CreateOrGet(ctx, key, to(fmt.Sprintf("w%d", i%4)))
				results[i] = result{cl, created, err}
			}()
		}
		close(start)
		wg.Wait()
		winners := 0
		for i, r := range results {
			require.NoError(t, r.err, "replica %d", i)
			require.Equal(t, results[0].c, r.c, "replica %d got another claim", i)
			if r.created {
				winners++
			}
		}
		require.Equal(t, 1, winners, "%s: one replica creates the claim", key)
	}

	claim, ok, err := stores[0].Get(ctx, "race-0")
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, stores[1].Hold(ctx, "race-0", claim.Rev, "r1"))
	// A stream of a replica of each member.
	streams := make([]*events, 3)
	for i := range streams {
		streams[i] = subscribe(t, stores[i])
		streams[i].reset(5 * time.Second)
	}

	// Stop the leader.
	leader := -1
	for i, ep := range c.Endpoints() {
		resp, err := c.Client().Status(ctx, ep)
		require.NoError(t, err)
		if resp.Leader == resp.Header.MemberId {
			leader = i
		}
	}
	require.NotEqual(t, -1, leader)
	require.NoError(t, c.StopMember(leader))
	// Claims survive, and every replica of a running member answers (after
	// the election).
	for i, s := range stores {
		if i%3 == leader {
			continue
		}
		var got claims.Claim
		require.NoError(t, eventually(10*time.Second, func() error {
			var err error
			got, _, err = s.Get(ctx, "race-0")
			return err
		}), "replica %d with member %d stopped", i, leader)
		require.Equal(t, claim, got)
	}
	// The streams of running members go on (resumed, or after a Reset).
	up := (leader + 1) % 3
	q, err := stores[up].Quarantine(ctx, "race-0", claim.Rev, 5, claim.Gen)
	require.NoError(t, err)
	for i, st := range streams {
		if i != leader {
			st.deletedAfterResets("race-0", claim.Rev, 10*time.Second)
		}
	}

	require.NoError(t, c.RestartMember(ctx, leader))
	// The replicas of the restarted member answer again, and read
	// everything written while it was down.
	for i := leader; i < replicas; i += 3 {
		require.NoError(t, eventually(10*time.Second, func() error {
			got, ok, err := stores[i].Get(ctx, "race-0")
			if err == nil && (!ok || got != q) {
				err = fmt.Errorf("got %+v %v", got, ok)
			}
			return err
		}), "replica %d of the restarted member", i)
	}
	// The stopped member's replica's stream sent a Reset (what it missed
	// may come before it, if its watch resumed first) and goes on.
	cut := streams[leader]
	for {
		ev := cut.next(10 * time.Second)
		if ev.Kind == claims.Reset {
			t.Logf("the stopped member's replica's stream: Reset %q", ev.Why)
			break
		}
		require.Equal(t, claims.Event{Kind: claims.Delete, Key: "race-0", Rev: claim.Rev}, ev)
	}
	// r1's hold survived: a close by another replica is deferred.
	res, err := stores[leader].Close(ctx, "race-0", q.Rev, "x")
	require.NoError(t, err)
	require.Equal(t, claims.CloseDeferred, res)
	for _, st := range streams {
		st.deletedAfterResets("race-0", q.Rev, 10*time.Second)
	}
}

// A member that loses its leader (both its peers stopped) cancels the
// stream's watches (they require a leader): the stream sends a Reset once
// a leader is back, and goes on. Probes are off, so the watch's
// cancellation alone causes the Reset.
func TestLostLeader(t *testing.T) {
	ctx := testContext(t, 60*time.Second)
	c := startCluster(t, 3)
	o := newOpener(t, c, time.Minute, WithProbe(time.Hour, time.Second), WithSessionTTL(10*time.Second))
	ep0, err := c.Endpoint(0)
	require.NoError(t, err)
	s := o.open("r", ep0)
	_, err = s.Register(ctx, "w", "1")
	require.NoError(t, err)
	cl, _, err := s.CreateOrGet(ctx, "k", to("w"))
	require.NoError(t, err)
	st := subscribe(t, s)
	st.reset(5 * time.Second)

	require.NoError(t, c.StopMember(1))
	require.NoError(t, c.StopMember(2))
	// Member 0 alone has no leader: no Reset can come before one is back
	// (the Reset follows a read of the current revision).
	select {
	case ev := <-st.ch:
		t.Fatalf("an event while the store has no leader: %+v", ev)
	case <-time.After(time.Second):
	}
	require.NoError(t, c.RestartMember(ctx, 1))
	ev := st.reset(15 * time.Second)
	t.Logf("Reset %q", ev.Why)
	require.Contains(t, ev.Why, "no leader")
	res, err := s.Close(ctx, "k", cl.Rev, "r")
	require.NoError(t, err)
	require.Equal(t, claims.CloseDeleted, res)
	st.deletedAfterResets("k", cl.Rev, 10*time.Second)
}

// The only member stopped and restarted: calls fail with
// *claims.UnavailableError meanwhile; afterwards claims, holds and
// registrations are there, the store answers, and the stream has sent a
// Reset and goes on.
func TestMemberRestart(t *testing.T) {
	ctx := testContext(t, 60*time.Second)
	c := startCluster(t, 1)
	// Sessions outlive the outage, so holds survive it.
	o := newOpener(t, c, time.Minute, WithRequestTimeout(500*time.Millisecond), WithSessionTTL(10*time.Second))
	a, b := o.open("a"), o.open("b")
	m, err := a.Register(ctx, "w", "1")
	require.NoError(t, err)
	cl, _, err := a.CreateOrGet(ctx, "s", to("w"))
	require.NoError(t, err)
	require.NoError(t, a.Hold(ctx, "s", cl.Rev, "a"))
	st := subscribe(t, b)
	st.reset(5 * time.Second)

	require.NoError(t, c.StopMember(0))
	_, _, err = b.Get(ctx, "s")
	var ue *claims.UnavailableError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, "get", ue.Op)
	_, _, err = b.CreateOrGet(ctx, "t", to("w"))
	require.ErrorIs(t, err, claims.ErrUnavailable)

	require.NoError(t, c.RestartMember(ctx, 0))
	reset := st.reset(15 * time.Second)
	t.Logf("after the restart: Reset %q", reset.Why)
	require.NoError(t, eventually(10*time.Second, func() error { _, _, err := b.Get(ctx, "s"); return err }))
	got, ok, err := b.Get(ctx, "s")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, cl, got)
	ms, _, err := b.Members(ctx)
	require.NoError(t, err)
	require.Equal(t, []claims.Member{m}, ms, "the registration survived")
	res, err := b.Close(ctx, "s", cl.Rev, "b")
	require.NoError(t, err)
	require.Equal(t, claims.CloseDeferred, res, "a's hold survived")
	// Closing is a new revision: its Delete comes on the stream.
	st.deletedAfterResets("s", cl.Rev, 10*time.Second)
}

// A client cut off by a blackholing proxy: calls fail with
// *claims.UnavailableError; once the proxy forwards again the store
// answers and the stream sends a Reset, then events again.
func TestDisconnectedClient(t *testing.T) {
	ctx := testContext(t, 60*time.Second)
	c := startCluster(t, 1)
	p, err := c.Proxy(0)
	require.NoError(t, err)
	o := newOpener(t, c, time.Minute, WithRequestTimeout(500*time.Millisecond))
	other := o.open("other")
	_, err = other.Register(ctx, "w", "1")
	require.NoError(t, err)
	cut := o.open("cut", p.Endpoint())
	t.Cleanup(func() {
		_ = cut.Shutdown() // its connections end before the proxy closes
		_ = p.Close()
	})
	st := subscribe(t, cut)
	st.reset(5 * time.Second)
	cl, _, err := cut.CreateOrGet(ctx, "s", to("w"))
	require.NoError(t, err)

	p.BlackholeTx()
	p.BlackholeRx()
	start := time.Now()
	_, _, err = cut.Get(ctx, "s")
	var ue *claims.UnavailableError
	require.ErrorAs(t, err, &ue, "%v", err)
	require.Less(t, time.Since(start), 3*time.Second)
	err = cut.Touch(ctx, "s", cl.Rev)
	require.ErrorIs(t, err, claims.ErrUnavailable)
	// Meanwhile another replica changes the claim: the cut replica's
	// stream cannot see it.
	q, err := other.Quarantine(ctx, "s", cl.Rev, 1, cl.Gen)
	require.NoError(t, err)

	p.UnblackholeTx()
	p.UnblackholeRx()
	healed := time.Now()
	for {
		ev := st.next(20 * time.Second)
		if ev.Kind == claims.Reset {
			t.Logf("Reset %v after the proxy healed: %q", time.Since(healed), ev.Why)
			break
		}
		// The change made while cut off may come first (the watch
		// resumed), but a Reset must follow.
		require.Equal(t, claims.Event{Kind: claims.Delete, Key: "s", Rev: cl.Rev}, ev)
	}
	got, ok, err := cut.Get(ctx, "s")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, q, got)
	_, ok, err = other.Resolve(ctx, "s", 1, q.Gen, false)
	require.NoError(t, err)
	require.False(t, ok)
	st.deletedAfterResets("s", q.Rev, 10*time.Second)
}

// A compaction while a stream's watch is behind it: the stream sends a
// Reset in place of the events it cannot know (the events in between are
// lost, not delivered) and resumes from the current revision. Compacted
// past the watch's start revision, the watch fails with ErrCompacted;
// compacted right at it, the first event comes without the revision it
// ended (its previous value is compacted).
func TestCompactionUnderWatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		past  bool
		reset string
	}{
		{"PastWatchStart", true, "compacted"},
		{"AtWatchStart", false, "no previous revision"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t, 30*time.Second)
			c := startCluster(t, 1)
			behind := make(chan int64)
			release := make(chan struct{})
			var once sync.Once
			o := newOpener(t, c, time.Minute, withBeforeWatch(func(rev int64) {
				once.Do(func() {
					behind <- rev
					<-release
				})
			}))
			s := o.open("r")
			_, err := s.Register(ctx, "w", "1")
			require.NoError(t, err)
			cl, _, err := s.CreateOrGet(ctx, "s", to("w"))
			require.NoError(t, err)

			st := subscribe(t, s)
			from := <-behind // the stream read the revision and is about to watch from+1
			require.GreaterOrEqual(t, from, cl.Rev)
			// Writes after from end revisions the stream would report.
			q, err := s.Quarantine(ctx, "s", cl.Rev, 1, cl.Gen)
			require.NoError(t, err)
			require.Equal(t, from+1, q.Rev)
			last := q
			if tc.past {
				last, _, err = s.Resolve(ctx, "s", 1, q.Gen, true)
				require.NoError(t, err)
			}
			require.NoError(t, c.Compact(ctx, last.Rev))
			close(release)

			st.reset(5 * time.Second) // the stream's first
			ev := st.reset(5 * time.Second)
			require.Contains(t, ev.Why, tc.reset, "want the compaction's Reset, not the lost Deletes")
			t.Logf("Reset %q", ev.Why)
			res, err := s.Close(ctx, "s", last.Rev, "r")
			require.NoError(t, err)
			require.Equal(t, claims.CloseDeleted, res)
			st.deletedAfterResets("s", last.Rev, 5*time.Second)
		})
	}
}

// A consumer that does not keep up gets a Reset in place of the events it
// missed, then events again.
func TestSlowConsumer(t *testing.T) {
	ctx := testContext(t, 30*time.Second)
	o := newOpener(t, shared, time.Minute, WithEventBuffer(4))
	s := o.open("r")
	st := subscribe(t, s)
	st.reset(5 * time.Second)
	_, err := s.Register(ctx, "w", "1")
	require.NoError(t, err)
	var last claims.Claim
	for i := range 12 {
		cl, _, err := s.CreateOrGet(ctx, fmt.Sprintf("k%d", i), to("w"))
		require.NoError(t, err)
		res, err := s.Close(ctx, cl.Key, cl.Rev, "r")
		require.NoError(t, err)
		require.Equal(t, claims.CloseDeleted, res)
		last = cl
	}
	// Wait until the stream has seen the last Delete (the watch is
	// asynchronous), reading nothing meanwhile.
	require.NoError(t, eventually(5*time.Second, func() error {
		if _, ok, err := s.Get(ctx, last.Key); err != nil || ok {
			return errors.New("not yet")
		}
		return nil
	}))
	time.Sleep(300 * time.Millisecond)
	ev := st.next(5 * time.Second)
	require.Equal(t, claims.Reset, ev.Kind, "want the overflow's Reset first, got %+v", ev)
	require.Contains(t, ev.Why, "slow consumer")
	cl, _, err := s.CreateOrGet(ctx, "after", to("w"))
	require.NoError(t, err)
	_, err = s.Close(ctx, "after", cl.Rev, "r")
	require.NoError(t, err)
	for {
		ev := st.next(5 * time.Second)
		if ev.Kind == claims.Delete && ev.Key == "after" {
			require.Equal(t, cl.Rev, ev.Rev)
			break
		}
		require.NotEqual(t, claims.Reset, ev.Kind, "a second Reset: %+v", ev)
	}
}

// A replica process that dies (its client closed, nothing released): its
// session lease expires after the session TTL, its holds and
// registrations vanish with it, and a deferred close it held up
// completes.
func TestCrashedReplicaVanishes(t *testing.T) {
	ctx := testContext(t, 30*time.Second)
	o := newOpener(t, shared, time.Minute, WithSessionTTL(time.Second))
	a, b := o.open("a"), o.open("b")
	_, err := a.Register(ctx, "wa", "1")
	require.NoError(t, err)
	mb, err := b.Register(ctx, "wb", "1")
	require.NoError(t, err)
	cl, _, err := b.CreateOrGet(ctx, "s", to("wb"))
	require.NoError(t, err)
	require.NoError(t, a.Hold(ctx, "s", cl.Rev, "a"))
	st := subscribe(t, b)
	st.reset(5 * time.Second)
	res, err := b.Close(ctx, "s", cl.Rev, "b")
	require.NoError(t, err)
	require.Equal(t, claims.CloseDeferred, res)
	closing, _, err := b.Get(ctx, "s")
	require.NoError(t, err)
	st.deleted("s", cl.Rev, 5*time.Second)

	start := time.Now()
	lease := a.crash()
	require.NotEqual(t, clientv3.NoLease, lease)
	st.deleted("s", closing.Rev, 10*time.Second)
	t.Logf("the dead replica's hold vanished and its deferred close completed %v after it died", time.Since(start))
	ms, _, err := b.Members(ctx)
	require.NoError(t, err)
	require.Equal(t, []claims.Member{mb}, ms, "its registration vanished")
}

// A session lost while the store lives on (its lease revoked, as an
// expiry during a long partition would): the stream sends a Reset, the
// registration the store wrote is written again on a new session (a new
// generation: the old registration ended), and later holds and
// registrations go to the new session.
func TestSessionLost(t *testing.T) {
	ctx := testContext(t, 30*time.Second)
	o := newOpener(t, shared, time.Minute)
	s := o.open("r")
	m1, err := s.Register(ctx, "w", "1")
	require.NoError(t, err)
	st := subscribe(t, s)
	st.reset(5 * time.Second)
	old := s.SessionLease()
	_, err = shared.Client().Revoke(ctx, old)
	require.NoError(t, err)
	ev := st.reset(5 * time.Second)
	require.Contains(t, ev.Why, "session")
	var ms []claims.Member
	require.NoError(t, eventually(5*time.Second, func() error {
		ms, _, err = s.Members(ctx)
		if err == nil && len(ms) != 1 {
			err = fmt.Errorf("members %+v", ms)
		}
		return err
	}))
	require.Equal(t, "1", ms[0].Identity, "the registration was written again")
	require.Greater(t, ms[0].Gen, m1.Gen, "with a new generation")
	resp, err := shared.Client().Get(ctx, o.opts.Prefix+"workers/w")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	require.Equal(t, int64(s.SessionLease()), resp.Kvs[0].Lease, "on the new session")
	require.NotEqual(t, old, s.SessionLease())
	m, err := s.Register(ctx, "w", "2")
	require.NoError(t, err)
	require.NotEqual(t, old, s.SessionLease())
	cl, _, err := s.CreateOrGet(ctx, "k", to("w"))
	require.NoError(t, err)
	require.Equal(t, m.Gen, cl.Gen)
	require.NoError(t, s.Hold(ctx, "k", cl.Rev, "r"))
	resp, err = shared.Client().Get(ctx, s.holderKey("k", "r"))
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	require.Equal(t, int64(s.SessionLease()), resp.Kvs[0].Lease)
}
