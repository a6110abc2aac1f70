package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/placementlab/placement/impl/claims"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func moved(op, key string, rev int64, why string) error {
	return fmt.Errorf("etcdstore: %s %q rev %d: %s: %w", op, key, rev, why, claims.ErrClaimMoved)
}

// firstKV returns the first key-value of a range response, or nil.
func firstKV(kvs []*mvccpb.KeyValue) *mvccpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	return kvs[0]
}

// generations maps each registered worker of a keys-only range of
// workers/ to its generation.
func (s *Store) generations(kvs []*mvccpb.KeyValue) map[string]int64 {
	gens := make(map[string]int64, len(kvs))
	for _, kv := range kvs {
		gens[string(kv.Key[len(s.kWorkers):])] = kv.ModRevision
	}
	return gens
}

// CreateOrGet implements claims.Store: one read of the claim and the
// workers' generations; when the claim is absent or stale, propose and one
// transaction If(ModRevision(claim) == seen, ModRevision(worker) == gen)
// Then(Put under a new lease of IdleTTL, drop the old lineage's holds)
// Else(read again).
func (s *Store) CreateOrGet(ctx context.Context, key string, propose func() (claims.Target, error)) (claims.Claim, bool, error) {
	const op = "create-or-get"
	if err := claims.CheckCreateOrGet(key, propose); err != nil {
		return claims.Claim{}, false, err
	}
	octx, done, err := s.begin(ctx, op)
	if err != nil {
		return claims.Claim{}, false, err
	}
	defer done()
	ck := s.ClaimKey(key)
	readOps := []clientv3.Op{
		clientv3.OpGet(ck),
		clientv3.OpGet(s.kWorkers, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
	}
	resp, err := s.cli.Txn(octx).Then(readOps...).Commit()
	if err != nil {
		return claims.Claim{}, false, s.fail(octx, op, err)
	}
	for {
		kv := firstKV(resp.Responses[0].GetResponseRange().Kvs)
		gens := s.generations(resp.Responses[1].GetResponseRange().Kvs)
		var seen int64
		if kv != nil {
			c, _, err := decodeClaim(key, kv)
			if err != nil {
				return claims.Claim{}, false, err
			}
			if g, ok := gens[c.Target.Worker]; ok && g == c.Gen {
				return c, false, nil
			}
			seen = kv.ModRevision
		}
		t, err := propose()
		if err != nil {
			return claims.Claim{}, false, err
		}
		if err := claims.CheckProposal(t); err != nil {
			return claims.Claim{}, false, err
		}
		gen, ok := gens[t.Worker]
		if !ok {
			return claims.Claim{}, false, fmt.Errorf("etcdstore: %s %q: proposed worker %q: %w", op, key, t.Worker, claims.ErrUnknownWorker)
		}
		lease, reused, err := s.claimLease(octx)
		if err != nil {
			return claims.Claim{}, false, s.fail(octx, op, err)
		}
		c := claims.Claim{Key: key, Target: t, Gen: gen, State: claims.Bound}
		tr, err := s.cli.Txn(octx).
			If(
				clientv3.Compare(clientv3.ModRevision(ck), "=", seen),
				clientv3.Compare(clientv3.ModRevision(s.workerKey(t.Worker)), "=", gen),
			).
			Then(
				clientv3.OpPut(ck, encodeClaim(c, int64(lease)), clientv3.WithLease(lease)),
				clientv3.OpDelete(s.holdersOf(key), clientv3.WithPrefix()),
			).
			Else(readOps...).
			Commit()
		if err != nil {
			// The write may have happened: the lease stays (it expires
			// with the claim, or alone after its TTL), and is not
			// reused.
			s.leases.forget(lease)
			if reused && errors.Is(err, rpctypes.ErrLeaseNotFound) {
				// The reused lease is gone (revoked): nothing was
				// written; judge the read again with a new lease.
				continue
			}
			return claims.Claim{}, false, s.fail(octx, op, err)
		}
		if tr.Succeeded {
			c.Rev = tr.Header.Revision
			c.Born = c.Rev // a new lineage
			s.untrackKey(key)
			return c, true, nil
		}
		// Lost the race (or the worker re-registered): the lease holds
		// no key; it goes back to the pool, or is revoked. Read the
		// winner from the Else branch.
		if !s.leases.release(lease) {
			_, _ = s.cli.Revoke(octx, lease)
		}
		resp = tr
	}
}

// readClaim reads key's claim: its kv (nil when absent), claim and lease.
func (s *Store) readClaim(ctx context.Context, key string) (*mvccpb.KeyValue, claims.Claim, int64, error) {
	resp, err := s.cli.Get(ctx, s.ClaimKey(key))
	if err != nil {
		return nil, claims.Claim{}, 0, err
	}
	kv := firstKV(resp.Kvs)
	if kv == nil {
		return nil, claims.Claim{}, 0, nil
	}
	c, lease, err := decodeClaim(key, kv)
	if err != nil {
		return nil, claims.Claim{}, 0, err
	}
	return kv, c, lease, nil
}

// Get implements claims.Store.
func (s *Store) Get(ctx context.Context, key string) (claims.Claim, bool, error) {
	const op = "get"
	if err := claims.CheckGet(key); err != nil {
		return claims.Claim{}, false, err
	}
	octx, done, err := s.begin(ctx, op)
	if err != nil {
		return claims.Claim{}, false, err
	}
	defer done()
	kv, c, _, err := s.readClaim(octx, key)
	if err != nil {
		return claims.Claim{}, false, s.fail(octx, op, err)
	}
	return c, kv != nil, nil
}

// Hold implements claims.Store: If(ModRevision(claim) == rev) Then(Put the
// holder key on the session lease).
func (s *Store) Hold(ctx context.Context, key string, rev int64, replica string) error {
	const op = "hold"
	if err := claims.CheckHold(key, rev, replica); err != nil {
		return err
	}
	octx, done, err := s.begin(ctx, op)
	if err != nil {
		return err
	}
	defer done()
	for try := 0; ; try++ {
		sess, err := s.session(octx)
		if err != nil {
			return s.fail(octx, op, err)
		}
		tr, err := s.cli.Txn(octx).
			If(clientv3.Compare(clientv3.ModRevision(s.ClaimKey(key)), "=", rev)).
			Then(
				clientv3.OpPut(s.holderKey(key, replica), strconv.FormatInt(rev, 10), clientv3.WithLease(sess.Lease())),
				clientv3.OpGet(s.ClaimKey(key)),
			).
			Commit()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && try == 0 {
			sess.Orphan() // the session expired: start another
			continue
		}
		if err != nil {
			return s.fail(octx, op, err)
		}
		if !tr.Succeeded {
			return moved(op, key, rev, "not current")
		}
		// The claim as it is at rev (the compare held in the same
		// transaction): a Close fenced by rev needs no read.
		var kc knownClaim
		if kv := firstKV(tr.Responses[1].GetResponseRange().Kvs); kv != nil && kv.ModRevision == rev {
			if c, lease, err := decodeClaim(key, kv); err == nil {
				kc = knownClaim{rev: rev, c: c, lease: lease}
			}
		}
		s.track(key, replica, kc)
		return nil
	}
}

// noOtherHolders is true when no replica but replica holds key: the holder
// keys below and above replica's are none.
func (s *Store) noOtherHolders(key, replica string) []clientv3.Cmp {
	hp := s.holdersOf(key)
	own := s.holderKey(key, replica)
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(hp), "=", 0).WithRange(own),
		clientv3.Compare(clientv3.CreateRevision(own+"\x00"), "=", 0).WithRange(clientv3.GetPrefixRangeEnd(hp)),
	}
}

