package replica

import (
	"time"

	"github.com/placementlab/placement/impl/claims"
)

// watch applies the store's events until Close. A stream that ends while
// the coordinator lives is a Reset (events may have been lost), and the
// stream is opened again, backing off up to a second.
func (c *Coordinator) watch(ch <-chan claims.Event) {
	defer c.wg.Done()
	backoff := 10 * time.Millisecond
	for {
		for ev := range ch {
			c.apply(ev)
			backoff = 10 * time.Millisecond
		}
		if c.ctx.Err() != nil {
			return
		}
		c.apply(claims.Event{Kind: claims.Reset, Why: "event stream ended"})
		for {
			t := time.NewTimer(backoff)
			select {
			case <-c.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			var err error
			ch, err = c.store.Events(c.ctx)
			c.note(err)
			if err == nil {
				break
			}
			backoff = min(2*backoff, time.Second)
		}
	}
}

// apply applies one event.
func (c *Coordinator) apply(ev claims.Event) {
	switch ev.Kind {
	case claims.Delete:
		c.onDelete(ev.Key, ev.Rev)
	case claims.Reset:
		c.onReset()
	case claims.MembersChanged:
		_ = c.refreshMembers(c.ctx)
	}
}

// onDelete: revision rev of key ended; the record caching it (or an older
// one) is evicted, unless it is a quarantine this replica's own write in
// flight rewrites (the write applies the event when it returns).
func (c *Coordinator) onDelete(key string, rev int64) {
	v, ok := c.slots.Load(key)
	if !ok {
		return
	}
	s := v.(*slot)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxDeleted = max(s.maxDeleted, rev)
	rec := s.cur.Load()
	if h := s.holder; h != nil && h != rec && h.leases.Load() == 0 {
		c.poke() // a hold left behind (its record ended otherwise): give it up
	}
	if rec == nil || rec.unclaimed || rec.rev == 0 || rec.rev > rev || s.waitsLocked(rec) {
		return
	}
	if rec.state == recQuarantined && rec.own && !rec.written {
		// The store never recorded this quarantine: keep refusing. Its
		// write may wait for another attempt's quarantine of the claim
		// (errQuarantineWaits): retry it now that the claim moved.
		c.poke()
		return
	}
	c.evictLocked(s, rec)
	c.st.deleteEvictions.Add(1)
}

// onReset: events may have been lost. Every cached claim is evicted (the
// next turn reads it again; requests in flight finish), the members are
// read again, and the sessions placed unclaimed are reconciled. Kept: the
// unclaimed sessions (the reconcile settles them) and quarantines the
// store has not recorded yet (their write is retried). Every claim with
// requests in flight here, evicted or not, is held again by the revision
// they are on at the next keepalive pass (rehold; the spec's Reconnect:
// this replica's holds may have vanished with its store session while
// the store was unreachable, or never been made), and the holds of those
// with none are given up.
func (c *Coordinator) onReset() {
	c.epoch.Add(1)
	defer c.st.resets.Add(1)
	c.slots.Range(func(_, v any) bool {
		s := v.(*slot)
		s.mu.Lock()
		// Every record with leases (not only the current one and the
		// holder: a record an earlier Reset evicted keeps its leases).
		for _, rec := range s.leased {
			if !rec.unclaimed && rec.rev != 0 && rec.state == recBound && !rec.ended.Load() {
				rec.held.Store(false)
				c.needRehold(rec)
			}
		}
		s.mu.Unlock()
		return true
	})
	if !mutant("NoEvictOnReset") {
		c.slots.Range(func(_, v any) bool {
			s := v.(*slot)
			s.mu.Lock()
			if rec := s.cur.Load(); rec != nil && !rec.unclaimed && !s.waitsLocked(rec) &&
				!(rec.state == recQuarantined && rec.own && !rec.written) {
				c.evictLocked(s, rec)
				c.st.resetEvictions.Add(1)
			}
			s.mu.Unlock()
			return true
		})
	}
	_ = c.refreshMembers(c.ctx)
	c.downAt.Store(0)
	c.reconcile.Store(true)
	c.poke()
}

// poke asks the keepalive goroutine for a pass now.
func (c *Coordinator) poke() {
	select {
	case c.pokeCh <- struct{}{}:
	default:
	}
}
