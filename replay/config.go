package replay

import (
	"fmt"
	"math"
	"time"
)

// Policy is a routing policy the replay compares.
type Policy uint8

const (
	// PlacementHard: the affinity layer in hard mode (a binding is exact;
	// a quarantined session waits).
	PlacementHard Policy = iota
	// PlacementSoft: the affinity layer in soft mode (a binding holds
	// while its target is not overloaded; a quarantined session is routed
	// unpinned).
	PlacementSoft
	// PlacementOff: the affinity layer in off mode: every request is
	// routed unpinned by placement's picker (least loaded).
	PlacementOff
	// RoundRobin: each request to the next target in turn.
	RoundRobin
	// LeastLoaded: each request to the target with the fewest requests in
	// flight, ties broken at random.
	LeastLoaded
	// ConsistentHash: the session's key on a hash ring with bounded loads
	// (no target above Config.BoundedLoadFactor times the mean load).
	ConsistentHash
	// StickyLeastLoaded: a session's first request to the least loaded
	// target, its later requests to the same target for as long as it is
	// up (no load check).
	StickyLeastLoaded
	// CacheAware: SGLang's cache-aware policy: the target with the
	// longest prefix match in the router's own index when it matches more
	// than 30% of the prompt, the least loaded otherwise or when the
	// targets are imbalanced.
	CacheAware
	// NumPolicies is the number of policies.
	NumPolicies
)

var policyNames = [NumPolicies]string{
	"placement-hard", "placement-soft", "placement-off", "round-robin", "least-loaded",
	"consistent-hash", "sticky-least-loaded", "cache-aware",
}