// deleteClaim is the ops that delete key's claim and its holds.
func (s *Store) deleteClaim(key string) []clientv3.Op {
	return []clientv3.Op{
		clientv3.OpDelete(s.ClaimKey(key)),
		clientv3.OpDelete(s.holdersOf(key), clientv3.WithPrefix()),
	}
}

// Unhold implements claims.Store: fenced by the claim's revision read,
// it deletes replica's holder key and, when the claim is Closing and no
// other replica holds it, the claim.
func (s *Store) Unhold(ctx context.Context, key string, replica string) error {
	const op = "unhold"
	if err := claims.CheckUnhold(key, replica); err != nil {
		return err
	}
	octx, done, err := s.begin(ctx, op)
	if err != nil {
		return err
	}
	defer done()
	if err := s.unhold(octx, key, replica); err != nil {
		return s.fail(octx, op, err)
	}
	return nil
}

func (s *Store) unhold(ctx context.Context, key, replica string) error {
	ck := s.ClaimKey(key)
	own := clientv3.OpDelete(s.holderKey(key, replica))
	for {
		kv, c, _, err := s.readClaim(ctx, key)
		if err != nil {
			return err
		}
		var seen int64
		then := []clientv3.Op{own}
		if kv != nil {
			seen = kv.ModRevision
			if c.State == claims.Closing {
				then = []clientv3.Op{clientv3.OpTxn(s.noOtherHolders(key, replica), s.deleteClaim(key), []clientv3.Op{own})}
			}
		}
		tr, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(ck), "=", seen)).Then(then...).Commit()
		if err != nil {
			return err
		}
		if tr.Succeeded {
			s.untrack(key, replica)
			return nil
		}
	}
}

