package claimslin

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/etcdstore"
	"github.com/placementlab/placement/impl/claims/etcdstore/embedded"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdRequestTimeout bounds each of etcdstore's requests in the runs: a
// call cut off by a fault fails (its outcome unknown) this soon.
const etcdRequestTimeout = 800 * time.Millisecond

// etcdEnv is real etcd: an embedded cluster, one client per replica
// through a TCP proxy of its own (to cut it off), and an etcdstore.Store
// per replica session.
type etcdEnv struct {
	cluster *embedded.Cluster
	proxies []*embedded.Proxy
	clients []*clientv3.Client
	prefix  string

	done     map[string]bool // the faults injected (by the injector's goroutine)
	injected []string
	left     atomic.Int32 // the plan's faults not injected yet (read by the replicas' goroutines)
}

// etcdStart bounds starting (and restarting a member of) a cluster.
const etcdStart = 30 * time.Second

func newEtcdEnv(plan Plan) (*etcdEnv, error) {
	members := 1
	if plan.Backend == BackendEtcd3 {
		members = 3
	}
	ctx, cancel := context.WithTimeout(context.Background(), etcdStart)
	defer cancel()
	cl, err := embedded.Start(ctx, embedded.Config{Members: members})
	if err != nil {
		return nil, fmt.Errorf("claimslin: starting etcd: %w", err)
	}
	e := &etcdEnv{cluster: cl, prefix: fmt.Sprintf("claimslin-%d/", plan.Seed), done: map[string]bool{}}
	for _, f := range plan.Faults {
		if once(f) {
			e.left.Add(1)
		}
	}
	handles := plan.Replicas
	if plan.Routing {
		handles++ // the injector's (it registers the workers)
	}
	for i := 0; i < handles; i++ {
		p, err := cl.Proxy(i % members)
		if err != nil {
			e.close()
			return nil, err
		}
		e.proxies = append(e.proxies, p)
		// The replica's own member through its proxy, and the others
		// directly (a client fails over when its member stops).
		eps := []string{p.Endpoint()}
		for m, ep := range cl.Endpoints() {
			if m != i%members {
				eps = append(eps, ep)
			}
		}
		c, err := cl.NewClient(eps...)
		if err != nil {
			e.close()
			return nil, err
		}
		e.clients = append(e.clients, c)
	}
	return e, nil
}

func (e *etcdEnv) open(ctx context.Context, replica string) (claims.Store, error) {
	i := index(replica, "r%d")
	if i < 0 || i >= len(e.clients) {
		return nil, fmt.Errorf("claimslin: no client for %q", replica)
	}
	// A restart while the store is unreachable retries until it answers.
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := etcdstore.New(ctx, e.clients[i], replica, claims.Options{IdleTTL: time.Hour, Prefix: e.prefix},
			etcdstore.WithRequestTimeout(etcdRequestTimeout))
		if err == nil || !errors.Is(err, claims.ErrUnavailable) || time.Now().After(deadline) || ctx.Err() != nil {
			return s, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *etcdEnv) callLimit() time.Duration { return EtcdCallLimit }

func (e *etcdEnv) faults() []string { return e.injected }

func (e *etcdEnv) owed() bool { return e.left.Load() > 0 }

// once reports whether f is an etcd fault inject injects exactly once per
// run.
func once(f string) bool { return f == FaultStopMember || f == FaultDisconnect || f == FaultCompact }

func (e *etcdEnv) close() {
	for _, c := range e.clients {
		_ = c.Close()
	}
	for _, p := range e.proxies {
		_ = p.Close()
	}
	_ = e.cluster.Close()
}

// inject injects each of the plan's etcd faults once, at a random point
// of the run: a member stopped and restarted (three members: the
// replicas fail over), a replica's client cut off through its proxy for
// a while (shorter than the session TTL: its session lives), a
// compaction of everything while the replicas' event streams watch.
func (e *etcdEnv) inject(ctx context.Context, _ *recorder, rng *rand.Rand, plan Plan, live func() bool) {
	var todo []string
	for _, f := range plan.Faults {
		if !e.done[f] && once(f) {
			todo = append(todo, f)
		}
	}
	if len(todo) == 0 || rng.IntN(3) != 0 || !live() {
		return
	}
	fault := todo[rng.IntN(len(todo))]
	e.done[fault] = true
	e.injected = append(e.injected, fault)
	defer e.left.Add(-1) // once it is over
	pause := func(d time.Duration) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	switch fault {
	case FaultStopMember:
		m := rng.IntN(e.cluster.Size())
		if err := e.cluster.StopMember(m); err != nil {
			return
		}
		pause(time.Duration(200+rng.IntN(500)) * time.Millisecond)
		rctx, cancel := context.WithTimeout(context.Background(), etcdStart)
		defer cancel()
		_ = e.cluster.RestartMember(rctx, m)
	case FaultDisconnect:
		// Traffic held both ways, as a network cut holds it (TCP keeps the
		// bytes): the client's calls hang until their deadlines, and its
		// connection carries on afterwards. (A blackhole, which drops
		// bytes mid-frame, corrupts the HTTP/2 stream: every later call
		// fails with a gRPC Internal error.)
		p := e.proxies[rng.IntN(min(plan.Replicas, len(e.proxies)))]
		p.PauseTx()
		p.PauseRx()
		pause(time.Duration(300+rng.IntN(900)) * time.Millisecond)
		p.UnpauseTx()
		p.UnpauseRx()
	case FaultCompact:
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := e.cluster.Client().Get(cctx, "claimslin-compact")
		if err != nil {
			return
		}
		_ = e.cluster.Compact(cctx, resp.Header.Revision)
	}
}
