package replica

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/placement"
)

// TestRandomFaults drives three replicas through random turns (accepted,
// refused, ambiguous, final) of a few sessions while the store injects
// faults (Resets, delayed and duplicated events, a replica's store
// unreachable, lost sessions, worker restarts, writes whose reply is lost),
// and checks:
//
//   - agreement: every turn made under the same claim revision of a
//     session, on any replica, has the same target and generation;
//   - a turn's claimed revision was a real claim of the session with that
//     target (no invented claims);
//   - convergence: once the faults stop, every replica routes every bound
//     session to its claim's target at its revision.
//
// The seed is printed; set REPLICA_SEED to replay one.
func TestRandomFaults(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := getenvUint("REPLICA_SEED"); s != 0 {
		seed = s
	}
	t.Logf("seed %d (REPLICA_SEED=%d replays it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	e := newEnv(t, 3, nil, 0)
	names := []string{"r1", "r2", "r3"}
	reps := map[string]*Coordinator{}
	for _, n := range names {
		reps[n], _ = e.replica(n)
	}
	keys := []string{"a", "b", "c", "d"}
	type seen struct {
		target claims.Target
		gen    int64
	}
	byRev := map[string]map[int64]seen{}
	quarantined := map[string]*QuarantinedError{}
	held := map[string]bool{}
	down := map[string]bool{}
	ctx := context.Background()
	for op := range 400 {
		r := names[rng.IntN(len(names))]
		c := reps[r]
		switch x := rng.IntN(100); {
		case x < 3:
			e.b.InjectReset(r)
		case x < 6:
			held[r] = !held[r]
			e.b.HoldEvents(r, held[r])
		case x < 8:
			e.b.DuplicateNext(r)
		case x < 10:
			down[r] = !down[r]
			e.b.SetUnavailable(r, down[r])
		case x < 11:
			e.b.LoseSession(r)
		case x < 12:
			w := fmt.Sprintf("w%d", 1+rng.IntN(3))
			_, err := e.workers.Register(ctx, w, fmt.Sprintf("boot-%d", op))
			require.NoError(t, err)
		case x < 14:
			// A write's reply lost (it is applied all the same), the
			// connection sometimes cut with it.
			writes := []string{"create-or-get", "hold", "unhold", "close", "quarantine", "resolve", "touch"}
			cut := rng.IntN(4) == 0
			e.b.LoseReply(r, writes[rng.IntN(len(writes))], 1, cut)
			if cut {
				down[r] = true
			}
		case x < 18:
			for k, qe := range quarantined {
				err := c.Resolve(tctx(t), k, qe.Attempt, qe.Gen, rng.IntN(2) == 0)
				if err != nil && !errors.Is(err, claims.ErrFenced) && !errors.Is(err, claims.ErrUnavailable) &&
					!errors.Is(err, placement.ErrFenced) {
					require.NoError(t, err, "op %d: resolve %s on %s", op, k, r)
				}
				delete(quarantined, k)
				break
			}
		default:
			key := keys[rng.IntN(len(keys))]
			tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			tu, err := c.Start(tctx, key, nil)
			if err != nil {
				cancel()
				var qe *QuarantinedError
				if errors.As(err, &qe) {
					quarantined[key] = qe
					continue
				}
				if errors.Is(err, ErrClosing) || errors.Is(err, claims.ErrUnavailable) {
					continue
				}
				require.NoError(t, err, "op %d: start %s on %s", op, key, r)
			}
			outs := []placement.Outcome{placement.Accepted, placement.Accepted, placement.Accepted,
				placement.DefinitelyNotAccepted, placement.Ambiguous}
			for {
				if rev := tu.Rev(); rev != 0 {
					if byRev[key] == nil {
						byRev[key] = map[int64]seen{}
					}
					got := seen{tu.Target(), tu.Gen()}
					if prev, ok := byRev[key][rev]; ok {
						require.Equal(t, prev, got, "op %d: %s rev %d on %s disagrees", op, key, rev, r)
					} else {
						byRev[key][rev] = got
					}
				}
				err := tu.Complete(outs[rng.IntN(len(outs))])
				if errors.Is(err, ErrRetry) {
					continue
				}
				var qe *QuarantinedError
				if errors.As(err, &qe) {
					quarantined[key] = qe
				}
				break
			}
			tu.Done(rng.IntN(8) == 0)
			cancel()
		}
	}
	// The faults end.
	for _, n := range names {
		for _, op := range []string{"create-or-get", "hold", "unhold", "close", "quarantine", "resolve", "touch"} {
			e.b.LoseReply(n, op, 0, false) // no lost reply (nor cut) is left pending
		}
		e.b.HoldEvents(n, false)
		e.b.SetUnavailable(n, false)
	}
	for _, n := range names {
		reps[n].Tick(tctx(t))
	}
	var why string
	assert.Eventually(t, func() bool {
		for _, key := range keys {
			for _, n := range names {
				tu, err := reps[n].Start(tctx(t), key, nil)
				if err != nil {
					if errors.Is(err, ErrClosing) {
						continue
					}
					why = fmt.Sprintf("%s on %s: %v", key, n, err)
					var qe *QuarantinedError
					if errors.As(err, &qe) {
						// Settle it where it can be: a quarantine the store
						// never recorded (rev 0) only on its replica.
						rerr := reps[n].Resolve(tctx(t), key, qe.Attempt, qe.Gen, false)
						why += fmt.Sprintf("; resolved: %v; local: %s", rerr, reps[n].debugKey(key))
					}
					return false
				}
				rev, target, unclaimed, hit := tu.Rev(), tu.Target(), tu.Unclaimed(), tu.Hit()
				_ = tu.Complete(placement.Accepted)
				tu.Done(false)
				cl, ok := e.claimOf(key)
				if unclaimed || !ok || cl.Rev != rev || cl.Target != target {
					why = fmt.Sprintf("%s on %s: rev %d target %s unclaimed %v hit %v; the store's claim %+v (%v); local: %s",
						key, n, rev, target, unclaimed, hit, cl, ok, reps[n].debugKey(key))
					return false
				}
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "the replicas did not converge on the claims (seed %d)", seed)
	if t.Failed() {
		t.Logf("last divergence: %s", why)
	}
	for _, n := range names {
		t.Logf("%s: %+v", n, reps[n].Stats())
	}
}

// debugKey describes key's slot and core entry on c.
func (c *Coordinator) debugKey(key string) string {
	out := ""
	if v, ok := c.slots.Load(key); ok {
		s := v.(*slot)
		s.mu.Lock()
		if rec := s.cur.Load(); rec != nil {
			out += fmt.Sprintf("rec{state %d own %v written %v attempt %d gen %d rev %d evicted %v unclaimed %v}",
				rec.state, rec.own, rec.written, rec.attempt, rec.gen, rec.rev, rec.evicted.Load(), rec.unclaimed)
		} else {
			out += "no rec"
		}
		out += fmt.Sprintf(" writing %d maxDeleted %d", s.writing, s.maxDeleted)
		s.mu.Unlock()
	} else {
		out += "no slot"
	}
	info, err := c.core.Query(key)
	c.retryMu.Lock()
	retries := len(c.retries)
	c.retryMu.Unlock()
	return out + fmt.Sprintf("; core %+v %v; reconcile %v down %v retries %d", info, err, c.reconcile.Load(), c.isDown(), retries)
}