// String names p.
func (p Policy) String() string {
	if p < NumPolicies {
		return policyNames[p]
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// ParsePolicy returns the policy named s (as String names it).
func ParsePolicy(s string) (Policy, error) {
	for i, n := range policyNames {
		if n == s {
			return Policy(i), nil
		}
	}
	return 0, &ParamError{Field: "Policies", Reason: fmt.Sprintf("unknown policy %q", s)}
}

// AllPolicies returns every policy, in the report's order.
func AllPolicies() []Policy {
	out := make([]Policy, NumPolicies)
	for i := range out {
		out[i] = Policy(i)
	}
	return out
}

// placement reports whether p is one of the affinity layer's modes.
func (p Policy) placement() bool { return p <= PlacementOff }

// Loop is how a workload's requests are sent.
type Loop uint8

const (
	// Closed: a request with After is sent its think time after the last
	// of its dependencies completed (its response ended).
	Closed Loop = iota
	// Open: every request is sent at its timestamp, whatever happened to
	// the requests before it.
	Open
)

// String names l.
func (l Loop) String() string {
	if l == Open {
		return "open"
	}
	return "closed"
}

// ChangeKind is a membership change.
type ChangeKind uint8

const (
	// Fail: the worker's health check fails (it stops getting requests;
	// what it runs goes on, its cache is kept).
	Fail ChangeKind = iota + 1
	// Recover: a failed worker is back with the same identity.
	Recover
	// Restart: the worker restarts with a new identity: its cache is
	// cleared and what it was running is lost (clients retry).
	Restart
	// Leave: the worker leaves (it finishes what it runs, gets nothing
	// new).
	Leave
	// Join: a worker joins (a new one if Worker >= Config.Workers, or one
	// that left, with a new identity and an empty cache).
	Join
)

var changeNames = [...]string{"", "fail", "recover", "restart", "leave", "join"}

// String names k.
func (k ChangeKind) String() string {
	if int(k) < len(changeNames) && k > 0 {
		return changeNames[k]
	}
	return fmt.Sprintf("ChangeKind(%d)", uint8(k))
}

// Change is a membership change at a time of the simulation.
type Change struct {
	At     time.Duration
	Worker int
	Kind   ChangeKind
}

// Config configures a replay: the workers, the simulation's costs, the
// outcomes it injects and the policies it compares.
type Config struct {
	// Workers is how many workers are up at the start (w0 .. wN-1); Ranks
	// the data-parallel ranks of each, each rank a queue with its own
	// prefix cache.
	Workers, Ranks int
	// BlockTokens is the prefix cache's block size in tokens;
	// CacheBlocks each rank's cache capacity in blocks.
	BlockTokens, CacheBlocks int
	// PrefillRate is a rank's prefill speed in uncached tokens per second:
	// a request's prefill takes PrefillBase plus its uncached tokens over
	// PrefillRate, one request at a time per rank.
	PrefillRate float64
	PrefillBase time.Duration
	// DecodeTokenTime is the decode time per output token (decodes run
	// concurrently, batched, and do not hold the prefill queue).
	DecodeTokenTime time.Duration
	// Loop is closed or open.
	Loop Loop
	// AmbiguousProb is the probability that a dispatch's outcome is lost
	// (a timeout): the worker ran it with probability AmbiguousRan, and
	// the client sends the request again ClientTimeout after it.
	AmbiguousProb, AmbiguousRan float64
	ClientTimeout               time.Duration
	// RetryDelay is how long a client waits before sending again a request
	// that was refused (hard mode's quarantine or ineligible binding, no
	// worker) or whose stream its worker's restart cut.
	RetryDelay time.Duration
	// ResolverInterval is the period of the simulated resolver that
	// settles the placement layer's quarantines by asking the worker
	// whether the attempt arrived (0: none; quarantines end by
	// QuarantineTTL). It also runs the layer's reaper (ManualClock.Reclaim).
	ResolverInterval time.Duration
	// QuarantineTTL is the placement layer's quarantine bound; IdleTTL
	// how long its bindings outlive their last request (0: the core's
	// default, 30 minutes).
	QuarantineTTL, IdleTTL time.Duration
	// OverloadFactor and OverloadSlack: for placing a session, soft mode
	// marks a rank Overloaded (placement's picker then drops it) when its
	// waiting requests (queued, not yet prefilling: vLLM's
	// num_requests_waiting) exceed OverloadFactor x the mean over the up
	// ranks plus OverloadSlack. OverloadFactor 0 marks nothing.
	OverloadFactor float64
	OverloadSlack  int
	// CostSlack is placement's tolerance on its estimate of a request's
	// time to first token at a rank (the router's estimate of the rank's
	// prefill backlog plus the request's uncached tokens there, from its
	// prefix index, over PrefillRate): a session is placed only within
	// CostSlack of the cheapest rank, and in soft mode a bound request's
	// binding moves when its rank is more than CostSlack costlier than
	// the cheapest (see the package doc).
	CostSlack time.Duration
	// BoundedLoadFactor is consistent hashing's load bound (1.25).
	BoundedLoadFactor float64
	// Churn lists the membership changes, applied at their times in order.
	Churn []Change
	// Policies are compared side by side, in this order.
	Policies []Policy
	// MaxSimTime stops a simulation that has not finished (ErrStuck).
	MaxSimTime time.Duration
	// Seed seeds everything random in the simulation (the ambiguous
	// dispatches, random tie breaks, the replicas' load balancer).
	Seed uint64
	// Replicas configures RunReplicas (router replicas under each
	// consistency policy; cmd/replay -replicas); Run ignores it.
	Replicas ReplicaConfig
}

// DefaultConfig returns the default replay configuration: 8 workers of 2
// ranks, 64-token blocks, 8,192 blocks (524,288 tokens) of cache per rank,
// prefill at 10,000 tokens/s, 20 ms per output token, closed loop, 0.5%
// ambiguous dispatches, no churn (see DefaultChurn), every policy; for
// placement, 45-second idle bindings, a 2-second cost slack and soft
// mode's overload threshold at 1.25x the mean waiting requests plus 4
// (the package doc says why).
func DefaultConfig() Config {
	return Config{
		Workers: 8, Ranks: 2,
		BlockTokens: 64, CacheBlocks: 8192,
		PrefillRate: 10000, PrefillBase: 10 * time.Millisecond,
		DecodeTokenTime: 20 * time.Millisecond,
		Loop:            Closed,
		AmbiguousProb:   0.005, AmbiguousRan: 0.5,
		ClientTimeout:     30 * time.Second,
		RetryDelay:        time.Second,
		ResolverInterval:  5 * time.Second,
		QuarantineTTL:     2 * time.Minute,
		IdleTTL:           45 * time.Second,
		OverloadFactor:    1.25,
		OverloadSlack:     4,
		CostSlack:         2 * time.Second,
		BoundedLoadFactor: 1.25,
		Policies:          AllPolicies(),
		MaxSimTime:        48 * time.Hour,
		Seed:              1,
	}
}

// DefaultChurn returns the default membership changes over a workload of
// the given span: at 20% of it worker 2 fails and recovers a minute later
// (a flap), at 40% worker 4 restarts, at 60% a new worker joins (w<n>),
// at 80% worker 0 leaves. It needs at least 5 workers (nil otherwise).
func DefaultChurn(workers int, span time.Duration) []Change {
	if workers < 5 {
		return nil
	}
	at := func(f float64) time.Duration { return time.Duration(f * float64(span)).Truncate(time.Second) }
	return []Change{
		{At: at(0.2), Worker: 2, Kind: Fail},
		{At: at(0.2) + time.Minute, Worker: 2, Kind: Recover},
		{At: at(0.4), Worker: 4, Kind: Restart},
		{At: at(0.6), Worker: workers, Kind: Join},
		{At: at(0.8), Worker: 0, Kind: Leave},
	}
}

func (c *Config) validate() error {
	bad := func(field, reason string) error { return &ParamError{Field: field, Reason: reason} }
	switch {
	case c.Workers < 1 || c.Workers > 4096:
		return bad("Workers", "must be in [1, 4096]")
	case c.Ranks < 1 || c.Ranks > 256:
		return bad("Ranks", "must be in [1, 256]")
	case c.BlockTokens < 1 || c.BlockTokens > 1<<20:
		return bad("BlockTokens", "must be in [1, 2^20]")
	case c.CacheBlocks < 1 || c.CacheBlocks > 1<<26:
		return bad("CacheBlocks", "must be in [1, 2^26]")
	case !(c.PrefillRate > 0) || math.IsInf(c.PrefillRate, 0):
		return bad("PrefillRate", "must be positive and finite")
	case c.PrefillBase < 0 || c.DecodeTokenTime < 0:
		return bad("PrefillBase", "costs must not be negative")
	case c.Loop > Open:
		return bad("Loop", "must be Closed or Open")
	case !(c.AmbiguousProb >= 0 && c.AmbiguousProb < 1) || !(c.AmbiguousRan >= 0 && c.AmbiguousRan <= 1):
		return bad("AmbiguousProb", "must be in [0, 1) (AmbiguousRan in [0, 1])")
	case c.AmbiguousProb > 0 && c.ClientTimeout <= 0:
		return bad("ClientTimeout", "must be positive")
	case c.RetryDelay <= 0:
		return bad("RetryDelay", "must be positive")
	case c.ResolverInterval < 0:
		return bad("ResolverInterval", "must not be negative")
	case c.QuarantineTTL < time.Millisecond:
		return bad("QuarantineTTL", "must be at least 1ms")
	case c.IdleTTL != 0 && c.IdleTTL < time.Millisecond:
		return bad("IdleTTL", "must be 0 or at least 1ms")
	case !(c.OverloadFactor >= 0) || c.OverloadSlack < 0:
		return bad("OverloadFactor", "must not be negative")
	case c.CostSlack < 0:
		return bad("CostSlack", "must not be negative")
	case !(c.BoundedLoadFactor >= 1) || c.BoundedLoadFactor > 100:
		return bad("BoundedLoadFactor", "must be in [1, 100]")
	case len(c.Policies) == 0:
		return bad("Policies", "none given")
	case c.MaxSimTime <= 0:
		return bad("MaxSimTime", "must be positive")
	}
	for _, p := range c.Policies {
		if p >= NumPolicies {
			return bad("Policies", fmt.Sprintf("unknown policy %d", p))
		}
	}
	var last time.Duration
	for i, ch := range c.Churn {
		switch {
		case ch.At < last:
			return bad("Churn", fmt.Sprintf("change %d is before the one before it", i))
		case ch.Kind < Fail || ch.Kind > Join:
			return bad("Churn", fmt.Sprintf("change %d has an unknown kind", i))
		case ch.Worker < 0 || ch.Worker > c.Workers+len(c.Churn):
			return bad("Churn", fmt.Sprintf("change %d names worker %d", i, ch.Worker))
		}
		last = ch.At
	}
	return nil
}
