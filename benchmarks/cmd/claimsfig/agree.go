package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/etcdstore/embedded"
	"github.com/placementlab/placement/impl/replica"
)

// agreeResult is one member restart of the agreement figure.
type agreeResult struct {
	member int
	leader bool
	// afterStop is the time from StopMember's call until every replica
	// agreed with the store (the member still down); stopTook the time
	// StopMember took (etcd's graceful stop: a leader hands leadership
	// over first); restartTook the time RestartMember took (until the
	// member served clients); afterRestart the time from RestartMember's
	// call until every replica agreed. The replicas serve throughout.
	afterStop, stopTook, restartTook, afterRestart time.Duration
	// fresh counts the sessions whose first turns began as the member
	// stopped.
	fresh int
	// slowest is the longest turn of the round (Start to Done), and
	// slowestFresh the longest first turn of its fresh sessions.
	slowest, slowestFresh time.Duration
	// passes and badPasses count the passes (every replica's turn on
	// every session) and those that did not agree with the store; errs,
	// unclaimed and moved count, over the bad passes, the turns that
	// failed, were placed unclaimed, or went elsewhere than the store's
	// claim (another target or revision, or no claim in the store).
	passes, badPasses int
	// badAfterRestart counts the bad passes of the restart's phase (from
	// RestartMember's call on).
	badAfterRestart        int
	errs, unclaimed, moved int
	// resets, unclaimedPlaced, reconciles and reconcilesLost are the
	// replicas' counters over the round (replica.Stats).
	resets, unclaimedPlaced, reconciles, reconcilesLost uint64
	// slowestCall is the replicas' slowest store call of the round.
	slowestCall slowCall
}

// passRecord is one pass: when it ended and where each replica's turn on
// each session went.
type passRecord struct {
	end   time.Time
	views [][]routed // [replica][session]
}

// agreement is the three-member experiment's state.
type agreement struct {
	r        *rig
	observer claims.Store
	keys     []string
	// timeout bounds one turn (beyond the replica's own store timeout,
	// so that its answer to an unreachable store shows) and one read.
	timeout time.Duration
}

// turns runs every replica's turn on every session, all at once.
func (a *agreement) turns(ctx context.Context) passRecord {
	p := passRecord{views: make([][]routed, len(a.r.reps))}
	var wg sync.WaitGroup
	for i, c := range a.r.reps {
		p.views[i] = make([]routed, len(a.keys))
		for k, key := range a.keys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pctx, cancel := context.WithTimeout(ctx, a.timeout)
				defer cancel()
				p.views[i][k] = probe(pctx, c, key)
			}()
		}
	}
	wg.Wait()
	p.end = time.Now()
	return p
}

// consistent reports whether every turn of p succeeded, claimed, and
// every replica routed each session to the same target and revision.
func consistent(p passRecord) bool {
	for k := range p.views[0] {
		first := p.views[0][k]
		for i := range p.views {
			v := p.views[i][k]
			if v.err != nil || v.unclaimed || v.target != first.target || v.rev != first.rev {
				return false
			}
		}
	}
	return true
}

// judge counts p's turns that do not agree with the store's claims.
func judge(p passRecord, keys []string, truth map[string]claims.Claim) (errs, unclaimed, moved int) {
	for i := range p.views {
		for k, key := range keys {
			v := p.views[i][k]
			c, ok := truth[key]
			switch {
			case v.err != nil:
				errs++
			case v.unclaimed:
				unclaimed++
			case !ok || v.target != c.Target || v.rev != c.Rev:
				moved++
			}
		}
	}
	return errs, unclaimed, moved
}

