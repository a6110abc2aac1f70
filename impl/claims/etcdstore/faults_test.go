package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/placementlab/placement/impl/claims"
)

// hookKV is a client's KV that runs a hook (once) right after a Get of
// one key returns: another handle acts between this Get and the client's
// next request.
type hookKV struct {
	clientv3.KV
	key  string
	hook atomic.Pointer[func()]
}

func (k *hookKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	resp, err := k.KV.Get(ctx, key, opts...)
	if key == k.key {
		if h := k.hook.Swap(nil); h != nil {
			(*h)()
		}
	}
	return resp, err
}

// after arms f to run after the next Get of k.key.
func (k *hookKV) after(f func()) { k.hook.Store(&f) }

// openWrapped opens replica's store on a client of its own whose KV is
// wrapped by wrap.
func (o *opener) openWrapped(replica string, wrap func(*clientv3.Client)) *handle {
	o.t.Helper()
	cli, err := o.c.NewClient()
	require.NoError(o.t, err)
	wrap(cli)
	return o.openOn(replica, cli)
}

// Resolve judges one moment. Between its read of the quarantined claim
// and the rest of its judgement, another replica restarts the worker (a
// new generation), replaces the stale claim by a new one and quarantines
// that with another attempt. The verdict must describe one moment: the
// claim current when the registration was seen moved is the new
// quarantine (a plain fence, not "stale" with the claim that had been
// replaced). The variant ResolveTwoReads (the registration read in a
// second call) answers "stale" with the first read's claim.
func TestResolveJudgesOneMoment(t *testing.T) {
	ctx := testContext(t, 30*time.Second)
	o := newOpener(t, shared, time.Minute)
	other := o.open("other")
	_, err := other.Register(ctx, "w", "boot-1")
	require.NoError(t, err)
	kv := &hookKV{key: o.opts.Prefix + "claims/k"}
	a := o.openWrapped("a", func(cli *clientv3.Client) { kv.KV = cli.KV; cli.KV = kv })

	cl, _, err := a.CreateOrGet(ctx, "k", to("w"))
	require.NoError(t, err)
	q, err := a.Quarantine(ctx, "k", cl.Rev, 1, cl.Gen)
	require.NoError(t, err)

	var q2 claims.Claim
	kv.after(func() {
		m, err := other.Register(ctx, "w", "boot-2")
		require.NoError(t, err)
		require.Greater(t, m.Gen, q.Gen)
		nc, created, err := other.CreateOrGet(ctx, "k", to("w"))
		require.NoError(t, err)
		require.True(t, created, "the stale claim is replaced")
		q2, err = other.Quarantine(ctx, "k", nc.Rev, 2, nc.Gen)
		require.NoError(t, err)
	})
	_, ok, err := a.Resolve(ctx, "k", 1, q.Gen, true)
	require.False(t, ok)
	var fe *claims.FencedError
	require.ErrorAs(t, err, &fe)
	require.NotZero(t, q2.Rev, "the hook ran")
	require.Equal(t, claims.FencedError{Key: "k", Attempt: 1, Gen: q.Gen, Current: q2, Found: true}, *fe,
		"the verdict names the claim current when the registration was judged")
	got, _, err := other.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, q2, got, "nothing was written")

	// The registration alone moves in the gap: the claim judged is
	// still current, so it is stale.
	m3, err := other.Register(ctx, "w", "boot-3")
	require.NoError(t, err)
	nc, created, err := a.CreateOrGet(ctx, "k", to("w"))
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, m3.Gen, nc.Gen)
	q3, err := a.Quarantine(ctx, "k", nc.Rev, 3, nc.Gen)
	require.NoError(t, err)
	kv.after(func() {
		_, err := other.Register(ctx, "w", "boot-4")
		require.NoError(t, err)
	})
	_, ok, err = a.Resolve(ctx, "k", 3, q3.Gen, false)
	require.False(t, ok)
	require.ErrorAs(t, err, &fe)
	require.Equal(t, claims.FencedError{Key: "k", Attempt: 3, Gen: q3.Gen, Current: q3, Found: true, Stale: true}, *fe)
	got, _, err = a.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, q3, got, "nothing was written")
}

