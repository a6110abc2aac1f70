package affinity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/replica"
)

// Replicas runs a layer over a claims store that router replicas share
// (Config.Replicas): each phase's table is an impl/replica Coordinator
// (the local core in front of the store), so a session's binding is one
// claim every replica routes by. Store and Name are required; the other
// fields are replica.Config's (zero: their defaults). The core's settings
// (IdleTTL, ReserveTimeout, DispatchTimeout, QuarantineTTL, MaxEntries,
// Clock, ClockResolution) come from the layer's Config; FirstAttempt does
// not apply (attempt ids come from the store's replica id).
type Replicas struct {
	// Store is this replica's handle on the shared store. The layer does
	// not shut it down (its Shutdown releases this replica's holds and
	// the registrations it made).
	Store claims.Store
	// Name is this router replica's name: unique among the live replicas.
	// Each phase's coordinator is named Name/decode or Name/prefill.
	Name string
	// TouchInterval, StoreTimeout, StoreRetry and MaxAttempts pass to
	// each phase's replica.Config.
	TouchInterval, StoreTimeout, StoreRetry time.Duration
	MaxAttempts                             int
	// LegacyKeys names every session's claim by its hashed key, as
	// versions before the raw form of short keys did (see Key): for a
	// rolling upgrade from such a version, whose replicas share the store
	// with this one and would otherwise read a short session's claim
	// under another key (the session then bound twice, once per key
	// form, and the old claims left to expire). It costs a SHA-256 per
	// request; turn it off once no replica of the old version runs. With
	// it, Quarantined lists keys in their hashed form (Resolve and
	// EndSession take either form).
	LegacyKeys bool
}

// startTimeout bounds New's store calls over replicas (the replica id,
// the members, the event streams).
const startTimeout = 10 * time.Second