// Close implements claims.Store: one read, then If(ModRevision(claim) ==
// rev) Then(If(no other holder) Then(delete the claim and its holds)
// Else(write it Closing, drop replica's hold)).
func (s *Store) Close(ctx context.Context, key string, rev int64, replica string) (claims.CloseResult, error) {
	const op = "close"
	if err := claims.CheckClose(key, rev, replica); err != nil {
		return 0, err
	}
	octx, done, err := s.begin(ctx, op)
	if err != nil {
		return 0, err
	}
	defer done()
	// The claim at rev: known from this store's Hold fenced by rev (the
	// transaction below is fenced by the same revision, so the value is
	// the one etcd keeps), or read.
	c, lease, ok := s.claimAt(key, rev)
	if !ok {
		var kv *mvccpb.KeyValue
		kv, c, lease, err = s.readClaim(octx, key)
		if err != nil {
			return 0, s.fail(octx, op, err)
		}
		if kv == nil || kv.ModRevision != rev {
			return claims.CloseStale, nil
		}
	}
	deferred := []clientv3.Op{clientv3.OpDelete(s.holderKey(key, replica))}
	rewrite := c.State != claims.Closing
	if rewrite {
		cc := c
		cc.State = claims.Closing
		cc.Attempt = 0
		deferred = append(deferred, clientv3.OpPut(s.ClaimKey(key), encodeClaim(cc, lease), clientv3.WithIgnoreLease()))
	}
	tr, err := s.cli.Txn(octx).
		If(clientv3.Compare(clientv3.ModRevision(s.ClaimKey(key)), "=", rev)).
		Then(clientv3.OpTxn(s.noOtherHolders(key, replica), s.deleteClaim(key), deferred)).
		Commit()
	if err != nil {
		return 0, s.fail(octx, op, err)
	}
	if !tr.Succeeded {
		return claims.CloseStale, nil
	}
	if tr.Responses[0].GetResponseTxn().Succeeded {
		s.untrackKey(key)
		s.leases.release(clientv3.LeaseID(lease)) // the claim key was its only key
		return claims.CloseDeleted, nil
	}
	if mutant("LeaseReusedWhileHeld") {
		s.leases.release(clientv3.LeaseID(lease))
	}
	s.untrack(key, replica)
	if rewrite {
		s.refresh(octx, lease)
	}
	return claims.CloseDeferred, nil
}

// refresh restarts a rewritten claim's idle expiry (best effort: the
// write stands either way). A store found unreachable meanwhile is marked
// down, as any call's failure marks it: its event streams owe a Reset.
func (s *Store) refresh(ctx context.Context, lease int64) {
	if lease == 0 {
		return
	}
	if _, err := s.cli.KeepAliveOnce(ctx, clientv3.LeaseID(lease)); err != nil && unreachable(err) && !mutant("RefreshLossUnmarked") {
		s.markLost()
	}
}

