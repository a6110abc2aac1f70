package affinity

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/placementlab/placement/impl/placement"
	"pgregory.net/rapid"
)

// world is a random membership with candidates and constraints.
type world struct {
	ms        members
	cands     []Candidate
	allow     map[string]bool // nil: all
	avail     map[string]bool // nil: all
	pin       *Target
	affinity  *Target
	bound     bool
	mode      Mode
	workerIDs []string
}

func genWorld(t *rapid.T) world {
	w := world{ms: members{}}
	n := rapid.IntRange(1, 4).Draw(t, "workers")
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("w%d", i)
		w.workerIDs = append(w.workerIDs, id)
		if rapid.IntRange(0, 3).Draw(t, "member-"+id) > 0 {
			w.ms[id] = &member{Worker: Worker{ID: id, Identity: "x", FirstRank: rapid.IntRange(0, 2).Draw(t, "first"),
				Ranks: rapid.IntRange(0, 3).Draw(t, "ranks")}, failed: rapid.IntRange(0, 3).Draw(t, "failed") == 0}
		}
	}
	genTarget := func(label string) Target {
		id := rapid.SampledFrom(append(w.workerIDs, "stranger")).Draw(t, label+"-worker")
		if rapid.Bool().Draw(t, label+"-ranked") {
			return Ranked(id, rapid.IntRange(0, 5).Draw(t, label+"-rank"))
		}
		return WorkerOnly(id)
	}
	// Candidates: mostly the targets members serve, some strangers.
	var served []Target
	for _, id := range w.workerIDs {
		if m, ok := w.ms[id]; ok {
			if m.Ranks == 0 {
				served = append(served, WorkerOnly(id))
			}
			for r := m.FirstRank; r < m.FirstRank+m.Ranks; r++ {
				served = append(served, Ranked(id, r))
			}
		}
	}
	pick := func(label string) Target {
		if len(served) > 0 && rapid.IntRange(0, 3).Draw(t, label+"-served") > 0 {
			return rapid.SampledFrom(served).Draw(t, label)
		}
		return genTarget(label)
	}
	for i, k := 0, rapid.IntRange(1, 8).Draw(t, "cands"); i < k; i++ {
		w.cands = append(w.cands, Candidate{Target: pick("cand"), Overloaded: rapid.IntRange(0, 3).Draw(t, "overloaded") == 0})
	}
	set := func(label string) map[string]bool {
		if rapid.IntRange(0, 3).Draw(t, label+"-all") > 0 {
			return nil
		}
		m := map[string]bool{}
		for _, id := range w.workerIDs {
			m[id] = rapid.IntRange(0, 3).Draw(t, label+"-"+id) > 0
		}
		return m
	}
	w.allow, w.avail = set("allow"), set("avail")
	switch rapid.IntRange(0, 4).Draw(t, "target-kind") {
	case 1:
		p := pick("pin")
		w.pin = &p
	case 4:
		// A pin with the session's binding: mostly a worker-only pin on
		// the binding's worker (row P3's narrowing).
		a := pick("affinity")
		p := pick("pin")
		if rapid.IntRange(0, 3).Draw(t, "pin-agrees") > 0 {
			p = WorkerOnly(a.Worker)
		}
		w.pin, w.affinity, w.bound = &p, &a, true
	case 2, 3:
		a := pick("affinity")
		w.affinity, w.bound = &a, rapid.Bool().Draw(t, "bound")
	}
	w.mode = rapid.SampledFrom([]Mode{ModeSoft, ModeHard}).Draw(t, "mode")
	return w
}

func pred(m map[string]bool) func(string) bool {
	if m == nil {
		return nil
	}
	return func(id string) bool { return m[id] }
}

