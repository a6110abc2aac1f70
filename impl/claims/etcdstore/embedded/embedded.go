// Package embedded runs a real etcd inside the test process, for the tests
// and examples of impl/claims/etcdstore: one member or a cluster of several
// (three, typically) on loopback ports, each with its own data directory,
// with fast elections and quiet logs. Members can be stopped and
// restarted on the same data directories and ports, one or several at
// once, also when the cluster lost its quorum or was stopped whole
// (RestartMembers: every wait is bounded, and a restart that cannot serve
// for want of a quorum says so, ErrNoQuorum, rather than waiting). A TCP
// proxy (go.etcd.io/etcd/pkg/v3/proxy) can be put between a client and a
// member to cut the client off; a NewClient client notices a dead
// connection within ClientReadIdleTimeout.
//
// It is test infrastructure: by default the members do not fsync
// (Config.Fsync), which is unsafe for data that must survive a machine
// crash but changes nothing for a process that restarts a member.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/pkg/v3/proxy"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultTickMs is the raft heartbeat interval when Config leaves TickMs
// zero.
const DefaultTickMs = 10

// DefaultElectionMs is the raft election timeout when Config leaves
// ElectionMs zero. With DefaultTickMs it makes etcd's minimum lease TTL
// one second (1.5 election timeouts, rounded up to seconds).
const DefaultElectionMs = 100

// MaxMembers is the largest cluster Start runs.
const MaxMembers = 7

// ServerPingInterval is how often a member pings a client connection it
// has read nothing on for that long (gRPC's server keepalive, whose
// minimum it is), so that a live connection never stays silent longer.
const ServerPingInterval = time.Second

// ClientReadIdleTimeout is how long a connection of a NewClient client
// may go without a byte from its member before the client drops it (and
// reconnects): a member pings every ServerPingInterval, so a silent
// connection is a dead one (a cut, a blackhole, a member frozen). gRPC's
// own client keepalive cannot notice sooner than in 10 s plus its
// timeout, its minimum interval, and not at all on a connection with no
// stream open.
const ClientReadIdleTimeout = 3 * time.Second

var (
	// ErrInvalidConfig: a Config Start cannot run.
	ErrInvalidConfig = errors.New("embedded: invalid config")
	// ErrNoMember: a member index out of range.
	ErrNoMember = errors.New("embedded: no such member")
	// ErrMemberRunning: RestartMember of a member that runs.
	ErrMemberRunning = errors.New("embedded: member is running")
	// ErrMemberStopped: the member is stopped.
	ErrMemberStopped = errors.New("embedded: member is stopped")
	// ErrClosed: the cluster was closed.
	ErrClosed = errors.New("embedded: cluster closed")
	// ErrNoQuorum: members were restarted, but the members running are
	// not a quorum, so none of them can serve yet (they are left running:
	// they serve once enough members run).
	ErrNoQuorum = errors.New("embedded: members running are not a quorum")
	// ErrNotServing: restarted members did not serve clients before the
	// context ended (they were stopped again).
	ErrNotServing = errors.New("embedded: members do not serve")
)

// DefaultRestartTimeout bounds RestartMember and RestartMembers when their
// context has no earlier deadline.
const DefaultRestartTimeout = time.Minute

// Config is what Start runs.
type Config struct {
	// Members is the cluster's size; zero means 1.
	Members int
	// Dir is the directory the members' data directories go under; empty
	// means a new temporary directory, removed by Close (a Dir given is
	// left in place).
	Dir string
	// TickMs and ElectionMs are raft's heartbeat interval and election
	// timeout; zero means DefaultTickMs and DefaultElectionMs.
	TickMs, ElectionMs uint
	// LogLevel is the members' log level ("debug", "info", "warn",
	// "error"), written to stderr; empty discards their logs.
	LogLevel string
	// Fsync makes the members fsync their WAL and backend (etcd's
	// default); false (the default here) runs them with unsafe-no-fsync,
	// which is faster.
	Fsync bool
}

