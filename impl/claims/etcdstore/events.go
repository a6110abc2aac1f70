package etcdstore

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/placementlab/placement/impl/claims"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Events implements claims.Store. Each stream reads the store's current
// revision R (and makes sure the store's session lives), sends a Reset,
// and watches claims/, workers/ and the deletes of holders/ from R+1; whatever may lose events
// ends the watch and starts this over once the store answers: a
// compaction, a cancelled or closed watch, a lost leader, the session's
// end, a call of the store that found etcd unreachable, a failed probe.
// Events a consumer has not taken queue up to the event buffer; more
// replace the queue by a Reset.
//
// A Reset is sent only after R was read, so a consumer that reads a claim
// after taking the Reset reads it at R or later, and the watch from R+1
// reports every revision that ends after that.
//
// A stream also finishes deferred closes: when the last holder of a
// Closing claim it saw written vanishes without an Unhold (its process
// died and its session lease expired), the stream deletes the claim in a
// transaction fenced by the claim's revision and by there being no holder
// left (any replica's stream may do it; one does). A Closing claim
// written before a stream's last Reset is not known to it, and is left to
// its idle expiry if no stream knows it.
func (s *Store) Events(ctx context.Context) (<-chan claims.Event, error) {
	const op = "events"
	if ctx == nil {
		return nil, invalid(op, "nil context")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("etcdstore: %s: %w", op, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("etcdstore: %s: %w", op, claims.ErrClosed)
	}
	out := make(chan claims.Event)
	s.wg.Add(1)
	go s.stream(ctx, out)
	return out, nil
}

// stream runs one event stream until ctx ends or the store shuts down.
func (s *Store) stream(ctx context.Context, out chan<- claims.Event) {
	defer s.wg.Done()
	defer close(out)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()

	q := &queue{limit: s.set.eventBuffer}
	why := "stream start"
	for {
		rev, sessDone, lost, ok := s.resync(ctx)
		if !ok {
			return
		}
		q.reset(claims.Event{Kind: claims.Reset, Why: why})
		if s.set.beforeWatch != nil {
			s.set.beforeWatch(rev)
		}
		why = s.watch(ctx, out, q, rev, sessDone, lost)
		if why == "" {
			return
		}
	}
}

// resync waits until the store answers: it makes sure the session lives
// and reads the current revision. It returns the revision, the session's
// end, and the signal of a later call finding the store unreachable; ok
// false when ctx ended first.
func (s *Store) resync(ctx context.Context) (rev int64, sessDone, lost <-chan struct{}, ok bool) {
	backoff := 20 * time.Millisecond
	for {
		lost = s.lostSignal()
		rev, sessDone, err := s.tryResync(ctx)
		if err == nil {
			return rev, sessDone, lost, true
		}
		if ctx.Err() != nil {
			return 0, nil, nil, false
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, nil, nil, false
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
	}
}

func (s *Store) tryResync(ctx context.Context) (int64, <-chan struct{}, error) {
	octx, done := s.opContext(ctx)
	defer done()
	sess, err := s.session(octx)
	if err != nil {
		return 0, nil, s.fail(octx, "events", err)
	}
	resp, err := s.cli.Get(octx, s.kCounter, clientv3.WithCountOnly())
	if err != nil {
		return 0, nil, s.fail(octx, "events", err)
	}
	return resp.Header.Revision, sess.Done(), nil
}

// watch delivers the events after rev until something may lose events
// (it returns why) or ctx ends (it returns "").
func (s *Store) watch(ctx context.Context, out chan<- claims.Event, q *queue, rev int64, sessDone, lost <-chan struct{}) string {
	wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer wcancel()
	cw := s.cli.Watch(wctx, s.kClaims, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithPrevKV())
	ww := s.cli.Watch(wctx, s.kWorkers, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	hw := s.cli.Watch(wctx, s.kHolders, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithFilterPut())
	closing := map[string]int64{} // Closing claims written since rev: key → revision
	probe := time.NewTicker(s.set.probeInterval)
	defer probe.Stop()
	for {
		var send chan<- claims.Event
		var head claims.Event
		if len(q.evs) > 0 {
			send, head = out, q.evs[0]
		}
		select {
		case <-ctx.Done():
			return ""
		case send <- head:
			q.pop()
		case wr, ok := <-cw:
			if why := s.watchEnded(ctx, "claims", wr, ok); why != "" {
				return why
			}
			for _, ev := range wr.Events {
				s.claimEvent(q, ev)
				s.noteClosing(ctx, closing, ev)
			}
		case wr, ok := <-hw:
			if why := s.watchEnded(ctx, "holders", wr, ok); why != "" {
				return why
			}
			for _, ev := range wr.Events {
				if key, ok := s.heldKey(ev.Kv.Key); ok {
					if rev, ok := closing[key]; ok {
						s.finishClose(ctx, key, rev)
					}
				}
			}
		case wr, ok := <-ww:
			if why := s.watchEnded(ctx, "workers", wr, ok); why != "" {
				return why
			}
			for _, ev := range wr.Events {
				worker := string(ev.Kv.Key[len(s.kWorkers):])
				if ev.Type == mvccpb.PUT {
					// A later registration replaced this store's own.
					s.forgetRegistration(worker, ev.Kv.ModRevision)
				}
				q.push(claims.Event{Kind: claims.MembersChanged, Key: worker, Rev: ev.Kv.ModRevision})
			}
		case <-sessDone:
			return "store session lost"
		case <-lost:
			return "store was unreachable"
		case <-probe.C:
			if err := s.probe(ctx); err != nil {
				if ctx.Err() != nil {
					return ""
				}
				return fmt.Sprintf("store unreachable: %v", err)
			}
		}
	}
}

// watchEnded says why a watch response ends the watch ("" when it does
// not).
func (s *Store) watchEnded(ctx context.Context, which string, wr clientv3.WatchResponse, ok bool) string {
	switch {
	case ctx.Err() != nil:
		return ""
	case !ok:
		return which + " watch closed"
	case wr.CompactRevision != 0:
		return fmt.Sprintf("%s watch compacted at %d", which, wr.CompactRevision)
	case wr.Canceled:
		if err := wr.Err(); err != nil {
			return fmt.Sprintf("%s watch cancelled: %v", which, err)
		}
		return which + " watch cancelled"
	case wr.Err() != nil:
		return fmt.Sprintf("%s watch failed: %v", which, wr.Err())
	}
	return ""
}

// claimEvent queues what a change of a claim key says: a Put over an
// existing revision or a Delete ends that revision; a Put that creates
// the key ends nothing.
func (s *Store) claimEvent(q *queue, ev *clientv3.Event) {
	if ev.IsCreate() {
		return
	}
	key := string(ev.Kv.Key[len(s.kClaims):])
	if ev.PrevKv == nil {
		// The revision that ended is unknown.
		q.push(claims.Event{Kind: claims.Reset, Why: fmt.Sprintf("claim %q changed at %d with no previous revision", key, ev.Kv.ModRevision)})
		return
	}
	// A Put over the key and a Delete of it both end PrevKv's revision.
	q.push(claims.Event{Kind: claims.Delete, Key: key, Rev: ev.PrevKv.ModRevision})
}

// noteClosing keeps closing up to date with a claim event and, when the
// claim was just written Closing, tries to finish its close (its last
// holder may have vanished before).
func (s *Store) noteClosing(ctx context.Context, closing map[string]int64, ev *clientv3.Event) {
	key := string(ev.Kv.Key[len(s.kClaims):])
	delete(closing, key)
	if ev.Type != mvccpb.PUT || !bytes.Contains(ev.Kv.Value, []byte(`"closing"`)) {
		return
	}
	if c, _, err := decodeClaim(key, ev.Kv); err == nil && c.State == claims.Closing {
		closing[key] = c.Rev
		s.finishClose(ctx, key, c.Rev)
	}
}

// heldKey returns the session key of a holder key.
func (s *Store) heldKey(k []byte) (string, bool) {
	rest := string(k[len(s.kHolders):])
	i := strings.IndexByte(rest, '/')
	if i < 0 {
		return "", false
	}
	key, err := url.PathUnescape(rest[:i])
	return key, err == nil
}

// finishClose deletes key's Closing claim rev if nobody holds it any more:
// the last holder's session ended (its process died) without the Unhold
// that would have deleted it. Every replica's stream may try; the
// transaction is fenced by rev and by the holders being none, so at most
// one succeeds and none deletes a claim still held. Errors are left to the
// stream's probe.
func (s *Store) finishClose(ctx context.Context, key string, rev int64) {
	octx, done := s.opContext(ctx)
	defer done()
	_, _ = s.cli.Txn(octx).
		If(
			clientv3.Compare(clientv3.ModRevision(s.ClaimKey(key)), "=", rev),
			clientv3.Compare(clientv3.CreateRevision(s.holdersOf(key)), "=", 0).WithPrefix(),
		).
		Then(clientv3.OpDelete(s.ClaimKey(key))).
		Commit()
}

// probe checks that the store answers a linearizable read.
func (s *Store) probe(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, s.set.probeTimeout)
	defer cancel()
	_, err := s.cli.Get(pctx, s.kCounter, clientv3.WithCountOnly())
	return err
}

// queue is a stream's undelivered events.
type queue struct {
	evs   []claims.Event
	limit int
}

// push queues ev; a queue at its limit becomes one Reset.
func (q *queue) push(ev claims.Event) {
	if len(q.evs) >= q.limit {
		q.reset(claims.Event{Kind: claims.Reset, Why: "slow consumer: event buffer overflowed"})
		return
	}
	q.evs = append(q.evs, ev)
}

// reset replaces the queue by ev (a Reset: what was queued is moot).
func (q *queue) reset(ev claims.Event) {
	clear(q.evs)
	q.evs = append(q.evs[:0], ev)
}

func (q *queue) pop() {
	q.evs[0] = claims.Event{}
	q.evs = q.evs[1:]
}
