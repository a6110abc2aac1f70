package fuzz

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
)

// FuzzAffinityInputs: whatever a client puts in its headers and whatever a
// router passes as a worker or a pin, the affinity layer answers with a
// typed error or a working request, never a panic; an accepted session id
// is what ValidateSessionID accepts, the canonical header wins, and a key
// never shows the client's id.
func FuzzAffinityInputs(f *testing.F) {
	f.Add("conv-1", "", "true", "w1", "boot", 0, 2, "w1", 1, true, "acme")
	f.Add("", "alt id", "1", "", "", -1, 70000, "", -3, true, "")
	f.Add("a b", "ok", "no", "w\x00", "x", 5, 0, "w2", 0, false, "t")
	f.Add(strings.Repeat("x", 257), "y", "", "w1", "boot", 0, 0, "w1", 0, true, "\xff")
	l, err := affinity.New(affinity.Config{Clock: placement.NewManualClock(0), MaxEntries: 16})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { l.Close() })
	if _, err := l.Join(affinity.Worker{ID: "w1", Identity: "boot", Ranks: 2}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, session, alt, final, worker, identity string, first, ranks int, pinWorker string, pinRank int, hasPin bool, tenant string) {
		h := http.Header{}
		if session != "" {
			h.Set("X-Session-ID", session)
		}
		h.Set("X-Dynamo-Session-ID", alt)
		h.Set("X-Session-Final", final)
		req, err := l.RequestFromHeader(affinity.Namespace{Tenant: tenant}, h, affinity.PhaseDecode)
		want := session
		if session == "" {
			want = alt
		}
		wantErr := affinity.ValidateSessionID(want)
		switch {
		case (err == nil) != (wantErr == nil):
			t.Fatalf("RequestFromHeader(%q, %q) = %v; ValidateSessionID says %v", session, alt, err, wantErr)
		case err != nil && !errors.Is(err, affinity.ErrInvalidSessionID):
			t.Fatalf("RequestFromHeader: untyped error %v", err)
		case err == nil && len(want) >= 4 && strings.Contains(req.Session.String(), want):
			t.Fatalf("the key %s shows the id %q", req.Session, want)
		}
		if _, err := l.Join(affinity.Worker{ID: worker, Identity: identity, FirstRank: first, Ranks: ranks}); err != nil && !errors.Is(err, affinity.ErrInvalidWorker) {
			t.Fatalf("Join: untyped error %v", err)
		}
		req.Pin, req.HasPin = affinity.Target{Worker: pinWorker, Rank: pinRank, HasRank: pinRank >= 0}, hasPin
		turn, err := l.Start(context.Background(), req)
		if err != nil {
			// A pin to a worker that is not a member (or failed) is row
			// P2's *IneligibleError (ErrPinnedWorkerGone): the campaign's
			// fuzzing found this check refusing it (the crasher under
			// testdata/fuzz is kept, and must pass).
			var ie *affinity.IneligibleError
			if !errors.Is(err, affinity.ErrInvalidPin) && !errors.Is(err, affinity.ErrPinConflict) && !errors.Is(err, affinity.ErrQuarantined) &&
				!(errors.As(err, &ie) && errors.Is(err, affinity.ErrPinnedWorkerGone)) &&
				// A Pin without HasPin is refused, never silently ignored.
				!(errors.Is(err, placement.ErrInvalidArgument) && !req.HasPin && req.Pin != (affinity.Target{})) {
				t.Fatalf("Start: unexpected error %v", err)
			}
			return
		}
		defer turn.Done()
		cands := []affinity.Candidate{{Target: affinity.Ranked("w1", 0)}, {Target: affinity.Ranked("w1", 1)},
			{Target: affinity.Target{Worker: worker, Rank: first, HasRank: ranks > 0}}}
		el, err := turn.Eligible(cands, nil)
		if err != nil {
			var ie *affinity.IneligibleError
			if !errors.As(err, &ie) && !errors.Is(err, affinity.ErrNoCandidates) && !errors.Is(err, affinity.ErrInvalidPin) {
				t.Fatalf("Eligible: untyped error %v", err)
			}
			return
		}
		a, err := turn.Dispatch(el[0].Target)
		if err != nil {
			var ie *affinity.IneligibleError
			if !errors.As(err, &ie) && !errors.Is(err, affinity.ErrBindingMismatch) {
				t.Fatalf("Dispatch: untyped error %v", err)
			}
			return
		}
		if err := a.Complete(placement.Accepted); err != nil {
			t.Fatalf("Complete(Accepted) of %v: %v", a.Target(), err)
		}
	})
}