// Cluster is a running in-process etcd cluster.
type Cluster struct {
	cfg    Config
	dir    string
	ownDir bool
	token  string
	lg     *zap.Logger

	opMu sync.Mutex // serializes StopMember, RestartMember and Close

	mu      sync.Mutex // guards what follows and each member's etcd and streams
	members []*member
	client  *clientv3.Client
	closed  bool
}

type member struct {
	name      string
	dir       string
	peerURL   url.URL
	clientURL url.URL
	etcd      *embed.Etcd
	streams   *streamCanceler
}

// Start runs a cluster of cfg.Members members on loopback and returns once
// every member serves clients (or ctx ends).
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidConfig)
	}
	if cfg.Members == 0 {
		cfg.Members = 1
	}
	if cfg.Members < 1 || cfg.Members > MaxMembers {
		return nil, fmt.Errorf("%w: %d members (1 to %d)", ErrInvalidConfig, cfg.Members, MaxMembers)
	}
	if cfg.TickMs == 0 {
		cfg.TickMs = DefaultTickMs
	}
	if cfg.ElectionMs == 0 {
		cfg.ElectionMs = DefaultElectionMs
	}
	if cfg.ElectionMs < 5*cfg.TickMs {
		return nil, fmt.Errorf("%w: election timeout %d ms under 5 heartbeats of %d ms", ErrInvalidConfig, cfg.ElectionMs, cfg.TickMs)
	}
	lg := zap.NewNop()
	if cfg.LogLevel != "" {
		lvl, err := zapcore.ParseLevel(cfg.LogLevel)
		if err != nil {
			return nil, fmt.Errorf("%w: log level: %v", ErrInvalidConfig, err)
		}
		zc := zap.NewDevelopmentConfig()
		zc.Level = zap.NewAtomicLevelAt(lvl)
		zc.OutputPaths = []string{"stderr"}
		zc.ErrorOutputPaths = []string{"stderr"}
		if lg, err = zc.Build(); err != nil {
			return nil, fmt.Errorf("%w: logger: %v", ErrInvalidConfig, err)
		}
	}
	c := &Cluster{cfg: cfg, lg: lg, dir: cfg.Dir}
	if c.dir == "" {
		d, err := os.MkdirTemp("", "embedded-etcd-")
		if err != nil {
			return nil, fmt.Errorf("embedded: data directory: %w", err)
		}
		c.dir, c.ownDir = d, true
	} else if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded: data directory: %w", err)
	}
	c.token = fmt.Sprintf("embedded-%d", time.Now().UnixNano())

	// Ports are picked free and released before etcd binds them; another
	// process may take one in between, so a failed bind starts over.
	var err error
	for try := 0; try < 3; try++ {
		if err = c.startAll(ctx, try); err == nil {
			break
		}
		if ctx.Err() != nil || !isAddrInUse(err) {
			break
		}
	}
	if err != nil {
		c.removeDir()
		return nil, err
	}
	cli, err := c.NewClient()
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	c.client = cli
	// Ready members may still be starting their client servers: wait
	// until each answers.
	for i := range c.members {
		if err := c.waitServing(ctx, i); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	return c, nil
}

