package etcdstore

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/etcdstore/embedded"
)

// shared is the one-member cluster most tests use, each under its own
// prefix; tests that stop members, compact or cut connections start their
// own.
var shared *embedded.Cluster

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	c, err := embedded.Start(ctx, embedded.Config{})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdstore tests: start etcd:", err)
		os.Exit(1)
	}
	shared = c
	code := m.Run()
	if err := c.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "etcdstore tests: close etcd:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// Fast settings for tests: short sessions and timeouts, frequent probes.
var testOptions = []Option{
	WithSessionTTL(2 * time.Second),
	WithRequestTimeout(5 * time.Second),
	WithProbe(200*time.Millisecond, 2*time.Second),
}

var prefixSeq atomic.Int64

// newPrefix returns a key prefix no other test uses.
func newPrefix(t *testing.T) string {
	return fmt.Sprintf("t%d/", prefixSeq.Add(1))
}

// handle is a Store with its own client (as a replica process has),
// closed with it.
type handle struct {
	*Store
	cli  *clientv3.Client
	once sync.Once
}

// Shutdown shuts the store down and closes its client.
func (h *handle) Shutdown() error {
	err := h.Store.Shutdown()
	h.once.Do(func() {
		if cerr := h.cli.Close(); cerr != nil && err == nil {
			err = cerr
		}
	})
	return err
}

// crash ends h as a killed process: no Unhold, no revoke, its client
// closed (its session lease is left to expire).
func (h *handle) crash() clientv3.LeaseID {
	lease := h.abandon()
	h.once.Do(func() { _ = h.cli.Close() })
	return lease
}

// opener opens handles of replicas on cluster c under one prefix.
type opener struct {
	t       *testing.T
	c       *embedded.Cluster
	opts    claims.Options
	options []Option

	mu      sync.Mutex
	handles map[string][]*handle
}

func newOpener(t *testing.T, c *embedded.Cluster, idle time.Duration, options ...Option) *opener {
	return &opener{
		t:       t,
		c:       c,
		opts:    claims.Options{IdleTTL: idle, Prefix: newPrefix(t)},
		options: append(append([]Option(nil), testOptions...), options...),
		handles: map[string][]*handle{},
	}
}

// open returns a new store of replica with its own client of endpoints
// (every member's when none), shut down at the end of the test.
func (o *opener) open(replica string, endpoints ...string) *handle {
	o.t.Helper()
	cli, err := o.c.NewClient(endpoints...)
	require.NoError(o.t, err)
	h := o.openOn(replica, cli)
	o.mu.Lock()
	o.handles[replica] = append(o.handles[replica], h)
	o.mu.Unlock()
	return h
}

// crash crashes every handle of replica and revokes their session leases,
// as their expiry would (without waiting the TTL out).
func (o *opener) crash(replica string) {
	o.mu.Lock()
	hs := o.handles[replica]
	o.handles[replica] = nil
	o.mu.Unlock()
	for _, h := range hs {
		lease := h.crash()
		if lease == clientv3.NoLease {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := o.c.Client().Revoke(ctx, lease)
		cancel()
		if err != nil {
			o.t.Errorf("revoke the crashed %s's lease: %v", replica, err)
		}
	}
}