// reference is the rules of Eligibility written again, as sequential
// filters, independently of eligibility.go.
func reference(w world) ([]Candidate, error) {
	up := func(id string) bool {
		m, ok := w.ms[id]
		return ok && !m.failed && (w.avail == nil || w.avail[id])
	}
	serves := func(t Target) bool {
		m, ok := w.ms[t.Worker]
		return ok && (!t.HasRank || (t.Rank >= m.FirstRank && t.Rank < m.FirstRank+m.Ranks))
	}
	allowed := func(id string) bool { return w.allow == nil || w.allow[id] }
	accepts := func(b, d Target) bool { return b.Worker == d.Worker && (!b.HasRank || (d.HasRank && d.Rank == b.Rank)) }
	exact := func(t Target, bound bool) ([]Candidate, error) {
		if !up(t.Worker) {
			return nil, ErrPinnedWorkerGone
		}
		if !serves(t) {
			if bound {
				return nil, ErrPinnedWorkerGone
			}
			return nil, ErrInvalidPin
		}
		var match, out []Candidate
		for _, c := range w.cands {
			if accepts(t, c.Target) && serves(c.Target) && allowed(c.Target.Worker) {
				match = append(match, c)
			}
		}
		if len(match) == 0 {
			return nil, ErrPinnedWorkerNotAllowed
		}
		for _, c := range match {
			if !c.Overloaded {
				out = append(out, c)
			}
		}
		if len(out) == 0 {
			return nil, ErrPinnedWorkerOverloaded
		}
		return out, nil
	}
	agrees := func(p, b Target) bool {
		return p.Worker == b.Worker && (!p.HasRank || b.HasRank) && (!p.HasRank || p.Rank == b.Rank)
	}
	if w.pin != nil {
		out, err := exact(*w.pin, false)
		if err != nil || w.affinity == nil || !w.bound || !agrees(*w.pin, *w.affinity) {
			return out, err
		}
		var narrowed []Candidate
		for _, c := range out {
			if accepts(*w.affinity, c.Target) {
				narrowed = append(narrowed, c)
			}
		}
		switch {
		case len(narrowed) > 0:
			return narrowed, nil
		case w.mode == ModeHard:
			return exact(*w.affinity, true)
		}
		return out, nil
	}
	var full []Candidate
	for _, c := range w.cands {
		if up(c.Target.Worker) && serves(c.Target) && allowed(c.Target.Worker) {
			full = append(full, c)
		}
	}
	if w.affinity != nil {
		var narrowed []Candidate
		for _, c := range full {
			if accepts(*w.affinity, c.Target) && !c.Overloaded {
				narrowed = append(narrowed, c)
			}
		}
		if len(narrowed) > 0 {
			return narrowed, nil
		}
		if w.bound && w.mode == ModeHard {
			return exact(*w.affinity, true)
		}
	}
	if len(full) == 0 {
		return nil, ErrNoCandidates
	}
	return full, nil
}