// waitServing waits until member i answers a Status request.
func (c *Cluster) waitServing(ctx context.Context, i int) error {
	c.mu.Lock()
	ep := c.members[i].clientURL.String()
	c.mu.Unlock()
	for {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := c.client.Status(sctx, ep)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("embedded: member %d does not answer: %w (%v)", i, ctx.Err(), err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// startAll starts every member on fresh ports (data under try's
// subdirectory) and waits until each is ready; on failure it stops those
// it started.
func (c *Cluster) startAll(ctx context.Context, try int) error {
	ms := make([]*member, c.cfg.Members)
	ports, err := freePorts(2 * len(ms))
	if err != nil {
		return err
	}
	var initial []string
	for i := range ms {
		m := &member{
			name:      fmt.Sprintf("m%d", i),
			dir:       filepath.Join(c.dir, fmt.Sprintf("try%d-m%d", try, i)),
			peerURL:   url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[2*i])},
			clientURL: url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])},
		}
		ms[i] = m
		initial = append(initial, m.name+"="+m.peerURL.String())
	}
	cluster := strings.Join(initial, ",")
	for _, m := range ms {
		if m.etcd, m.streams, err = c.startMember(m, cluster); err != nil {
			break
		}
	}
	if err == nil {
		for _, m := range ms {
			if err = waitReady(ctx, m.etcd); err != nil {
				break
			}
		}
	}
	if err != nil {
		for _, m := range ms {
			if m.etcd != nil {
				stopEtcd(m.etcd, m.streams) // not ready: raft first
			}
		}
		return err
	}
	c.mu.Lock()
	c.members = ms
	c.mu.Unlock()
	return nil
}

// startMember starts m (not waiting until it is ready).
func (c *Cluster) startMember(m *member, initialCluster string) (*embed.Etcd, *streamCanceler, error) {
	cfg := embed.NewConfig()
	cfg.Name = m.name
	cfg.Dir = m.dir
	cfg.ListenPeerUrls = []url.URL{m.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{m.peerURL}
	cfg.ListenClientUrls = []url.URL{m.clientURL}
	cfg.AdvertiseClientUrls = []url.URL{m.clientURL}
	cfg.InitialCluster = initialCluster
	cfg.InitialClusterToken = c.token
	cfg.ClusterState = embed.ClusterStateFlagNew
	cfg.TickMs = c.cfg.TickMs
	cfg.ElectionMs = c.cfg.ElectionMs
	cfg.UnsafeNoFsync = !c.cfg.Fsync
	// Clients ping every 10 s (NewClient; gRPC's minimum); etcd's default
	// minimum of 5 s would do, a lower one costs nothing.
	cfg.GRPCKeepAliveMinTime = 500 * time.Millisecond
	// The member pings its idle clients, so that a NewClient client
	// notices a dead connection by its silence (ClientReadIdleTimeout).
	// (A client that does not answer a ping is dropped after etcd's
	// default 20 s: through a Proxy, that drop would reach the client.)
	cfg.GRPCKeepAliveInterval = ServerPingInterval
	cfg.EnableGRPCGateway = false // no HTTP JSON gateway (and its client of the member)
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(c.lg.Named(m.name))
	streams := newStreamCanceler()
	cfg.GRPCAdditionalServerOptions = []grpc.ServerOption{grpc.ChainStreamInterceptor(streams.intercept)}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("embedded: start member %s: %w", m.name, err)
	}
	return e, streams, nil
}

func waitReady(ctx context.Context, e *embed.Etcd) error {
	select {
	case <-e.Server.ReadyNotify():
		return nil
	case err := <-e.Err():
		return fmt.Errorf("embedded: member failed: %w", err)
	case <-ctx.Done():
		return fmt.Errorf("embedded: waiting for member: %w", ctx.Err())
	}
}

// Size returns the number of members (running or stopped).
func (c *Cluster) Size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.members)
}

// Endpoints returns every member's client URL (http://127.0.0.1:port),
// running or not.
func (c *Cluster) Endpoints() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = m.clientURL.String()
	}
	return out
}

// Endpoint returns member i's client URL.
func (c *Cluster) Endpoint(i int) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, err := c.memberLocked(i)
	if err != nil {
		return "", err
	}
	return m.clientURL.String(), nil
}

// Client returns a client of every member, made by Start and closed by
// Close (do not close it yourself).
func (c *Cluster) Client() *clientv3.Client { return c.client }