// cutter is a client's dialer and stream interceptor: it records the
// client's TCP connections and, armed, closes them under the client right
// after the next stream of one method opens (before the client sends on
// it), then waits until the client has closed that stream. A connection dropped at
// that point makes etcd's client return a bare io.EOF.
type cutter struct {
	mu     sync.Mutex
	conns  []net.Conn
	method atomic.Pointer[string]
	cuts   atomic.Int32
}

func (c *cutter) dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		c.mu.Lock()
		c.conns = append(c.conns, conn)
		c.mu.Unlock()
	}
	return conn, err
}

// armOn cuts the connections after the next stream of method opens.
func (c *cutter) armOn(method string) { c.method.Store(&method) }

func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}

func (c *cutter) intercept(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if m := c.method.Load(); err == nil && m != nil && *m == method && c.method.CompareAndSwap(m, nil) {
		c.cut()
		c.cuts.Add(1)
		// The server sends no header before its first answer, and the
		// client sent nothing yet: Header returns once the transport
		// has closed the stream (or the call's deadline passes).
		_, _ = s.Header()
	}
	return s, err
}

// openOn opens replica's store on cli (closed if the store cannot be
// opened), shut down at the end of the test.
func (o *opener) openOn(replica string, cli *clientv3.Client) *handle {
	o.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := New(ctx, cli, replica, o.opts, o.options...)
	if err != nil {
		_ = cli.Close()
	}
	require.NoError(o.t, err)
	h := &handle{Store: s, cli: cli}
	o.t.Cleanup(func() { _ = h.Shutdown() })
	return h
}

// openCuttable opens replica's store on a client whose connections c
// cuts.
func (o *opener) openCuttable(replica string, c *cutter) *handle {
	o.t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   o.c.Endpoints(),
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{
			grpc.WithContextDialer(c.dial),
			grpc.WithChainStreamInterceptor(c.intercept),
		},
	})
	require.NoError(o.t, err)
	return o.openOn(replica, cli)
}

// A connection dropped during Touch's keepalive: etcd's client returns a
// bare io.EOF, which is the store being unreachable: Touch returns a
// *claims.UnavailableError, and the store is marked down (its event
// stream sends a Reset).
func TestTouchConnectionCut(t *testing.T) {
	ctx := testContext(t, 30*time.Second)
	o := newOpener(t, shared, time.Minute)
	var c cutter
	s := o.openCuttable("r", &c)
	_, err := s.Register(ctx, "w", "1")
	require.NoError(t, err)
	cl, _, err := s.CreateOrGet(ctx, "k", to("w"))
	require.NoError(t, err)
	st := subscribe(t, s)
	st.reset(5 * time.Second)
	lost := s.lostSignal()

	c.armOn("/etcdserverpb.Lease/LeaseKeepAlive")
	err = s.Touch(ctx, "k", cl.Rev)
	require.EqualValues(t, 1, c.cuts.Load(), "the connection was cut during the keepalive")
	var ue *claims.UnavailableError
	require.ErrorAs(t, err, &ue, "%v", err)
	require.Equal(t, "touch", ue.Op)
	require.ErrorIs(t, err, io.EOF, "the cause is kept")
	select {
	case <-lost:
	default:
		t.Fatal("the store was not marked down")
	}
	ev := st.reset(10 * time.Second)
	t.Logf("the stream's Reset: %q", ev.Why)
	// The client reconnects; the claim is there and Touch works.
	require.NoError(t, eventually(10*time.Second, func() error { return s.Touch(ctx, "k", cl.Rev) }))
}

