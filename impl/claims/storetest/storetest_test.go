package storetest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/memstore"
	"github.com/placementlab/placement/impl/claims/storetest"
	"github.com/placementlab/placement/impl/placement"
)

// brokenEnv names the broken backend TestHelperBroken runs the suite on.
const brokenEnv = "STORETEST_BROKEN"

// broken wraps a memstore handle with one deliberate contract violation.
type broken struct {
	claims.Store
	variant string
}

func (b *broken) Close(ctx context.Context, key string, rev int64, replica string) (claims.CloseResult, error) {
	if b.variant == "CloseIgnoresRev" {
		if c, ok, err := b.Store.Get(ctx, key); err == nil && ok {
			rev = c.Rev
		}
	}
	return b.Store.Close(ctx, key, rev, replica)
}

func (b *broken) Resolve(ctx context.Context, key string, attempt uint64, gen int64, accepted bool) (claims.Claim, bool, error) {
	if b.variant == "ResolveIgnoresGen" {
		if c, ok, err := b.Store.Get(ctx, key); err == nil && ok {
			gen = c.Gen
		}
	}
	c, ok, err := b.Store.Resolve(ctx, key, attempt, gen, accepted)
	var fe *claims.FencedError
	if b.variant == "ResolveSettlesStale" && errors.As(err, &fe) && fe.Stale {
		// Settles what the worker's new registration fenced: a not
		// accepted one is deleted, an accepted one reported written.
		if !accepted {
			_, cerr := b.Store.Close(ctx, key, fe.Current.Rev, "storetest-broken")
			return claims.Claim{}, false, cerr
		}
		c = fe.Current
		c.State, c.Attempt = claims.Bound, 0
		return c, true, nil
	}
	return c, ok, err
}

func (b *broken) Quarantine(ctx context.Context, key string, rev int64, attempt uint64, gen int64) (claims.Claim, error) {
	c, err := b.Store.Quarantine(ctx, key, rev, attempt, gen)
	return b.born(c), err
}

func (b *broken) Get(ctx context.Context, key string) (claims.Claim, bool, error) {
	c, ok, err := b.Store.Get(ctx, key)
	return b.born(c), ok, err
}

// born breaks c's lineage as the variant says.
func (b *broken) born(c claims.Claim) claims.Claim {
	switch b.variant {
	case "BornIsRev":
		c.Born = c.Rev // each revision its own lineage
	case "BornZero":
		c.Born = 0 // one lineage since the beginning of time
	}
	return c
}

func (b *broken) Hold(ctx context.Context, key string, rev int64, replica string) error {
	if b.variant == "HoldByLineage" {
		// Hold fenced as HoldLineage: a turn routed from a revision that
		// moved is not told so.
		_, err := claims.HoldLineage(ctx, b.Store, key, rev, replica)
		return err
	}
	return b.Store.Hold(ctx, key, rev, replica)
}

func (b *broken) Touch(ctx context.Context, key string, rev int64) error {
	if b.variant == "TouchCurrentOnly" {
		if c, ok, err := b.Store.Get(ctx, key); err == nil && ok && c.Rev != rev {
			return claims.ErrClaimMoved
		}
	}
	if b.variant == "TouchDoesNothing" {
		_, _, err := b.Store.Get(ctx, key)
		return err
	}
	return b.Store.Touch(ctx, key, rev)
}

func (b *broken) Unhold(ctx context.Context, key string, replica string) error {
	if b.variant == "UnholdIgnored" {
		return nil
	}
	return b.Store.Unhold(ctx, key, replica)
}

func (b *broken) CreateOrGet(ctx context.Context, key string, propose func() (claims.Target, error)) (claims.Claim, bool, error) {
	if b.variant == "LastWriterWins" && propose != nil {
		// Checks, proposes, then overwrites whatever is there: a racer
		// that lost still "creates".
		if c, ok, err := b.Store.Get(ctx, key); err != nil || ok {
			return c, false, err
		}
		t, err := propose()
		if err != nil {
			return claims.Claim{}, false, err
		}
		time.Sleep(time.Millisecond)
		if c, ok, err := b.Store.Get(ctx, key); err == nil && ok {
			_, _ = b.Store.Close(ctx, key, c.Rev, "storetest-broken")
		}
		return b.Store.CreateOrGet(ctx, key, func() (claims.Target, error) { return t, nil })
	}
	return b.Store.CreateOrGet(ctx, key, propose)
}