// Quarantine implements claims.Store.
func (s *Store) Quarantine(ctx context.Context, key string, rev int64, attempt uint64, gen int64) (claims.Claim, error) {
	const op = "quarantine"
	if err := claims.CheckQuarantine(key, rev, gen); err != nil {
		return claims.Claim{}, err
	}
	octx, done, err := s.begin(ctx, op)
	if err != nil {
		return claims.Claim{}, err
	}
	defer done()
	kv, c, lease, err := s.readClaim(octx, key)
	if err != nil {
		return claims.Claim{}, s.fail(octx, op, err)
	}
	switch {
	case kv == nil:
		return claims.Claim{}, moved(op, key, rev, "no claim")
	case kv.ModRevision != rev:
		return claims.Claim{}, moved(op, key, rev, fmt.Sprintf("current rev is %d", kv.ModRevision))
	case c.Gen != gen:
		return claims.Claim{}, moved(op, key, rev, fmt.Sprintf("generation %d is not the claim's %d", gen, c.Gen))
	}
	c.State = claims.Quarantined
	c.Attempt = attempt
	tr, err := s.cli.Txn(octx).
		If(clientv3.Compare(clientv3.ModRevision(s.ClaimKey(key)), "=", rev)).
		Then(clientv3.OpPut(s.ClaimKey(key), encodeClaim(c, lease), clientv3.WithIgnoreLease())).
		Commit()
	if err != nil {
		return claims.Claim{}, s.fail(octx, op, err)
	}
	if !tr.Succeeded {
		return claims.Claim{}, moved(op, key, rev, "not current")
	}
	c.Rev = tr.Header.Revision
	s.refresh(octx, lease)
	return c, nil
}

// Resolve implements claims.Store: a read of the claim, then one
// transaction If(ModRevision(claim) == seen, ModRevision(worker) == gen)
// Then(write it Bound, or delete it) Else(read the claim and the
// registration). Every verdict is judged from one read: a fence from the
// claim read alone; staleness only from the Else branch's read, where
// the claim is still the revision judged (and the registration is not
// gen); when the Else branch finds another claim, it is judged again.
func (s *Store) Resolve(ctx context.Context, key string, attempt uint64, gen int64, accepted bool) (claims.Claim, bool, error) {
	const op = "resolve"
	if err := claims.CheckResolve(key, gen); err != nil {
		return claims.Claim{}, false, err
	}
	octx, done, err := s.begin(ctx, op)
	if err != nil {
		return claims.Claim{}, false, err
	}
	defer done()
	if mutant("ResolveTwoReads") {
		return s.resolveTwoReads(octx, key, attempt, gen, accepted)
	}
	ck := s.ClaimKey(key)
	kv, c, lease, err := s.readClaim(octx, key)
	if err != nil {
		return claims.Claim{}, false, s.fail(octx, op, err)
	}
	for {
		if err := resolveFenced(key, attempt, gen, kv, c); err != nil {
			return claims.Claim{}, false, err
		}
		wk := s.workerKey(c.Target.Worker)
		nc, then := s.resolution(key, c, lease, accepted)
		tr, err := s.cli.Txn(octx).
			If(
				clientv3.Compare(clientv3.ModRevision(ck), "=", kv.ModRevision),
				clientv3.Compare(clientv3.ModRevision(wk), "=", c.Gen),
			).
			Then(then...).
			Else(clientv3.OpGet(ck), clientv3.OpGet(wk, clientv3.WithKeysOnly())).
			Commit()
		if err != nil {
			return claims.Claim{}, false, s.fail(octx, op, err)
		}
		if tr.Succeeded {
			if !accepted {
				s.untrackKey(key)
				s.leases.release(clientv3.LeaseID(lease)) // the claim key was its only key
				return claims.Claim{}, false, nil
			}
			nc.Rev = tr.Header.Revision
			s.refresh(octx, lease)
			return nc, true, nil
		}
		// One read of the claim and the registration, at one revision.
		now := firstKV(tr.Responses[0].GetResponseRange().Kvs)
		if now != nil && now.ModRevision == kv.ModRevision {
			// The claim judged is current, and its worker re-registered
			// or left: nothing settles a stale claim (CreateOrGet
			// replaces it).
			return claims.Claim{}, false, &claims.FencedError{Key: key, Attempt: attempt, Gen: gen, Current: c, Found: true, Stale: true}
		}
		// The claim changed since it was judged: judge the new one.
		kv = now
		if kv != nil {
			if c, lease, err = decodeClaim(key, kv); err != nil {
				return claims.Claim{}, false, err
			}
		}
	}
}