// NewClient returns a new client of the given endpoints (every member's
// when none, or a Proxy's): quiet logs, a 2 s dial timeout, reconnects
// backing off at most 1 s, and a dead connection noticed (dropped, and
// the client reconnects) once it has been silent for
// ClientReadIdleTimeout (3 s; the members ping every second), whether or
// not a call is in flight on it. The caller closes it.
func (c *Cluster) NewClient(endpoints ...string) (*clientv3.Client, error) {
	if len(endpoints) == 0 {
		endpoints = c.Endpoints()
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 2 * time.Second,
		// gRPC raises a client keepalive interval to 10 s; the read idle
		// timeout notices a dead connection sooner.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: time.Second,
		Logger:               zap.NewNop(),
		DialOptions: []grpc.DialOption{
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
				MinConnectTimeout: time.Second,
			}),
			grpc.WithContextDialer(dialIdle),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("embedded: client: %w", err)
	}
	return cli, nil
}

// dialIdle dials addr (host:port) over TCP, as etcd's client would, and
// bounds each read of the connection by ClientReadIdleTimeout.
func dialIdle(ctx context.Context, addr string) (net.Conn, error) {
	if mutant("NoReadIdleTimeout") {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &idleConn{Conn: conn, idle: ClientReadIdleTimeout}, nil
}

// idleConn is a connection whose every Read fails once nothing has come
// for idle (or at a read deadline set on it, if earlier): gRPC then drops
// the connection and reconnects.
type idleConn struct {
	net.Conn
	idle time.Duration

	mu       sync.Mutex
	deadline time.Time // set by SetDeadline or SetReadDeadline
}

func (c *idleConn) Read(b []byte) (int, error) {
	d := time.Now().Add(c.idle)
	c.mu.Lock()
	if !c.deadline.IsZero() && c.deadline.Before(d) {
		d = c.deadline
	}
	c.mu.Unlock()
	if err := c.Conn.SetReadDeadline(d); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *idleConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

func (c *idleConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *Cluster) memberLocked(i int) (*member, error) {
	if c.closed {
		return nil, ErrClosed
	}
	if i < 0 || i >= len(c.members) {
		return nil, fmt.Errorf("%w: %d of %d", ErrNoMember, i, len(c.members))
	}
	return c.members[i], nil
}

// Running reports whether member i runs.
func (c *Cluster) Running(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, err := c.memberLocked(i)
	return err == nil && m.etcd != nil
}

// StopMember stops member i (its data directory stays). Its clients'
// streams (watches, lease keepalives) are cut at once rather than drained.
// Stopping a stopped member does nothing. A member that does not serve yet
// (restarted without a quorum) is stopped too.
func (c *Cluster) StopMember(i int) error {
	c.opMu.Lock()
	defer c.opMu.Unlock()
	c.mu.Lock()
	m, err := c.memberLocked(i)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	e, streams := m.etcd, m.streams
	m.etcd = nil
	c.mu.Unlock()
	if e != nil {
		stopEtcd(e, streams)
	}
	return nil
}

// stopEtcd stops a member: gracefully when it serves; when it does not
// (it waits for a quorum), raft first, since etcd's Close waits for the
// client servers, which start only once the member is ready.
func stopEtcd(e *embed.Etcd, streams *streamCanceler) {
	streams.cancelAll()
	select {
	case <-e.Server.ReadyNotify():
	default:
		e.Server.HardStop()
	}
	e.Close()
}

// RestartMember starts stopped member i again on its data directory and
// ports: RestartMembers(ctx, i).
func (c *Cluster) RestartMember(ctx context.Context, i int) error {
	return c.RestartMembers(ctx, i)
}

// RestartMembers starts the stopped members is again, each on its data
// directory and ports, all at once (a cluster that lost its quorum, or
// was stopped whole, needs several members up before any can serve). When
// the members then running are a quorum, it returns once every running
// member serves clients; when the context ends first (bounded by
// DefaultRestartTimeout) it stops the members it started again and
// returns an error satisfying errors.Is(err, ErrNotServing) and the
// context's error. When they are not a quorum, it returns ErrNoQuorum at
// once and leaves the members it started running: they serve once enough
// members run (restart more). Nothing is started when an index is out of
// range or names a running member (ErrNoMember, ErrMemberRunning).
func (c *Cluster) RestartMembers(ctx context.Context, is ...int) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidConfig)
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultRestartTimeout)
	defer cancel()
	c.opMu.Lock()
	defer c.opMu.Unlock()
	c.mu.Lock()
	var ms []*member
	var err error
	seen := map[int]bool{}
	for _, i := range is {
		var m *member
		if m, err = c.memberLocked(i); err != nil {
			break
		}
		if m.etcd != nil {
			err = fmt.Errorf("%w: %s", ErrMemberRunning, m.name)
			break
		}
		if !seen[i] {
			seen[i] = true
			ms = append(ms, m)
		}
	}
	var initial []string
	for _, o := range c.members {
		initial = append(initial, o.name+"="+o.peerURL.String())
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	type started struct {
		m       *member
		e       *embed.Etcd
		streams *streamCanceler
	}
	var run []started
	stopAll := func() {
		for _, r := range run {
			stopEtcd(r.e, r.streams)
		}
	}
	for _, m := range ms {
		e, streams, err := c.startAgain(ctx, m, strings.Join(initial, ","))
		if err != nil {
			stopAll()
			return err
		}
		run = append(run, started{m, e, streams})
	}
	c.mu.Lock()
	for _, r := range run {
		r.m.etcd, r.m.streams = r.e, r.streams
	}
	running := 0
	var wait []*embed.Etcd
	var idx []int
	for i, m := range c.members {
		if m.etcd != nil {
			running++
			wait = append(wait, m.etcd)
			idx = append(idx, i)
		}
	}
	c.mu.Unlock()
	if running < len(c.members)/2+1 {
		return fmt.Errorf("%w: %d of %d run", ErrNoQuorum, running, len(c.members))
	}
	for k, e := range wait {
		err := waitReady(ctx, e)
		if err == nil {
			err = c.waitServing(ctx, idx[k])
		}
		if err != nil {
			c.mu.Lock()
			for _, r := range run {
				r.m.etcd = nil
			}
			c.mu.Unlock()
			stopAll()
			return fmt.Errorf("%w: %w", ErrNotServing, err)
		}
	}
	return nil
}

