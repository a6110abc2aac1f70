package affinity_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
)

// TestFloodOfOneOffIDs: 100,000 fresh one-off session ids arrive at the
// anchor router's rate (18 a second) against a table of 1,000, with the
// anchor's one-hour TTL. Established sessions keep every binding and every
// turn is a hit; real new sessions (two turns) bind at their second turn,
// on their first turn's worker; no request gets an error; the table never
// fills, so no one is refused for capacity.
func TestFloodOfOneOffIDs(t *testing.T) {
	const (
		table       = 1000
		flood       = 100_000
		established = 200
	)
	clk := placement.NewManualClock(0)
	l, err := affinity.New(affinity.Config{Clock: clk, MaxEntries: table, IdleTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var all []affinity.Candidate
	for i := 0; i < 8; i++ {
		id := fmt.Sprintf("w%d", i)
		if _, err := l.Join(affinity.Worker{ID: id, Identity: "boot"}); err != nil {
			t.Fatal(err)
		}
		all = append(all, affinity.Candidate{Target: affinity.WorkerOnly(id)})
	}
	ns := affinity.Namespace{Model: "m"}
	next := 0
	// turn runs one request of id, dispatching to the first eligible
	// candidate after rotating the list (a scheduler that spreads load).
	turn := func(id string) (affinity.Target, affinity.Turn) {
		key, err := ns.Session(id)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := l.Start(waitCtx(t), affinity.Request{Session: key})
		if err != nil {
			t.Fatalf("Start(%s): %v", id, err)
		}
		defer tr.Done()
		next++
		rot := append(append([]affinity.Candidate{}, all[next%len(all):]...), all[:next%len(all)]...)
		cands, err := tr.Eligible(rot, nil)
		if err != nil {
			t.Fatalf("Eligible(%s): %v", id, err)
		}
		a, err := tr.Dispatch(cands[0].Target)
		if err != nil {
			t.Fatalf("Dispatch(%s): %v", id, err)
		}
		if err := a.Complete(placement.Accepted); err != nil {
			t.Fatalf("Complete(%s): %v", id, err)
		}
		return a.Target(), tr
	}

	home := map[string]affinity.Target{}
	for i := 0; i < established; i++ {
		id := fmt.Sprintf("established-%d", i)
		home[id], _ = turn(id)
	}
	tick := time.Second / 18
	var estTurns, estHits, newSessions, newBound, newOnFirstWorker int
	pendingSecond := map[string]affinity.Target{}
	for i := 0; i < flood; i++ {
		// Time moves by a tick per id; a reaper's sweep runs each 1,000
		// ids (about a minute), as the runtime clock's reaper would.
		step := clk.SetBy
		if i%1000 == 0 {
			step = clk.AdvanceBy
		}
		if err := step(tick); err != nil {
			t.Fatal(err)
		}
		turn(fmt.Sprintf("one-off-%d", i))
		if i%5400 == 0 { // every five minutes, each established session takes a turn
			for id, h := range home {
				got, _ := turn(id)
				estTurns++
				if got == h {
					estHits++
				}
			}
		}
		if i%1000 == 500 { // a real new session's first turn
			id := fmt.Sprintf("new-%d", i)
			pendingSecond[id], _ = turn(id)
			newSessions++
		}
		if i%1000 == 520 { // and its second, about a second later
			for id, first := range pendingSecond {
				got, _ := turn(id)
				key, _ := ns.Session(id)
				if q, ok := l.Query(key, affinity.PhaseDecode); ok {
					newBound++
					if q == first && got == first {
						newOnFirstWorker++
					}
				}
				delete(pendingSecond, id)
			}
		}
		if i%1000 == 0 {
			// Past the mark only sessions that showed a second turn bind.
			if s := l.Stats(); s.Live > table/2+newSessions {
				t.Fatalf("after %d one-off ids the table holds %d entries of %d: one-off ids bind past the mark", i, s.Live, table)
			}
		}
	}
	s := l.Stats()
	t.Logf("established: %d/%d turns hit; new sessions bound at turn 2: %d/%d (%d on their first turn's worker); unpinned by admission %d, by capacity %d; live %d",
		estHits, estTurns, newBound, newSessions, newOnFirstWorker, s.Unpinned[affinity.CauseAdmission], s.Unpinned[affinity.CauseCapacity], s.Live)
	if estHits != estTurns || estTurns < established*18 {
		t.Errorf("established sessions: %d of %d turns hit their binding", estHits, estTurns)
	}
	if newBound != newSessions || newOnFirstWorker != newSessions {
		t.Errorf("real new sessions: %d of %d bound at their second turn, %d on their first turn's worker", newBound, newSessions, newOnFirstWorker)
	}
	if s.Unpinned[affinity.CauseCapacity] != 0 || s.Unpinned[affinity.CauseAdmission] < flood*9/10 {
		t.Errorf("unpinned: capacity %d (want 0), admission %d (want most of %d)", s.Unpinned[affinity.CauseCapacity], s.Unpinned[affinity.CauseAdmission], flood)
	}
}
