package embedded

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
)

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestStartCloseNoLeak starts and closes a one-member and a three-member
// cluster (stopping and restarting a member, a client through a proxy)
// and checks that every goroutine they started ends. The last to end are
// the members' peer HTTP keep-alive connections (etcd's peer round
// tripper, used for version checks and lease renewals sent to the leader,
// is never closed): they end by their 5 s read timeout, so the check
// waits up to 10 s.
func TestStartCloseNoLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx := testContext(t, time.Minute)
	for _, n := range []int{1, 3} {
		start := time.Now()
		c, err := Start(ctx, Config{Members: n})
		require.NoError(t, err)
		t.Logf("%d members: started in %v", n, time.Since(start))
		require.Equal(t, n, c.Size())
		require.Len(t, c.Endpoints(), n)
		_, err = c.Client().Put(ctx, "k", "v")
		require.NoError(t, err)
		wch := c.Client().Watch(ctx, "k") // a stream StopMember and Close must cut
		_ = wch

		// A member stopped and restarted keeps its data.
		last := n - 1
		start = time.Now()
		require.NoError(t, c.StopMember(last))
		require.False(t, c.Running(last))
		require.NoError(t, c.StopMember(last), "stopping a stopped member")
		t.Logf("%d members: member stopped in %v", n, time.Since(start))
		start = time.Now()
		require.NoError(t, c.RestartMember(ctx, last))
		require.True(t, c.Running(last))
		t.Logf("%d members: member restarted in %v", n, time.Since(start))
		ep, err := c.Endpoint(last)
		require.NoError(t, err)
		cli, err := c.NewClient(ep)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			gctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			resp, err := cli.Get(gctx, "k")
			return err == nil && len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == "v"
		}, 10*time.Second, 20*time.Millisecond)

		// A client through a proxy.
		p, err := c.Proxy(0)
		require.NoError(t, err)
		pcli, err := c.NewClient(p.Endpoint())
		require.NoError(t, err)
		_, err = pcli.Get(ctx, "k")
		require.NoError(t, err)

		require.NoError(t, pcli.Close())
		require.NoError(t, p.Close())
		require.NoError(t, cli.Close())
		start = time.Now()
		require.NoError(t, c.Close())
		require.NoError(t, c.Close(), "a second Close")
		t.Logf("%d members: closed in %v", n, time.Since(start))
	}
	start := time.Now()
	deadline := start.Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutine leak: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("goroutines back to %d (from %d) %v after the last Close", runtime.NumGoroutine(), before, time.Since(start))
}

func TestStartRejectsBadConfig(t *testing.T) {
	ctx := testContext(t, 10*time.Second)
	var nilCtx context.Context
	for name, cfg := range map[string]Config{
		"negative members":  {Members: -1},
		"too many members":  {Members: MaxMembers + 1},
		"election too fast": {TickMs: 100, ElectionMs: 200},
		"bad log level":     {LogLevel: "loud"},
	} {
		_, err := Start(ctx, cfg)
		require.ErrorIs(t, err, ErrInvalidConfig, name)
	}
	_, err := Start(nilCtx, Config{})
	require.ErrorIs(t, err, ErrInvalidConfig)
}

func TestMemberErrors(t *testing.T) {
	ctx := testContext(t, 30*time.Second)
	dir := t.TempDir()
	c, err := Start(ctx, Config{Dir: dir})
	require.NoError(t, err)
	require.ErrorIs(t, c.StopMember(1), ErrNoMember)
	require.ErrorIs(t, c.StopMember(-1), ErrNoMember)
	_, err = c.Endpoint(3)
	require.ErrorIs(t, err, ErrNoMember)
	require.ErrorIs(t, c.RestartMember(ctx, 0), ErrMemberRunning)
	_, err = c.Proxy(2)
	require.ErrorIs(t, err, ErrNoMember)
	require.NoError(t, c.Close())
	require.ErrorIs(t, c.StopMember(0), ErrClosed)
	require.ErrorIs(t, c.RestartMember(ctx, 0), ErrClosed)
	// A Dir given is left in place, with the member's data in it.
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	_, err = os.Stat(filepath.Join(dir, entries[0].Name(), "member"))
	require.NoError(t, err)
}

// A blackholing proxy cuts a client off; once it forwards again, the
// client reconnects (NewClient's keepalives and reconnect backoff).
func TestProxyCutsClientOff(t *testing.T) {
	ctx := testContext(t, 30*time.Second)
	c, err := Start(ctx, Config{})
	require.NoError(t, err)
	defer c.Close()
	p, err := c.Proxy(0)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(p.Endpoint(), "http://127.0.0.1:"))
	cli, err := c.NewClient(p.Endpoint())
	require.NoError(t, err)
	_, err = cli.Put(ctx, "k", "v")
	require.NoError(t, err)

	p.BlackholeTx()
	p.BlackholeRx()
	gctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = cli.Get(gctx, "k")
	cancel()
	require.Error(t, err, "a Get through a blackhole")

	p.UnblackholeTx()
	p.UnblackholeRx()
	healed := time.Now()
	require.Eventually(t, func() bool {
		gctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		resp, err := cli.Get(gctx, "k", clientv3.WithSerializable())
		return err == nil && len(resp.Kvs) == 1
	}, 15*time.Second, 20*time.Millisecond)
	t.Logf("client answered %v after the proxy healed", time.Since(healed))
	require.NoError(t, cli.Close())
	require.NoError(t, p.Close())
}

// within runs f and returns its error, failing the test if f has not
// returned within d (it is left running: the test fails rather than
// hangs).
func within(t *testing.T, d time.Duration, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
		return nil
	}
}