// startAgain starts stopped member m (not waiting until it is ready). The
// member's ports were just released; a restart right after a stop may
// find one still held for a moment.
func (c *Cluster) startAgain(ctx context.Context, m *member, initial string) (*embed.Etcd, *streamCanceler, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		e, streams, err := c.startMember(m, initial)
		if err == nil || !isAddrInUse(err) || time.Now().After(deadline) {
			return e, streams, err
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("embedded: restart member %s: %w", m.name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Compact compacts the cluster's key-value history up to rev (through
// Client) and waits until the compaction is applied.
func (c *Cluster) Compact(ctx context.Context, rev int64) error {
	if _, err := c.client.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return fmt.Errorf("embedded: compact %d: %w", rev, err)
	}
	return nil
}

// Proxy is a TCP proxy in front of one member's client port, to cut a
// client off (BlackholeTx and BlackholeRx drop every byte both ways;
// PauseAccept refuses new connections). Its methods are those of etcd's
// proxy.Server; Endpoint is what a client dials. Close it after closing
// the clients that use it: Close waits for their connections to end.
type Proxy struct {
	proxy.Server
	endpoint string
}

// Endpoint returns the proxy's client URL (http://127.0.0.1:port).
func (p *Proxy) Endpoint() string { return p.endpoint }

// Proxy starts a TCP proxy to member i's client port on a free port. The
// proxy listens on every interface (etcd's proxy binds ":port"). The
// caller closes it.
func (c *Cluster) Proxy(i int) (*Proxy, error) {
	c.mu.Lock()
	m, err := c.memberLocked(i)
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	host := fmt.Sprintf("127.0.0.1:%d", ports[0])
	s := proxy.NewServer(proxy.ServerConfig{
		Logger: c.lg.Named("proxy"),
		From:   url.URL{Scheme: "tcp", Host: host},
		To:     url.URL{Scheme: "tcp", Host: m.clientURL.Host},
	})
	select {
	case <-s.Ready():
	case err := <-s.Error():
		_ = s.Close()
		return nil, fmt.Errorf("embedded: proxy: %w", err)
	case <-time.After(5 * time.Second):
		_ = s.Close()
		return nil, errors.New("embedded: proxy did not start")
	}
	return &Proxy{Server: s, endpoint: "http://" + host}, nil
}

// Close closes Client, stops every member and removes the data
// directory Start made. It is safe to call more than once.
func (c *Cluster) Close() error {
	c.opMu.Lock()
	defer c.opMu.Unlock()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	type running struct {
		e       *embed.Etcd
		streams *streamCanceler
	}
	var rs []running
	for _, m := range c.members {
		if m.etcd != nil {
			rs = append(rs, running{m.etcd, m.streams})
			m.etcd = nil
		}
	}
	cli := c.client
	c.mu.Unlock()
	var errs []error
	if cli != nil {
		if err := cli.Close(); err != nil {
			errs = append(errs, fmt.Errorf("embedded: close client: %w", err))
		}
	}
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.streams.cancelAll()
			// Stop raft first: a leader closing gracefully tries to hand
			// its leadership to a follower, which (closing too) never takes
			// it, and waits out its request timeout (over 5 s).
			r.e.Server.HardStop()
			r.e.Close()
		}()
	}
	wg.Wait()
	_ = c.lg.Sync()
	c.removeDir()
	return errors.Join(errs...)
}

