package claims

import (
	"context"
	"errors"
	"fmt"
)

// HoldLineage records that replica holds leases on key's claim by rev, a
// revision of the current claim's lineage (Born <= rev <= Rev; the
// spec's Reconnect: a replica that reconnects with requests in flight
// under a revision the claim has been rewritten from since — another
// replica quarantined it, resolved it, or deferred its close — holds it
// again, so no Close elsewhere deletes the claim under those requests).
// It returns the revision it held by: rev, or the lineage's current one.
// ErrClaimMoved means rev is not of the current lineage (no claim, a
// newer lineage, a revision from the future): the requests finish
// unheld.
//
// It is built on Store.Hold, which is fenced by the current revision: a
// Hold of rev, and when the claim has moved on, a Get and a Hold of the
// current revision if rev is of its lineage, again while the claim is
// rewritten in between. A Hold of the revision read succeeds only while
// that claim is current, so the hold never lands on a claim deleted or
// replaced since the Get. Any Store works; its other errors are returned
// as they are.
func HoldLineage(ctx context.Context, s Store, key string, rev int64, replica string) (int64, error) {
	if err := CheckHold(key, rev, replica); err != nil {
		return 0, err
	}
	return lineage(ctx, s, "hold-lineage", key, rev, func(cur int64) error { return s.Hold(ctx, key, cur, replica) })
}

// lineage applies op (a write fenced by the current revision) to key's
// claim by rev or, once rev is not current, by the current revision of
// rev's lineage, and returns the revision op succeeded with.
func lineage(ctx context.Context, s Store, name, key string, rev int64, op func(cur int64) error) (int64, error) {
	if ctx == nil {
		return 0, &ArgumentError{Op: name, What: "nil context"}
	}
	if s == nil {
		return 0, &ArgumentError{Op: name, What: "nil store"}
	}
	cur := rev
	for {
		err := op(cur)
		if err == nil {
			return cur, nil
		}
		if !errors.Is(err, ErrClaimMoved) {
			return 0, err
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		c, ok, gerr := s.Get(ctx, key)
		switch {
		case gerr != nil:
			return 0, gerr
		case !ok:
			return 0, fmt.Errorf("claims: %s %q rev %d: no claim: %w", name, key, rev, ErrClaimMoved)
		case !c.InLineage(rev):
			return 0, fmt.Errorf("claims: %s %q rev %d: not in the current lineage [%d, %d]: %w", name, key, rev, c.Born, c.Rev, ErrClaimMoved)
		case c.Rev == cur:
			// Refused by the revision that is current: a revision
			// never comes back, so this is the store's own answer
			// (an expired lease, say), not a race.
			return 0, err
		}
		cur = c.Rev
	}
}
