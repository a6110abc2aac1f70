package etcdstore

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Claim leases are reused (a representation change, not a protocol step:
// every write stays fenced as before). A claim's lease times only its
// claim key's idle expiry, and only CreateOrGet attaches a lease to a
// key; once the claim is deleted (a Close that deletes it, a Resolve of
// a refused dispatch) its lease holds no key, and a later CreateOrGet of
// the same store can put its new claim on it instead of granting one:
// a Grant is a raft write (and, IdleTTL later, the leader's Revoke of
// the expired lease another), so a claim made and ended writes 3 times
// instead of 4 (5 counting the expiry). For that, the store grants claim
// leases IdleTTL plus a reuse window (IdleTTL/16 in whole seconds) and
// reuses a lease only while a claim written on it before the call's
// deadline still has IdleTTL to live: a lease's expiry is at least when
// its Grant was sent plus its TTL (a keepalive only moves it later). A
// claim thus expires no sooner than IdleTTL after its last write or
// Touch, and no later than IdleTTL plus the window (an etcd lease
// already counts whole seconds, and a new leader renews every lease).
// When the window would not exceed the request timeout (an IdleTTL
// under 16 request timeouts), leases are not reused and the TTL is
// IdleTTL's, as before. A lease another store granted is never reused
// (its Grant's time is unknown here); nor one whose claim's deletion this
// store did not see succeed. A Touch through an old revision of a
// deleted claim may renew the lease under a newer claim: it only delays
// that claim's expiry, as a Touch racing a deletion already renews an
// orphaned lease.

// leaseSlack is how much a reused lease's expiry may exceed a fresh
// one's, at most: the share of IdleTTL added to the claim leases' TTL.
const leaseSlack = 16

// Bounds of the lease pool's memory.
const (
	maxGranted   = 4096 // leases granted within the window, by their Grant's time
	maxFreeLease = 256  // leases of deleted claims, ready for reuse
)

// leasePool is the claim leases this store granted, for reuse.
type leasePool struct {
	window time.Duration // 0: no reuse
	ttl    time.Duration // the claim leases' TTL: seconds(IdleTTL) plus window
	idle   time.Duration

	mu      sync.Mutex
	granted map[clientv3.LeaseID]time.Time // lease → when its Grant was sent
	free    []clientv3.LeaseID             // leases whose claim was deleted (in granted)
}

// newLeasePool returns the pool of a store whose claims live idle for
// idle, and whose calls take at most timeout.
func newLeasePool(idle, timeout time.Duration) *leasePool {
	p := &leasePool{idle: idle, granted: map[clientv3.LeaseID]time.Time{}}
	w := (idle / leaseSlack).Truncate(time.Second)
	if w > timeout {
		p.window = w
	}
	p.ttl = time.Duration(seconds(idle))*time.Second + p.window
	return p
}

// ttlSeconds is the TTL the store grants claim leases.
func (p *leasePool) ttlSeconds() int64 { return int64(p.ttl / time.Second) }

// usable reports whether a lease granted at sent can carry a claim
// written by deadline for a whole IdleTTL.
func (p *leasePool) usable(sent, deadline time.Time) bool {
	if mutant("LeaseReusedTooLate") {
		return true
	}
	return !deadline.After(sent.Add(p.ttl - p.idle))
}

// take returns a free lease a claim written by deadline can use, if any.
func (p *leasePool) take(deadline time.Time) (clientv3.LeaseID, bool) {
	if p.window == 0 {
		return 0, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.free) > 0 {
		id := p.free[len(p.free)-1]
		p.free = p.free[:len(p.free)-1]
		if sent, ok := p.granted[id]; ok && p.usable(sent, deadline) {
			return id, true
		}
		delete(p.granted, id)
	}
	return 0, false
}

// noteGrant notes a lease this store granted, its Grant sent at sent.
func (p *leasePool) noteGrant(id clientv3.LeaseID, sent time.Time) {
	if p.window == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.granted) >= maxGranted {
		p.pruneLocked(time.Now())
		if len(p.granted) >= maxGranted {
			return
		}
	}
	p.granted[id] = sent
}

// pruneLocked forgets the leases no call from now on can reuse.
func (p *leasePool) pruneLocked(now time.Time) {
	for id, sent := range p.granted {
		if !p.usable(sent, now) {
			delete(p.granted, id)
		}
	}
	free := p.free[:0]
	for _, id := range p.free {
		if _, ok := p.granted[id]; ok {
			free = append(free, id)
		}
	}
	clear(p.free[len(free):])
	p.free = free
}

// release returns a lease that holds no key (its claim was deleted, or
// its write did not happen) to the pool, if this store granted it and it
// may still be reused; it reports whether it did.
func (p *leasePool) release(id clientv3.LeaseID) bool {
	if p.window == 0 || id == clientv3.NoLease {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	sent, ok := p.granted[id]
	if !ok {
		return false
	}
	if !p.usable(sent, time.Now()) || len(p.free) >= maxFreeLease {
		delete(p.granted, id)
		return false
	}
	p.free = append(p.free, id)
	return true
}

// forget drops a lease from the pool (it may hold a key, or be gone).
func (p *leasePool) forget(id clientv3.LeaseID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.granted, id)
}

// reset forgets every lease (after Shutdown: the free ones expire on
// their own, holding no key).
func (p *leasePool) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.granted)
	p.free = nil
}

// claimLease returns a lease for a claim CreateOrGet writes under ctx:
// a free one, or a new grant. reused says which.
func (s *Store) claimLease(ctx context.Context) (id clientv3.LeaseID, reused bool, err error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(s.set.requestTimeout)
	}
	if id, ok := s.leases.take(deadline); ok {
		return id, true, nil
	}
	sent := time.Now()
	g, err := s.cli.Grant(ctx, s.leases.ttlSeconds())
	if err != nil {
		return 0, false, err
	}
	s.leases.noteGrant(g.ID, sent)
	return g.ID, false, nil
}
