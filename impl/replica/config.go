package replica

import (
	"fmt"
	"time"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/placement"
)

// Defaults a zero Config field means.
const (
	// DefaultStoreTimeout bounds one store call: 5 seconds.
	DefaultStoreTimeout = 5 * time.Second
	// DefaultMaxAttempts bounds the dispatches of one placing turn
	// (DefinitelyNotAccepted retries included): 3.
	DefaultMaxAttempts = 3
	// DefaultStoreRetry is how long, after a store call found the store
	// unreachable, new sessions are placed unclaimed without asking the
	// store again: 1 second (a Reset or any successful call ends it sooner).
	DefaultStoreRetry = time.Second
)

// Propose chooses the target of a session whose claim is absent or stale:
// members is the replica's view of the registered workers (sorted by
// name), tried the targets that refused this request already. It is
// called by the store's CreateOrGet only when the session has no current
// claim, and by the replica itself while the store is unreachable. A
// proposal of a worker that is not a member fails the turn with
// claims.ErrUnknownWorker.
type Propose func(members []claims.Member, tried []claims.Target) (claims.Target, error)

// Config configures a Coordinator. Store and Name are required; every
// other zero field means its default.
type Config struct {
	// Store is the claim store the replicas share (this replica's
	// handle). The Coordinator does not shut it down.
	Store claims.Store
	// Name is this replica's name in the store (its holds, its replica
	// id). Two live replicas never share a name.
	Name string
	// IdleTTL is the claims' idle time-to-live the replica works with.
	// Zero (the usual choice) means the store's own (Store.IdleTTL): one
	// source of truth. A value longer than the store's is refused (a
	// *ConfigError naming IdleTTL): the keepalive would touch too seldom,
	// and claims in use would expire in the store. A shorter one is kept
	// (the replica only touches more often and drops idle bindings
	// sooner). The local table keeps an idle binding IdleTTL -
	// TouchInterval, so the store's claim always outlives it by at least
	// TouchInterval.
	IdleTTL time.Duration
	// TouchInterval bounds the keepalive: every claim this replica holds
	// leases on is touched at least this often, and each claim used since
	// its last touch is touched once more within TouchInterval of its
	// last use (the keepalive's passes run every TouchInterval/2). Zero
	// means IdleTTL/3; at most IdleTTL/3.
	TouchInterval time.Duration
	// DispatchTimeout, ReserveTimeout, QuarantineTTL, MaxEntries,
	// MaxKeyBytes, Clock and ClockResolution pass to the local core (see
	// placement.Config).
	DispatchTimeout time.Duration
	ReserveTimeout  time.Duration
	QuarantineTTL   time.Duration
	MaxEntries      int
	MaxKeyBytes     int
	// Clock is a simulation host's manual clock: the core runs on it, and
	// no keepalive timer runs (call Coordinator.Tick after advancing it).
	Clock           *placement.ManualClock
	ClockResolution time.Duration
	// Observer, if set, is the local core's (placement.Config.Observer):
	// called on every state change of its cold paths, under the key's
	// lock (atomics only). The affinity layer counts expirations and
	// quarantines' ends with it.
	Observer func(placement.Event[claims.Target])
	// Propose is the default proposal (Start's propose when nil); nil
	// means the member with the fewest sessions bound to it on this
	// replica (LeastLoaded).
	Propose Propose
	// MaxAttempts bounds one placing turn's dispatches (DefaultMaxAttempts
	// if zero).
	MaxAttempts int
	// StoreTimeout bounds each store call (DefaultStoreTimeout if zero).
	StoreTimeout time.Duration
	// StoreRetry is how long new sessions are placed unclaimed without
	// asking the store after it was found unreachable (DefaultStoreRetry
	// if zero).
	StoreRetry time.Duration
}

// withDefaults validates cfg and fills its zero fields.
func (cfg Config) withDefaults() (Config, error) {
	switch {
	case cfg.Store == nil:
		return cfg, &ConfigError{"Store", "is required"}
	case cfg.Name == "":
		return cfg, &ConfigError{"Name", "is required"}
	case cfg.IdleTTL < 0 || cfg.TouchInterval < 0 || cfg.StoreTimeout < 0 || cfg.StoreRetry < 0:
		return cfg, &ConfigError{"IdleTTL, TouchInterval, StoreTimeout, StoreRetry", "must not be negative"}
	case cfg.MaxAttempts < 0:
		return cfg, &ConfigError{"MaxAttempts", "must not be negative"}
	}
	storeTTL := cfg.Store.IdleTTL()
	if mutant("IgnoresStoreTTL") {
		storeTTL = 0 // the replica's own default, whatever the store's
	}
	switch {
	case cfg.IdleTTL == 0 && storeTTL > 0:
		cfg.IdleTTL = storeTTL
	case cfg.IdleTTL == 0:
		cfg.IdleTTL = claims.DefaultIdleTTL
	case storeTTL > 0 && cfg.IdleTTL > storeTTL:
		return cfg, &ConfigError{"IdleTTL", fmt.Sprintf("%v is longer than the store's idle TTL %v: "+
			"claims in use would expire in the store (leave it zero to use the store's)", cfg.IdleTTL, storeTTL)}
	}
	if cfg.TouchInterval == 0 {
		cfg.TouchInterval = cfg.IdleTTL / 3
	}
	if cfg.TouchInterval <= 0 || cfg.TouchInterval > cfg.IdleTTL/3 {
		return cfg, &ConfigError{"TouchInterval", "must be positive and at most IdleTTL/3"}
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.StoreTimeout == 0 {
		cfg.StoreTimeout = DefaultStoreTimeout
	}
	if cfg.StoreRetry == 0 {
		cfg.StoreRetry = DefaultStoreRetry
	}
	return cfg, nil
}