// readAll reads every session's claim from the store, retrying failed
// reads until deadline; a session with no claim is absent from the map.
func (a *agreement) readAll(ctx context.Context, deadline time.Time) (map[string]claims.Claim, error) {
	out := map[string]claims.Claim{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	for _, key := range a.keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				rctx, cancel := context.WithTimeout(ctx, a.timeout)
				c, ok, err := a.observer.Get(rctx, key)
				cancel()
				if err == nil {
					if ok {
						mu.Lock()
						out[key] = c
						mu.Unlock()
					}
					return
				}
				if ctx.Err() != nil || time.Now().After(deadline) {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("read the claim of %s: %w", key, err)
					}
					mu.Unlock()
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	return out, firstErr
}

// observe runs passes back to back from t0 until over says the phase is
// over and the replicas routed every session alike, then reads the store's claims and
// judges every pass against them; it returns when every replica agreed
// with the store: the end of the first agreeing pass after the last one
// that did not. When the last pass does not agree with what the store
// says (a claim changed under it), it watches on, until timeout.
func (a *agreement) observe(ctx context.Context, res *agreeResult, t0 time.Time, over func(time.Time) bool, timeout time.Duration) (time.Duration, error) {
	deadline := t0.Add(timeout)
	var recs []passRecord
	for {
		for {
			p := a.turns(ctx)
			recs = append(recs, p)
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			if over(p.end) && consistent(p) {
				break
			}
			if p.end.After(deadline) {
				errs, unclaimed, moved := judge(p, a.keys, nil)
				return 0, fmt.Errorf("the replicas did not agree within %v (last pass: %d failed turns, %d unclaimed, %d other)",
					timeout, errs, unclaimed, moved)
			}
		}
		truth, err := a.readAll(ctx, deadline)
		if err != nil {
			return 0, err
		}
		var agreedAt time.Time
		bad, errs, unclaimed, moved := 0, 0, 0, 0
		for _, p := range recs {
			e, u, m := judge(p, a.keys, truth)
			if e+u+m == 0 {
				if agreedAt.IsZero() {
					agreedAt = p.end
				}
				continue
			}
			agreedAt = time.Time{}
			bad++
			errs, unclaimed, moved = errs+e, unclaimed+u, moved+m
		}
		if !agreedAt.IsZero() {
			for _, p := range recs {
				for i := range p.views {
					for k, v := range p.views[i] {
						res.slowest = max(res.slowest, v.took)
						if k >= len(a.keys)-res.fresh {
							res.slowestFresh = max(res.slowestFresh, v.took)
						}
					}
				}
			}
			res.passes += len(recs)
			res.badPasses += bad
			res.errs, res.unclaimed, res.moved = res.errs+errs, res.unclaimed+unclaimed, res.moved+moved
			return agreedAt.Sub(t0), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the replicas agreed among themselves but not with the store within %v", timeout)
		}
	}
}

// leader returns the index of the cluster's leader among its running
// members.
func leader(ctx context.Context, cl *embedded.Cluster) (int, error) {
	cli := cl.Client()
	for i := range cl.Size() {
		if !cl.Running(i) {
			continue
		}
		ep, err := cl.Endpoint(i)
		if err != nil {
			return 0, err
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := cli.Status(sctx, ep)
		cancel()
		if err != nil {
			continue
		}
		if st.Leader != 0 && st.Leader == st.Header.MemberId {
			return i, nil
		}
	}
	return 0, errors.New("no leader among the running members")
}

// agreeConfig is the agreement experiment's size.
type agreeConfig struct {
	replicas, sessions, fresh, restarts int
	downtime, settle, timeout           time.Duration
}

// measureAgreement claims sessions on every replica (over the three-member
// cl) and then, restarts times: stops a member (the leader in even rounds
// from 0, a follower in odd ones), begins the first turns of fresh new
// sessions on every replica at once, keeps the member down for downtime
// while every replica serves every session, restarts it, and times until
// every replica routes every session to its claim's target again.
func measureAgreement(ctx context.Context, cl *embedded.Cluster, cfg agreeConfig) ([]*agreeResult, error) {
	var stores []*timedStore
	r, err := newRig(ctx, cfg.replicas, timed(etcdOpener(cl, "agree/"), &stores))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	slowest := func() slowCall {
		var c slowCall
		for _, s := range stores {
			if x := s.take(); x.took > c.took {
				c = x
			}
		}
		return c
	}
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	obs, done, err := etcdOpener(cl, "agree/")(octx, "observer")
	cancel()
	if err != nil {
		return nil, err
	}
	defer done()
	a := &agreement{r: r, observer: obs, timeout: replica.DefaultStoreTimeout + time.Second}
	for i := range cfg.sessions {
		key := "session-" + strconv.Itoa(i)
		a.keys = append(a.keys, key)
		// Each session's claim is written by one replica; the others
		// adopt it in the first pass.
		if _, err := firstTurn(ctx, r.reps[i%cfg.replicas], key, false); err != nil {
			return nil, fmt.Errorf("claim %s: %w", key, err)
		}
	}
	var out []*agreeResult
	for round := range cfg.restarts {
		var warm agreeResult
		if _, err := a.observe(ctx, &warm, time.Now(), func(time.Time) bool { return true }, cfg.timeout); err != nil {
			return nil, fmt.Errorf("before restart %d: %w", round+1, err)
		}
		ld, err := leader(ctx, cl)
		if err != nil {
			return nil, err
		}
		res := &agreeResult{member: ld, leader: true, fresh: cfg.fresh}
		if round%2 == 1 {
			res.member, res.leader = (ld+1)%cl.Size(), false
		}
		before := sum(r.reps)
		slowest()
		t0 := time.Now()
		stop := inBackground(func() error { return cl.StopMember(res.member) })
		for j := range cfg.fresh {
			a.keys = append(a.keys, fmt.Sprintf("fresh-%d-%d", round, j))
		}
		res.afterStop, err = a.observe(ctx, res, t0, func(now time.Time) bool {
			return stop.finished() && now.Sub(t0) >= cfg.downtime
		}, cfg.timeout)
		<-stop.done
		if err == nil {
			err = stop.err
		}
		res.stopTook = stop.took
		if err != nil {
			_ = cl.RestartMember(ctx, res.member)
			return nil, fmt.Errorf("restart %d, member %d down: %w", round+1, res.member, err)
		}
		badStop := res.badPasses
		t1 := time.Now()
		restart := inBackground(func() error { return cl.RestartMember(ctx, res.member) })
		res.afterRestart, err = a.observe(ctx, res, t1, func(now time.Time) bool {
			return restart.finished() && now.Sub(t1) >= restart.took+cfg.settle
		}, cfg.timeout)
		<-restart.done
		if err == nil {
			err = restart.err
		}
		res.restartTook = restart.took
		res.badAfterRestart = res.badPasses - badStop
		if err != nil {
			return nil, fmt.Errorf("restart %d, member %d back: %w", round+1, res.member, err)
		}
		res.slowestCall = slowest()
		after := sum(r.reps)
		res.resets = after.Resets - before.Resets
		res.unclaimedPlaced = after.UnclaimedPlacements - before.UnclaimedPlacements
		res.reconciles = after.Reconciles - before.Reconciles
		res.reconcilesLost = after.ReconcilesLost - before.ReconcilesLost
		out = append(out, res)
	}
	return out, nil
}

// background is a call running in a goroutine of its own.
type background struct {
	done chan struct{}
	err  error         // f's error, once done is closed
	took time.Duration // how long f took, once done is closed
}

// inBackground runs f in a goroutine.
func inBackground(f func() error) *background {
	b := &background{done: make(chan struct{})}
	t0 := time.Now()
	go func() {
		defer close(b.done)
		b.err = f()
		b.took = time.Since(t0)
	}()
	return b
}

// finished reports whether f returned.
func (b *background) finished() bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

// sum adds the replicas' counters.
func sum(reps []*replica.Coordinator) replica.Stats {
	var s replica.Stats
	for _, c := range reps {
		x := c.Stats()
		s.Resets += x.Resets
		s.UnclaimedPlacements += x.UnclaimedPlacements
		s.Reconciles += x.Reconciles
		s.ReconcilesLost += x.ReconcilesLost
	}
	return s
}
