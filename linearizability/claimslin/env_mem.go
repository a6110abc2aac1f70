package claimslin

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/memstore"
	"github.com/placementlab/placement/impl/placement"
)

// memEnv is impl/claims/memstore on a manual clock.
type memEnv struct {
	b        *memstore.Backend
	clock    *placement.ManualClock
	injected []string // by the injector's goroutine
}

func newMemEnv(plan Plan) *memEnv {
	clock := placement.NewManualClock(0)
	ttl := time.Duration(plan.Params.TTL)
	if ttl == 0 {
		ttl = time.Hour
	}
	return &memEnv{b: memstore.NewBackend(memstore.Config{IdleTTL: ttl, Clock: clock}), clock: clock}
}

func (m *memEnv) open(_ context.Context, replica string) (claims.Store, error) {
	return m.b.Open(replica), nil
}

func (m *memEnv) callLimit() time.Duration { return CallLimit }

func (m *memEnv) faults() []string { return m.injected }

func (m *memEnv) owed() bool { return false } // its faults are drawn, none owed

func (m *memEnv) close() { _ = m.b.Close() }

// inject draws one of the plan's memstore faults: a replica's store
// unreachable for a while (its calls fail, changing nothing: unknown
// outcomes to the model), a replica's session lost (recorded), or the
// clock moved (recorded: claims idle for the TTL expire).
func (m *memEnv) inject(_ context.Context, r *recorder, rng *rand.Rand, plan Plan, live func() bool) {
	if len(plan.Faults) == 0 || !live() {
		return
	}
	victim := rng.IntN(plan.Replicas)
	fault := plan.Faults[rng.IntN(len(plan.Faults))]
	if has(plan.Faults, FaultClock) && rng.IntN(2) == 0 {
		fault = FaultClock // the clock moves most often
	}
	switch fault {
	case FaultUnavailable:
		if rng.IntN(2) != 0 {
			return
		}
		m.injected = append(m.injected, fault)
		m.b.SetUnavailable(replicaName(victim), true)
		time.Sleep(time.Duration(100+rng.IntN(1500)) * time.Microsecond)
		m.b.SetUnavailable(replicaName(victim), false)
	case FaultLoseSession:
		if rng.IntN(4) != 0 {
			return
		}
		endSession(r, victim, func() Output {
			m.b.LoseSession(replicaName(victim))
			return Output{}
		})
	case FaultClock:
		d := rng.Int64N(plan.Params.TTL*3/4 + 1)
		r.Do(Input{Op: OpAdvance, D: d}, func() Output {
			if err := m.clock.AdvanceBy(time.Duration(d)); err != nil {
				return Output{Err: ErrOther, Msg: err.Error()}
			}
			return Output{}
		})
	}
}

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