// resolveFenced returns the FencedError of a Resolve of key's quarantine
// (attempt, gen) when c, the claim read (kv nil: none), is not that
// quarantine, and nil when it is.
func resolveFenced(key string, attempt uint64, gen int64, kv *mvccpb.KeyValue, c claims.Claim) error {
	if kv == nil {
		return &claims.FencedError{Key: key, Attempt: attempt, Gen: gen}
	}
	if c.State != claims.Quarantined || c.Attempt != attempt || c.Gen != gen {
		return &claims.FencedError{Key: key, Attempt: attempt, Gen: gen, Current: c, Found: true}
	}
	return nil
}

// resolution returns what Resolve writes for key's quarantined claim c,
// whose lease is lease: if the dispatch was accepted, c Bound with no
// attempt (returned, its Rev still c's); if not, c's deletion.
func (s *Store) resolution(key string, c claims.Claim, lease int64, accepted bool) (claims.Claim, []clientv3.Op) {
	if !accepted {
		return c, s.deleteClaim(key)
	}
	c.State = claims.Bound
	c.Attempt = 0
	return c, []clientv3.Op{clientv3.OpPut(s.ClaimKey(key), encodeClaim(c, lease), clientv3.WithIgnoreLease())}
}

// resolveTwoReads is the broken variant ResolveTwoReads (mutant_off.go):
// the claim, then its worker's registration in a second read, and a
// stale verdict with the claim of the first read.
func (s *Store) resolveTwoReads(octx context.Context, key string, attempt uint64, gen int64, accepted bool) (claims.Claim, bool, error) {
	const op = "resolve"
	ck := s.ClaimKey(key)
	for {
		kv, c, lease, err := s.readClaim(octx, key)
		if err != nil {
			return claims.Claim{}, false, s.fail(octx, op, err)
		}
		if err := resolveFenced(key, attempt, gen, kv, c); err != nil {
			return claims.Claim{}, false, err
		}
		wk := s.workerKey(c.Target.Worker)
		wr, err := s.cli.Get(octx, wk, clientv3.WithKeysOnly())
		if err != nil {
			return claims.Claim{}, false, s.fail(octx, op, err)
		}
		if w := firstKV(wr.Kvs); w == nil || w.ModRevision != c.Gen {
			return claims.Claim{}, false, &claims.FencedError{Key: key, Attempt: attempt, Gen: gen, Current: c, Found: true, Stale: true}
		}
		nc, then := s.resolution(key, c, lease, accepted)
		tr, err := s.cli.Txn(octx).
			If(
				clientv3.Compare(clientv3.ModRevision(ck), "=", kv.ModRevision),
				clientv3.Compare(clientv3.ModRevision(wk), "=", c.Gen),
			).
			Then(then...).
			Commit()
		if err != nil {
			return claims.Claim{}, false, s.fail(octx, op, err)
		}
		if !tr.Succeeded {
			continue
		}
		if !accepted {
			s.untrackKey(key)
			return claims.Claim{}, false, nil
		}
		nc.Rev = tr.Header.Revision
		s.refresh(octx, lease)
		return nc, true, nil
	}
}