// A connection dropped during the keepalive that restarts a rewritten
// claim's idle expiry (here Quarantine's): the write stands and is
// returned, and the store is marked down (its event streams owe a Reset),
// as when any call finds it unreachable.
func TestRefreshConnectionCut(t *testing.T) {
	ctx := testContext(t, 30*time.Second)
	o := newOpener(t, shared, time.Minute)
	var c cutter
	s := o.openCuttable("r", &c)
	_, err := s.Register(ctx, "w", "1")
	require.NoError(t, err)
	// The cut is armed on the next LeaseKeepAlive stream: normally the
	// Quarantine's refresh (KeepAliveOnce, after its write); on a loaded
	// machine the client may open one of its own first (its session's
	// keepalive restarting), and the cut then lands before the write. Such
	// a try is told apart by the store (the claim is still Bound, not
	// quarantined) and tried again on a fresh key; a write that landed and
	// was reported failed fails the test.
	for try := 0; ; try++ {
		key := fmt.Sprintf("k%d", try)
		var cl claims.Claim
		require.NoError(t, eventually(10*time.Second, func() (err error) { cl, _, err = s.CreateOrGet(ctx, key, to("w")); return err }))
		lost := s.lostSignal()
		cuts := c.cuts.Load()
		c.armOn("/etcdserverpb.Lease/LeaseKeepAlive")
		q, err := s.Quarantine(ctx, key, cl.Rev, 1, cl.Gen)
		if err != nil && errors.Is(err, claims.ErrUnavailable) && c.cuts.Load() == cuts+1 && try < 4 {
			var got claims.Claim
			require.NoError(t, eventually(10*time.Second, func() error { got, _, err = s.Get(ctx, key); return err }))
			require.Equal(t, claims.Bound, got.State, "the quarantine was written, yet reported failed: %v", err)
			t.Logf("try %d: the cut came before the write (%v); again", try, err)
			continue
		}
		require.NoError(t, err, "the write stands")
		require.EqualValues(t, cuts+1, c.cuts.Load(), "the connection was cut during the keepalive")
		select {
		case <-lost:
		default:
			t.Fatal("the store was not marked down")
		}
		require.NoError(t, eventually(10*time.Second, func() error {
			got, _, err := s.Get(ctx, key)
			if err == nil && got != q {
				t.Fatalf("read %+v, want %+v", got, q)
			}
			return err
		}))
		return
	}
}

// Which errors say the store is unreachable: every transport failure
// (gRPC's codes for them, the bare errors a dropped connection surfaces
// as, network errors) and none of etcd's refusals.
func TestUnreachableClassifies(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"bare EOF":               {io.EOF, true},
		"wrapped EOF":            {fmt.Errorf("keepalive: %w", io.EOF), true},
		"unexpected EOF":         {io.ErrUnexpectedEOF, true},
		"connection reset":       {&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true},
		"connection refused":     {syscall.ECONNREFUSED, true},
		"closed connection":      {net.ErrClosed, true},
		"no endpoints":           {clientv3.ErrNoAvailableEndpoints, true},
		"unavailable":            {status.Error(codes.Unavailable, "transport is closing"), true},
		"broken stream":          {status.Error(codes.Internal, "stream terminated by RST_STREAM with error code: PROTOCOL_ERROR"), true},
		"no leader":              {rpctypes.ErrNoLeader, true},
		"grpc no leader":         {rpctypes.ErrGRPCNoLeader, true},
		"deadline":               {context.DeadlineExceeded, true},
		"too many requests":      {rpctypes.ErrTooManyRequests, true},
		"lease not found":        {rpctypes.ErrLeaseNotFound, false},
		"grpc lease not found":   {rpctypes.ErrGRPCLeaseNotFound, false},
		"compacted":              {rpctypes.ErrCompacted, false},
		"request too large":      {rpctypes.ErrGRPCRequestTooLarge, false},
		"permission denied":      {rpctypes.ErrGRPCPermissionDenied, false},
		"unknown server error":   {status.Error(codes.Unknown, "etcdserver: something"), false},
		"corrupt value":          {ErrCorrupt, false},
		"some other plain error": {errors.New("boom"), false},
	} {
		require.Equal(t, tc.want, unreachable(tc.err), "%s: %v", name, tc.err)
	}
}