// newReplicas builds one replica Coordinator per phase.
func (l *Layer) newReplicas(cfg Config) error {
	r := cfg.Replicas
	if r.Store == nil {
		return &ConfigError{Field: "Replicas.Store", Reason: "nil store"}
	}
	if r.Name == "" {
		return &ConfigError{Field: "Replicas.Name", Reason: "empty replica name"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for p := range l.rep {
		c, err := replica.New(ctx, replica.Config{
			Store: r.Store, Name: r.Name + "/" + Phase(p).String(),
			IdleTTL: cfg.IdleTTL, TouchInterval: r.TouchInterval,
			DispatchTimeout: cfg.DispatchTimeout, ReserveTimeout: cfg.ReserveTimeout,
			QuarantineTTL: cfg.QuarantineTTL, MaxEntries: cfg.MaxEntries, MaxKeyBytes: MaxKeyBytes + 1,
			Clock: cfg.Clock, ClockResolution: cfg.ClockResolution,
			MaxAttempts: r.MaxAttempts, StoreTimeout: r.StoreTimeout, StoreRetry: r.StoreRetry,
			Observer: func(ev placement.Event[claims.Target]) { l.observeReplica(Phase(p), ev) },
		})
		if err != nil {
			for _, c := range l.rep[:p] {
				_ = c.Close()
			}
			var ce *replica.ConfigError
			if errors.As(err, &ce) {
				return &ConfigError{Field: ce.Field, Reason: ce.Reason}
			}
			return err
		}
		l.rep[p] = c
		l.door[p] = newDoorkeeper(c.MaxEntries())
	}
	return nil
}

// replicated reports whether the layer runs over replicas.
func (l *Layer) replicated() bool { return l.rep[0] != nil }

// phaseKey is a session's claim key in phase p: the phases' claims are
// apart in the store as their tables are.
func (l *Layer) phaseKey(k Key, p Phase) string {
	if l.cfg.Replicas.LegacyKeys {
		k, _ = k.hashed()
	}
	if p == PhasePrefill {
		return "p" + k.k
	}
	return "d" + k.k
}

// keyOf is phaseKey's inverse.
func keyOf(pk string) Key { return Key{k: pk[1:]} }

func toClaims(t Target) claims.Target {
	return claims.Target{Worker: t.Worker, Rank: t.Rank, HasRank: t.HasRank}
}

func fromClaims(t claims.Target) Target {
	return Target{Worker: t.Worker, Rank: t.Rank, HasRank: t.HasRank}
}

// registerAll registers w in the store through each phase's coordinator
// (the first writes; the second is idempotent and refreshes its view).
func (l *Layer) registerAll(w Worker) error {
	for _, c := range l.rep {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		_, err := c.Register(ctx, w.ID, w.Identity)
		cancel()
		if err != nil {
			return fmt.Errorf("affinity: register %s in the claims store: %w", w.ID, err)
		}
	}
	return nil
}

// deregisterAll removes worker's registration from the store.
func (l *Layer) deregisterAll(worker string) error {
	for i, c := range l.rep {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		var err error
		if i == 0 {
			err = c.Deregister(ctx, worker)
		} else {
			err = c.RefreshMembers(ctx)
		}
		cancel()
		if err != nil {
			return fmt.Errorf("affinity: deregister %s in the claims store: %w", worker, err)
		}
	}
	return nil
}

// replicaBound is Bound over replicas: the local table's bindings to t's
// targets.
func (l *Layer) replicaBound(p Phase, m *member, t Target) int {
	c := l.rep[p]
	if t.HasRank {
		return c.Bindings(toClaims(t))
	}
	n := c.Bindings(claims.Target{Worker: m.ID})
	for r := m.FirstRank; r < m.FirstRank+m.Ranks; r++ {
		n += c.Bindings(claims.Target{Worker: m.ID, Rank: r, HasRank: true})
	}
	return n
}

// replicaQuarantined is Quarantined over replicas: the quarantines each
// phase's replica caches (its own attempts', and those it read).
func (l *Layer) replicaQuarantined() []Quarantine {
	var out []Quarantine
	ms := l.mem.load()
	for p, c := range l.rep {
		now, ttl := c.Now(), c.QuarantineTTL()
		for _, q := range c.Quarantined() {
			since, until := q.Since, q.Until
			if until == 0 { // another replica's: its times are not known here
				since, until = now, now+ttl
			}
			id := ""
			if m, ok := ms[q.Target.Worker]; ok {
				id = m.Identity
			}
			_, final := l.finalQ[p].Load(q.Attempt)
			out = append(out, Quarantine{Key: keyOf(q.Key), Phase: Phase(p), Target: fromClaims(q.Target), Identity: id,
				Attempt: q.Attempt, Generation: uint64(q.Gen), Since: since, Expires: until, DispatchedAt: q.DispatchedAt, Final: final})
		}
	}
	return out
}

// replicaResolve is Resolve over replicas: the store's quarantine is
// settled (fenced by its attempt and generation, from any replica), and
// every replica sees the outcome. A final request's attempt is settled as
// not accepted: the session is over whatever became of it, so nothing is
// bound (F1).
func (l *Layer) replicaResolve(q Quarantine, res placement.Resolution) error {
	c := l.rep[q.Phase]
	_, final := l.finalQ[q.Phase].LoadAndDelete(q.Attempt)
	accepted := res == placement.ResolveAccepted && !final
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	err := c.Resolve(ctx, l.phaseKey(q.Key, q.Phase), q.Attempt, int64(q.Generation), accepted)
	switch {
	case err == nil && accepted:
		l.stats.binds.Add(1)
		l.stats.resolvedAccepted.Add(1)
	case err == nil:
		l.stats.resolvedNotAccepted.Add(1)
	case errors.Is(err, replica.ErrQuarantineOver):
		l.stats.staleAtBirth.Add(1)
		l.stats.quarantineDropped.Add(1)
		return fmt.Errorf("%w: %w", placement.ErrStaleAtBirth, err)
	case errors.Is(err, claims.ErrFenced):
		var fe *claims.FencedError
		if errors.As(err, &fe) && (!fe.Found || fe.Current.State != claims.Quarantined) {
			return fmt.Errorf("%w: %w", placement.ErrNotQuarantined, err)
		}
		return fmt.Errorf("%w: %w", placement.ErrFenced, err)
	}
	return err
}

// replicaQuery is Query over replicas.
func (l *Layer) replicaQuery(key Key, p Phase) (Target, bool) {
	ct, ok := l.rep[p].Query(l.phaseKey(key, p))
	if !ok {
		return Target{}, false
	}
	t := fromClaims(ct)
	m, ok := l.mem.load().current(t.Worker)
	if !ok || m.failed || !m.serves(t) {
		return Target{}, false
	}
	return t, true
}

// replicaEndSession is EndSession over replicas: each phase's claim is
// closed in the store (every replica's binding ends at its Delete).
func (l *Layer) replicaEndSession(key Key) (bool, error) {
	removed := false
	for p, c := range l.rep {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		ok, err := c.EndSession(ctx, l.phaseKey(key, Phase(p)))
		cancel()
		if err != nil {
			return removed, err
		}
		removed = removed || ok
	}
	return removed, nil
}

// Tick runs each phase's replica keepalive pass now (replica.Coordinator.
// Tick): with a manual Clock over replicas nothing runs it periodically,
// so a simulation host calls Tick after advancing the clock. Over the
// local core it does nothing.
func (l *Layer) Tick(ctx context.Context) {
	for _, c := range l.rep {
		if c != nil {
			c.Tick(ctx)
		}
	}
}

// Replica returns phase p's replica Coordinator when the layer runs over
// replicas (nil otherwise): its Stats say what the store did.
func (l *Layer) Replica(p Phase) *replica.Coordinator {
	if p >= numPhases {
		return nil
	}
	return l.rep[p]
}

// observeReplica counts what a phase's replica core did by itself: idle
// expirations and quarantines that ended by QuarantineTTL or a worker's
// new generation (under the key's lock: atomics only).
func (l *Layer) observeReplica(p Phase, ev placement.Event[claims.Target]) {
	s := &l.stats
	switch ev.Kind {
	case placement.EventQuarantineExpired:
		s.quarantineExpired.Add(1)
		l.finalQ[p].Delete(ev.Attempt)
	case placement.EventQuarantineDropped:
		s.quarantineDropped.Add(1)
		l.finalQ[p].Delete(ev.Attempt)
	case placement.EventExpired:
		s.expired.Add(1)
	}
}

// Registered reports whether worker is a member whose registration the
// layer's store holds with the member's identity (over replicas: as this
// replica's view of the store has it); over the local core, whether it is
// a member. A registration ends with the store session that wrote it: a
// health checker that finds a member up but not registered joins it again
// (router.Health does), so a worker whose registrar stopped is
// registered again.
func (l *Layer) Registered(worker string) bool {
	m, ok := l.mem.load().current(worker)
	if !ok {
		return false
	}
	if !l.replicated() {
		return true
	}
	for _, c := range l.rep {
		if !c.Registered(worker, m.Identity) {
			return false
		}
	}
	return true
}