// Move implements claims.Store: one read of the claim and the target's
// registration (one transaction, one revision), then one transaction
// If(ModRevision(claim) == rev, ModRevision(worker) == the generation
// read) Then(Put the new lineage, drop the old lineage's holds) Else(read
// both again), then a KeepAliveOnce that restarts the claim's idle
// expiry. The claim's state is judged from the read at rev, which the
// fence keeps current; a registration that changed in between is read
// again and judged anew. The new lineage keeps the claim's lease (the
// lease only times the claim key's expiry, and the Put moves no other
// key): no lease is orphaned, and a Touch by the old lineage's
// revisions is refused by its lineage check before it reaches the lease.
func (s *Store) Move(ctx context.Context, key string, rev int64, target claims.Target) (claims.Claim, error) {
	const op = "move"
	if err := claims.CheckMove(key, rev, target); err != nil {
		return claims.Claim{}, err
	}
	octx, done, err := s.begin(ctx, op)
	if err != nil {
		return claims.Claim{}, err
	}
	defer done()
	ck, wk := s.ClaimKey(key), s.workerKey(target.Worker)
	readOps := []clientv3.Op{clientv3.OpGet(ck), clientv3.OpGet(wk, clientv3.WithKeysOnly())}
	resp, err := s.cli.Txn(octx).Then(readOps...).Commit()
	if err != nil {
		return claims.Claim{}, s.fail(octx, op, err)
	}
	for {
		kv := firstKV(resp.Responses[0].GetResponseRange().Kvs)
		if kv == nil {
			return claims.Claim{}, &claims.MoveError{Key: key, Rev: rev, Target: target}
		}
		c, lease, err := decodeClaim(key, kv)
		if err != nil {
			return claims.Claim{}, err
		}
		if kv.ModRevision != rev || c.State != claims.Bound {
			return claims.Claim{}, &claims.MoveError{Key: key, Rev: rev, Target: target, Current: c, Found: true}
		}
		if lease == 0 {
			return claims.Claim{}, fmt.Errorf("%w: claim %q at rev %d has no lease", ErrCorrupt, key, rev)
		}
		w := firstKV(resp.Responses[1].GetResponseRange().Kvs)
		if w == nil {
			return claims.Claim{}, fmt.Errorf("etcdstore: %s %q rev %d: target worker %q: %w", op, key, rev, target.Worker, claims.ErrUnknownWorker)
		}
		nc := claims.Claim{Key: key, Target: target, Gen: w.ModRevision, State: claims.Bound}
		fence := []clientv3.Cmp{
			clientv3.Compare(clientv3.ModRevision(ck), "=", rev),
			clientv3.Compare(clientv3.ModRevision(wk), "=", nc.Gen),
		}
		if mutant("MoveIgnoresRegistration") {
			fence = fence[:1]
		}
		tr, err := s.cli.Txn(octx).
			If(fence...).
			Then(
				clientv3.OpPut(ck, encodeClaim(nc, lease), clientv3.WithIgnoreLease()),
				clientv3.OpDelete(s.holdersOf(key), clientv3.WithPrefix()),
			).
			Else(readOps...).
			Commit()
		if err != nil {
			return claims.Claim{}, s.fail(octx, op, err)
		}
		if tr.Succeeded {
			nc.Rev = tr.Header.Revision
			nc.Born = nc.Rev // a new lineage
			s.untrackKey(key)
			s.refresh(octx, lease)
			return nc, nil
		}
		// The claim moved on, or the target re-registered or left: judge
		// the Else branch's read.
		resp = tr
	}
}

// Touch implements claims.Store: a read (is rev a revision of the
// current lineage?) and a KeepAliveOnce of the claim's lease (one lease
// per lineage: its rewrites keep it; a lineage replaced in between keeps
// an orphaned lease alive a while, harmlessly).
func (s *Store) Touch(ctx context.Context, key string, rev int64) error {
	const op = "touch"
	if err := claims.CheckTouch(key, rev); err != nil {
		return err
	}
	octx, done, err := s.begin(ctx, op)
	if err != nil {
		return err
	}
	defer done()
	kv, c, lease, err := s.readClaim(octx, key)
	if err != nil {
		return s.fail(octx, op, err)
	}
	switch {
	case kv == nil:
		return moved(op, key, rev, "no claim")
	case !c.InLineage(rev):
		return moved(op, key, rev, fmt.Sprintf("not in the current lineage [%d, %d]", c.Born, c.Rev))
	case lease == 0:
		return fmt.Errorf("%w: claim %q at rev %d has no lease", ErrCorrupt, key, rev)
	}
	if _, err := s.cli.KeepAliveOnce(octx, clientv3.LeaseID(lease)); err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return moved(op, key, rev, "expired")
		}
		return s.fail(octx, op, err)
	}
	return nil
}

