package claimslin

import (
	"time"

	"github.com/anishathalye/porcupine"
)

// Transitions counts what the linearization of a run's history did to
// the claims, replayed through the model: what the calls' outputs alone do
// not show.
type Transitions struct {
	// UnholdDeleted: a deferred close's claim deleted by the last Unhold.
	UnholdDeleted int
	// SessionDeleted: a deferred close's claim deleted when its last
	// holder's session ended.
	SessionDeleted int
	// Expired: a claim expired as the clock moved.
	Expired int
	// StaleReplaced: CreateOrGet replaced a stale claim (its worker gone or
	// registered again).
	StaleReplaced int
	// Pinned: revisions or generations the model did not know (a deferred
	// close's Closing claim, an unknown outcome's write) that a later call
	// read.
	Pinned int
}

// Add adds o to t.
func (t *Transitions) Add(o Transitions) {
	t.UnholdDeleted += o.UnholdDeleted
	t.SessionDeleted += o.SessionDeleted
	t.Expired += o.Expired
	t.StaleReplaced += o.StaleReplaced
	t.Pinned += o.Pinned
}

// replay checks plan's history ops and, when it is linearizable, replays
// the linearization Porcupine found (one per key partition) through the
// model and counts its transitions. ok is false when the history is not
// linearizable (CheckRun reports it).
func replay(plan Plan, ops []porcupine.Operation) (t Transitions, ok bool) {
	p := plan.Params
	parts := Partition(ops)
	res, info := porcupine.CheckOperationsVerbose(NewModel(p), ops, 8*time.Second)
	if res != porcupine.Ok {
		return t, false
	}
	for i, lins := range info.PartialLinearizations() {
		if i >= len(parts) || len(lins) == 0 {
			continue
		}
		part := parts[i]
		states := []State{Init()}
		for _, id := range lins[0] {
			in, out := part[id].Input.(Input), part[id].Output.(Output)
			next := stepAll(p, states, in, out)
			if len(next) == 0 {
				return t, false
			}
			had := func(st uint8) bool {
				for _, s := range states {
					if s.C.St == st || st == 0xff && s.C.St != StNone {
						return true
					}
				}
				return false
			}
			gone := true
			for _, s := range next {
				gone = gone && s.C.St == StNone
			}
			switch {
			case in.Op == OpUnhold && had(StClosing) && gone:
				t.UnholdDeleted++
			case in.Op == OpEndSession && had(StClosing) && gone:
				t.SessionDeleted++
			case in.Op == OpAdvance && had(0xff) && gone:
				t.Expired++
			case in.Op == OpCreateOrGet && out.Created && had(0xff):
				t.StaleReplaced++
			}
			if unknownRev(states) && !unknownRev(next) {
				t.Pinned++
			}
			states = next
		}
	}
	return t, true
}

// unknownRev reports whether every state of s has a claim whose revision
// the model does not know.
func unknownRev(s []State) bool {
	for _, x := range s {
		if x.C.St == StNone || x.C.Rev.V > 0 {
			return false
		}
	}
	return len(s) > 0
}