func (c *Cluster) removeDir() {
	if c.ownDir {
		_ = os.RemoveAll(c.dir)
	}
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	out := make([]int, 0, n)
	for len(out) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("embedded: free port: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

func isAddrInUse(err error) bool {
	return err != nil && strings.Contains(err.Error(), "address already in use")
}

// streamCanceler cancels a member's open gRPC streams when it stops, so
// that the server's graceful stop does not wait out its request timeout
// (over 5 s) for watches and lease keepalives that never end by
// themselves.
type streamCanceler struct {
	mu      sync.Mutex
	next    uint64
	cancels map[uint64]context.CancelFunc
	stopped bool
}

func newStreamCanceler() *streamCanceler {
	return &streamCanceler{cancels: map[uint64]context.CancelFunc{}}
}

func (s *streamCanceler) intercept(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return errStopping
	}
	id := s.next
	s.next++
	s.cancels[id] = cancel
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.cancels, id)
		s.mu.Unlock()
	}()
	err := handler(srv, &ctxStream{ServerStream: ss, ctx: ctx})
	if ctx.Err() != nil && ss.Context().Err() == nil {
		// Cut by cancelAll: what a client of a stopping server sees.
		return errStopping
	}
	return err
}

var errStopping = status.Error(codes.Unavailable, "embedded: member stopping")

func (s *streamCanceler) cancelAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	for _, cancel := range s.cancels {
		cancel()
	}
}

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context {
	return reasonCtx{Context: s.ctx, parent: s.ServerStream.Context()}
}

// reasonCtx is a stream's context cancelled by cancelAll or by its parent,
// whose Err is the parent's when the parent ended: etcd cancels a stream's
// context with a reason (no leader) that its handlers report.
type reasonCtx struct {
	context.Context
	parent context.Context
}

func (c reasonCtx) Err() error {
	if err := c.parent.Err(); err != nil {
		return err
	}
	return c.Context.Err()
}