// Register implements claims.Store: one transaction, If(the value of
// workers/<worker> is identity's) Then(Get) Else(Put on the session
// lease). A registration with the identity of the current one writes
// nothing: its key keeps its mod revision (the generation) and its lease
// (the session of whoever registered it first). Otherwise the generation
// is the Put's revision.
func (s *Store) Register(ctx context.Context, worker, identity string) (claims.Member, error) {
	const op = "register"
	if err := claims.CheckRegister(worker); err != nil {
		return claims.Member{}, err
	}
	octx, done, err := s.begin(ctx, op)
	if err != nil {
		return claims.Member{}, err
	}
	defer done()
	for try := 0; ; try++ {
		sess, err := s.session(octx)
		if err != nil {
			return claims.Member{}, s.fail(octx, op, err)
		}
		key, val := s.workerKey(worker), encodeWorker(identity)
		r, err := s.cli.Txn(octx).
			If(clientv3.Compare(clientv3.Value(key), "=", val)).
			Then(clientv3.OpGet(key)).
			Else(clientv3.OpPut(key, val, clientv3.WithLease(sess.Lease()))).
			Commit()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && try == 0 {
			sess.Orphan()
			continue
		}
		if err != nil {
			return claims.Member{}, s.fail(octx, op, err)
		}
		if r.Succeeded {
			// The same identity's registration: unchanged.
			if kvs := r.Responses[0].GetResponseRange().GetKvs(); len(kvs) == 1 {
				if kvs[0].Lease == int64(sess.Lease()) {
					s.noteRegistration(worker, val, kvs[0].ModRevision)
				}
				return decodeWorker(worker, kvs[0])
			}
			return claims.Member{}, fmt.Errorf("%w: register %q: the compared registration was not read", ErrCorrupt, worker)
		}
		s.noteRegistration(worker, val, r.Header.Revision)
		return claims.Member{Worker: worker, Identity: identity, Gen: r.Header.Revision}, nil
	}
}

// Deregister implements claims.Store.
func (s *Store) Deregister(ctx context.Context, worker string) error {
	const op = "deregister"
	if err := claims.CheckDeregister(worker); err != nil {
		return err
	}
	octx, done, err := s.begin(ctx, op)
	if err != nil {
		return err
	}
	defer done()
	s.forgetRegistration(worker, 0)
	if _, err := s.cli.Delete(octx, s.workerKey(worker)); err != nil {
		return s.fail(octx, op, err)
	}
	return nil
}

// Members implements claims.Store (sorted by worker).
func (s *Store) Members(ctx context.Context) ([]claims.Member, int64, error) {
	const op = "members"
	octx, done, err := s.begin(ctx, op)
	if err != nil {
		return nil, 0, err
	}
	defer done()
	resp, err := s.cli.Get(octx, s.kWorkers, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, s.fail(octx, op, err)
	}
	out := make([]claims.Member, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		m, err := decodeWorker(string(kv.Key[len(s.kWorkers):]), kv)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, m)
	}
	return out, resp.Header.Revision, nil
}

// ReplicaID implements claims.Store: a compare-and-swap increment of the
// replica-id counter; every call returns a new number.
func (s *Store) ReplicaID(ctx context.Context, replica string) (uint64, error) {
	const op = "replica-id"
	if err := claims.CheckReplicaID(replica); err != nil {
		return 0, err
	}
	octx, done, err := s.begin(ctx, op)
	if err != nil {
		return 0, err
	}
	defer done()
	for {
		resp, err := s.cli.Get(octx, s.kCounter)
		if err != nil {
			return 0, s.fail(octx, op, err)
		}
		var n uint64
		var seen int64
		if kv := firstKV(resp.Kvs); kv != nil {
			seen = kv.ModRevision
			if n, err = strconv.ParseUint(string(kv.Value), 10, 64); err != nil {
				return 0, fmt.Errorf("%w: replica-id counter %q", ErrCorrupt, kv.Value)
			}
		}
		if n >= claims.MaxReplicaID {
			return 0, fmt.Errorf("etcdstore: %s: all %d replica ids are used: %w", op, uint64(claims.MaxReplicaID), ErrReplicaIDsExhausted)
		}
		tr, err := s.cli.Txn(octx).
			If(clientv3.Compare(clientv3.ModRevision(s.kCounter), "=", seen)).
			Then(clientv3.OpPut(s.kCounter, strconv.FormatUint(n+1, 10))).
			Commit()
		if err != nil {
			return 0, s.fail(octx, op, err)
		}
		if tr.Succeeded {
			return n + 1, nil
		}
	}
}