// errClass is the sentinel an error matches (for comparing results).
func errClass(err error) error {
	for _, s := range []error{ErrPinnedWorkerGone, ErrPinnedWorkerNotAllowed, ErrPinnedWorkerOverloaded, ErrInvalidPin, ErrNoCandidates} {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}

// TestEligibilityOrderIndependent: whatever order the constraints are
// given in, Select returns the same candidates (or the same error), and
// that is what the rules (reference, written again as plain filters) say.
func TestEligibilityOrderIndependent(t *testing.T) {
	var narrowedToBinding, fellBack, errored int
	rapid.Check(t, func(t *rapid.T) {
		w := genWorld(t)
		steps := []func(Eligibility) Eligibility{
			func(e Eligibility) Eligibility { return e.WithAllow(pred(w.allow)) },
			func(e Eligibility) Eligibility { return e.WithAvailable(pred(w.avail)) },
			func(e Eligibility) Eligibility { return e.WithMode(w.mode) },
		}
		if w.pin != nil {
			steps = append(steps, func(e Eligibility) Eligibility { return e.WithPin(*w.pin) })
		}
		if w.affinity != nil {
			steps = append(steps, func(e Eligibility) Eligibility {
				if w.bound {
					return e.WithBinding(*w.affinity)
				}
				return e.WithHint(*w.affinity)
			})
		}
		want, wantErr := reference(w)
		for round := 0; round < 3; round++ {
			perm := rapid.Permutation(steps).Draw(t, "order")
			e := Eligibility{members: w.ms}
			for _, s := range perm {
				e = s(e)
			}
			got, err := e.Select(w.cands)
			if errClass(err) != errClass(wantErr) || !reflect.DeepEqual(got, want) {
				t.Fatalf("order %d: Select = %v, %v; the rules say %v, %v", round, got, err, want, wantErr)
			}
		}
		all := true
		for _, c := range want {
			all = all && w.affinity != nil && w.affinity.Accepts(c.Target)
		}
		switch {
		case wantErr != nil:
			errored++
		case w.affinity != nil && all:
			narrowedToBinding++
		case w.affinity != nil:
			fellBack++
		}
	})
	t.Logf("coverage: narrowed to the affinity target %d, fell back %d, errors %d", narrowedToBinding, fellBack, errored)
	if narrowedToBinding == 0 || fellBack == 0 || errored == 0 {
		t.Fatalf("coverage: narrowed %d, fell back %d, errors %d", narrowedToBinding, fellBack, errored)
	}
}

// TestEligibilityBindingComesBack: a session's binding narrows the
// candidates while its worker is available, not while it is unavailable
// (failed in the membership, or unavailable to the scheduler), and again
// once it is back (the same instance: nothing fenced), through every
// sequence of changes that leaves no request to move it meanwhile.
func TestEligibilityBindingComesBack(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l, err := New(Config{Clock: placement.NewManualClock(0), Mode: rapid.SampledFrom([]Mode{ModeSoft, ModeHard}).Draw(t, "mode")})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ranks := rapid.IntRange(0, 3).Draw(t, "ranks")
		var cands []Candidate
		for _, id := range []string{"a", "b", "c"} {
			if _, err := l.Join(Worker{ID: id, Identity: "i", Ranks: ranks}); err != nil {
				t.Fatal(err)
			}
			if ranks == 0 {
				cands = append(cands, Candidate{Target: WorkerOnly(id)})
			}
			for r := 0; r < ranks; r++ {
				cands = append(cands, Candidate{Target: Ranked(id, r)})
			}
		}
		bound := rapid.SampledFrom(cands).Draw(t, "bound").Target
		key, _ := Namespace{}.Session("s")
		turn, err := l.Start(context.Background(), Request{Session: key}) // a fresh session: nothing to wait for
		if err != nil {
			t.Fatal(err)
		}
		a, err := turn.Dispatch(bound)
		if err != nil || a.Complete(placement.Accepted) != nil {
			t.Fatalf("placing on %v: %v", bound, err)
		}
		turn.Done()
		schedAvail := map[string]bool{"a": true, "b": true, "c": true}
		failed := map[string]bool{}
		for i, n := 0, rapid.IntRange(1, 12).Draw(t, "changes"); i < n; i++ {
			id := rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "worker")
			switch rapid.IntRange(0, 3).Draw(t, "change") {
			case 0:
				if err := l.Fail(id); err != nil {
					t.Fatal(err)
				}
				failed[id] = true
			case 1:
				if k, err := l.Join(Worker{ID: id, Identity: "i", Ranks: ranks}); err != nil || k != Recovered {
					t.Fatalf("Join again: %v %v", k, err)
				}
				failed[id] = false
			case 2:
				schedAvail[id] = false
			case 3:
				schedAvail[id] = true
			}
			got, err := l.Eligibility().WithBinding(bound).WithAvailable(func(w string) bool { return schedAvail[w] }).Select(cands)
			availNow := schedAvail[bound.Worker] && !failed[bound.Worker]
			narrowed := err == nil && len(got) == 1 && got[0].Target == bound
			if availNow != narrowed {
				t.Fatalf("after change %d: bound %v available %v, Select = %v, %v", i, bound, availNow, got, err)
			}
			if q, ok := l.Query(key, PhaseDecode); ok != !failed[bound.Worker] || (ok && q != bound) {
				t.Fatalf("Query = %v, %v with the worker failed=%v", q, ok, failed[bound.Worker])
			}
		}
	})
}