// A three-member cluster stopped whole restarts from its data
// directories: a member restarted alone returns ErrNoQuorum at once
// (left running, it cannot serve yet), can be stopped again, and the
// members restarted together serve, with the data intact. Two of three
// stopped (a quorum loss) restart together as well.
func TestRestartWithoutQuorum(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	c, err := Start(ctx, Config{Members: 3})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Client().Put(ctx, "k", "v")
	require.NoError(t, err)
	for i := range 3 {
		require.NoError(t, c.StopMember(i))
	}
	start := time.Now()
	err = within(t, 20*time.Second, "RestartMember without a quorum", func() error { return c.RestartMember(ctx, 0) })
	require.ErrorIs(t, err, ErrNoQuorum)
	require.True(t, c.Running(0))
	t.Logf("member 0 restarted alone: %v after %v", err, time.Since(start))
	require.NoError(t, within(t, 20*time.Second, "StopMember of a member waiting for a quorum", func() error { return c.StopMember(0) }))
	require.False(t, c.Running(0))

	start = time.Now()
	require.NoError(t, within(t, 60*time.Second, "RestartMembers", func() error { return c.RestartMembers(ctx, 0, 1, 2) }))
	t.Logf("three members restarted from their data directories in %v", time.Since(start))
	get := func(ep string) {
		t.Helper()
		cli, err := c.NewClient(ep)
		require.NoError(t, err)
		defer cli.Close()
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resp, err := cli.Get(gctx, "k")
		require.NoError(t, err)
		require.Len(t, resp.Kvs, 1)
		require.Equal(t, "v", string(resp.Kvs[0].Value))
		_, err = cli.Put(gctx, "k2", ep)
		require.NoError(t, err)
	}
	for _, ep := range c.Endpoints() {
		get(ep)
	}

	// A quorum loss: two of three stopped; restarted one at a time, the
	// first returns once a quorum serves.
	require.NoError(t, c.StopMember(1))
	require.NoError(t, c.StopMember(2))
	require.NoError(t, within(t, 60*time.Second, "RestartMember regaining the quorum", func() error { return c.RestartMember(ctx, 2) }))
	require.NoError(t, within(t, 60*time.Second, "RestartMember", func() error { return c.RestartMember(ctx, 1) }))
	for _, ep := range c.Endpoints() {
		get(ep)
	}
	require.ErrorIs(t, c.RestartMembers(ctx, 0), ErrMemberRunning)
	require.ErrorIs(t, c.RestartMembers(ctx, 3), ErrNoMember)
}

// A client notices a dead connection (a blackholing proxy: no byte comes
// back, no error either) within ClientReadIdleTimeout, with and without a
// stream open on it, and drops it; a live connection left idle is not
// dropped (the member's pings keep it talking). The bound allows 5 s of
// slack for a loaded machine; gRPC's keepalive alone took about 11 s
// with a stream open and never noticed an idle connection.
func TestClientNoticesDeadConnection(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	c, err := Start(ctx, Config{})
	require.NoError(t, err)
	defer c.Close()
	const bound = ClientReadIdleTimeout + 5*time.Second

	// A live, idle connection stays up.
	cli, err := c.NewClient()
	require.NoError(t, err)
	_, err = cli.Put(ctx, "k", "v")
	require.NoError(t, err)
	cc := cli.ActiveConnection()
	waitConnReady(ctx, t, cc)
	wctx, cancel := context.WithTimeout(ctx, 3*ClientReadIdleTimeout)
	changed := cc.WaitForStateChange(wctx, connectivity.Ready)
	cancel()
	require.False(t, changed, "a live idle connection was dropped: %v", cc.GetState())
	require.NoError(t, cli.Close())

	for _, stream := range []bool{false, true} {
		p, err := c.Proxy(0)
		require.NoError(t, err)
		cli, err := c.NewClient(p.Endpoint())
		require.NoError(t, err)
		_, err = cli.Put(ctx, "k", "v")
		require.NoError(t, err)
		wctx, wcancel := context.WithCancel(ctx)
		if stream {
			_ = cli.Watch(wctx, "k")
		}
		cc := cli.ActiveConnection()
		waitConnReady(ctx, t, cc)
		p.BlackholeTx()
		p.BlackholeRx()
		start := time.Now()
		nctx, ncancel := context.WithTimeout(ctx, bound)
		changed := cc.WaitForStateChange(nctx, connectivity.Ready)
		ncancel()
		took := time.Since(start)
		require.True(t, changed, "stream %v: the dead connection was not noticed within %v", stream, bound)
		t.Logf("stream %v: the dead connection was noticed in %v (%v)", stream, took, cc.GetState())
		wcancel()
		require.NoError(t, cli.Close())
		require.NoError(t, p.Close())
	}
}

// waitConnReady waits (up to 10 s) for cc to be Ready: after a call that
// succeeded, a loaded machine can still show it Connecting for a moment
// (seen in a make test run beside a busy loop).
func waitConnReady(ctx context.Context, t *testing.T, cc *grpc.ClientConn) {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for st := cc.GetState(); st != connectivity.Ready; st = cc.GetState() {
		cc.Connect()
		if !cc.WaitForStateChange(rctx, st) {
			require.Equal(t, connectivity.Ready, cc.GetState(), "the connection did not get ready")
		}
	}
}

// Start whose context ends before its members are ready gives up: it
// stops the members (which never got ready) and returns the context's
// error, rather than hanging in etcd's Close.
func TestStartGivesUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	var c *Cluster
	err := within(t, 30*time.Second, "Start with an ending context", func() error {
		var err error
		c, err = Start(ctx, Config{Members: 3})
		return err
	})
	if err == nil { // the machine was fast enough: nothing to check
		require.NoError(t, c.Close())
		t.Skip("the members were ready within 20 ms")
	}
	require.ErrorIs(t, err, context.DeadlineExceeded)
}