func (b *broken) Events(ctx context.Context) (<-chan claims.Event, error) {
	ch, err := b.Store.Events(ctx)
	if err != nil || b.variant != "NoFirstReset" {
		return ch, err
	}
	out := make(chan claims.Event)
	go func() {
		defer close(out)
		first := true
		for ev := range ch {
			if first && ev.Kind == claims.Reset {
				first = false
				continue
			}
			first = false
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func (b *broken) Register(ctx context.Context, worker, identity string) (claims.Member, error) {
	if b.variant == "RegisterAlwaysReputs" {
		// Writes every registration anew, as a plain Put: the same
		// identity gets a new generation (fencing every claim on the
		// worker) and moves to the caller's session.
		if err := b.Store.Deregister(ctx, worker); err != nil {
			return claims.Member{}, err
		}
	}
	if b.variant == "RegisterCheckThenPut" {
		// Idempotent, but the check and the write are two steps: racers
		// that all saw no registration each write one.
		ms, _, err := b.Store.Members(ctx)
		if err != nil {
			return claims.Member{}, err
		}
		for _, m := range ms {
			if m.Worker == worker && m.Identity == identity {
				return m, nil
			}
		}
		time.Sleep(5 * time.Millisecond) // widens the window between the two
		if err := b.Store.Deregister(ctx, worker); err != nil {
			return claims.Member{}, err
		}
	}
	return b.Store.Register(ctx, worker, identity)
}

func (b *broken) Move(ctx context.Context, key string, rev int64, target claims.Target) (claims.Claim, error) {
	switch b.variant {
	case "MoveUnfenced":
		// Moves whatever revision is current: a stale revision's move
		// wins, and so do both of two concurrent moves.
		if c, ok, err := b.Store.Get(ctx, key); err == nil && ok {
			rev = c.Rev
		}
	case "MoveOverQuarantine":
		// Settles a quarantine as accepted to move the claim.
		if c, ok, err := b.Store.Get(ctx, key); err == nil && ok && c.Rev == rev && c.State == claims.Quarantined {
			if r, ok, err := b.Store.Resolve(ctx, key, c.Attempt, c.Gen, true); err == nil && ok {
				rev = r.Rev
			}
		}
	}
	return b.Store.Move(ctx, key, rev, target)
}

func (b *broken) ReplicaID(ctx context.Context, replica string) (uint64, error) {
	if b.variant == "ReplicaIDPerName" {
		return uint64(len(replica)), nil
	}
	return b.Store.ReplicaID(ctx, replica)
}

// TestHelperBroken runs the suite on the memstore wrapped as
// STORETEST_BROKEN says (no variant: the memstore as is). It only runs
// as TestSuiteCatchesBrokenBackends' subprocess.
func TestHelperBroken(t *testing.T) {
	variant, ok := os.LookupEnv(brokenEnv)
	if !ok {
		t.Skip("runs as TestSuiteCatchesBrokenBackends' subprocess")
	}
	storetest.Run(t, storetest.Harness{
		EventTimeout: 500 * time.Millisecond, // the memstore delivers at once
		Parallel:     true,
		New: func(t *testing.T) (func(string) claims.Store, storetest.Controls) {
			clk := placement.NewManualClock(0)
			b := memstore.NewBackend(memstore.Config{IdleTTL: time.Minute, Clock: clk})
			t.Cleanup(func() { _ = b.Close() })
			open := func(replica string) claims.Store {
				return &broken{Store: b.Open(replica), variant: variant}
			}
			return open, storetest.Controls{
				IdleTTL: time.Minute,
				Advance: func(d time.Duration) {
					require.NoError(t, clk.AdvanceBy(d))
					b.Sweep()
				},
				Crash: b.Crash,
			}
		},
	})
}

// TestSuiteCatchesBrokenBackends: the suite fails each deliberately broken
// backend, in the subtest that checks what it breaks, and passes the
// memstore itself.
func TestSuiteCatchesBrokenBackends(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the suite in subprocesses")
	}
	for _, tc := range []struct{ variant, failing string }{
		{"", ""},
		{"CloseIgnoresRev", "FencedWrites"},
		{"ResolveIgnoresGen", "QuarantineResolve"},
		{"BornIsRev", "LineageHold"},
		{"BornZero", "LineageHold"},
		{"HoldByLineage", "LineageHold"},
		{"TouchCurrentOnly", "LineageHold"},
		{"ResolveSettlesStale", "StaleResolveFenced"},
		{"TouchDoesNothing", "Expiry"},
		{"UnholdIgnored", "DeferredClose"},
		{"LastWriterWins", "CreateOrGetRace"},
		{"NoFirstReset", "Events"},
		{"ReplicaIDPerName", "ReplicaID"},
		{"RegisterAlwaysReputs", "Members"},
		{"RegisterCheckThenPut", "RegisterRace"},
		{"MoveUnfenced", "MoveRefused"},
		{"MoveOverQuarantine", "MoveRefused"},
	} {
		t.Run("variant="+tc.variant, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBroken$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), brokenEnv+"="+tc.variant)
			out, err := cmd.CombinedOutput()
			if tc.failing == "" {
				require.NoError(t, err, "the memstore fails the suite:\n%s", out)
				require.Contains(t, string(out), "--- PASS: TestHelperBroken")
				return
			}
			require.Error(t, err, "the suite passed a backend broken by %s:\n%s", tc.variant, out)
			require.True(t, strings.Contains(string(out), "--- FAIL: TestHelperBroken/"+tc.failing+" "),
				"%s should fail subtest %s:\n%s", tc.variant, tc.failing, out)
		})
	}
}
