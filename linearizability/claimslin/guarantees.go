package claimslin

import (
	"fmt"
	"sort"

	"github.com/anishathalye/porcupine"
	"github.com/placementlab/placement/impl/claims"
)

// Route is one dispatch a replica routed: the session key, where it sent
// the request and under which revision of the session's claim, and when.
// Times are the run's (nanoseconds since its start).
type Route struct {
	Replica int   `json:"replica"`
	Key     int   `json:"key"`
	Target  Tgt   `json:"target"`
	Rev     int64 `json:"rev"` // 0: unclaimed (placed while the store was unreachable)
	// Gen is the claim's generation as the replica saw it (0: unknown;
	// impl/replica's Turn does not say).
	Gen int64 `json:"gen,omitempty"`
	// Call and Return bound the call that decided the route (the turn's
	// Start, or the Complete that moved a refused dispatch elsewhere):
	// the decision was made within them.
	Call   int64 `json:"call"`
	Return int64 `json:"return"`
	// LeaseFrom is when the turn surely held a local lease on the
	// session (a hit's Start returned; a placing turn's Complete(Accepted)
	// returned; 0: it never held one), End when it gave the lease up
	// (just before its Done was called; 0: never, or unknown).
	LeaseFrom int64 `json:"lease_from,omitempty"`
	End       int64 `json:"end,omitempty"`
	// EndRev is the revision the turn's record had when its Done was
	// called (a session placed unclaimed and reconciled since moves from
	// 0 to its claim's revision; 0: unknown).
	EndRev int64 `json:"end_rev,omitempty"`
	// Attempt: the turn dispatched a new attempt (a first turn's, or a
	// retry's), not a later turn on a bound session.
	Attempt bool `json:"attempt,omitempty"`
	// Final: the turn was the session's final request (Done(true)), and
	// DoneAt when its Done returned (a Close it made ran within
	// [End, DoneAt]).
	Final  bool  `json:"final,omitempty"`
	DoneAt int64 `json:"done_at,omitempty"`
}

// Processed is an event a replica processed, and a time by which it had
// (it may have been earlier): a Delete's eviction, or a Reset's.
type Processed struct {
	Replica int          `json:"replica"`
	Event   claims.Event `json:"event"`
	// Delivered is when the replica took it from its stream; By is when
	// its processing had surely ended (0: unknown).
	Delivered int64 `json:"delivered"`
	By        int64 `json:"by"`
}

// Violation is a guarantee of docs/claims.md that a run broke.
type Violation struct {
	Guarantee int    `json:"guarantee"` // 1 to 6
	What      string `json:"what"`
}

// String formats v as the failure line prints it.
func (v Violation) String() string {
	return fmt.Sprintf("guarantee %d broken: %s", v.Guarantee, v.What)
}

// heldLineage reports whether replica's Hold of a revision of key's
// lineage (the claim's revisions from the one that created it; the
// store's holds follow its rewrites) had reached the store (returned
// without error, so the store knows it as a holder) by at. impl/replica
// lets a turn take a lease before its Hold is made (by design, see the
// package doc): a hit on another lane while a placing turn's first Hold
// is in flight, or a placing turn a Reset overtook, whose Hold is queued
// for the keepalive. Until then the lease is not the store's to protect.
func heldLineage(h []porcupine.Operation, tl timeline, replica, key int, lineage, at int64) bool {
	for _, x := range h {
		xi, xo := x.Input.(Input), x.Output.(Output)
		if xi.Op == OpHold && xi.Client == replica && xi.Key == key && tl.lineage(key, xi.Rev) == lineage &&
			!xo.Unknown && xo.Err == ErrNone && x.Return <= at {
			return true
		}
	}
	return false
}

// firstUnder returns the call time of the first of routes under revision
// rev of key.
func firstUnder(routes []Route, key int, rev int64) int64 {
	first := int64(-1)
	for _, r := range routes {
		if r.Key == key && r.Rev == rev && (first < 0 || r.Call < first) {
			first = r.Call
		}
	}
	return first
}

// connected reports whether replica was connected to the store, with its
// hold on key standing, throughout [from, to] as far as the store history
// h shows: none of its calls in that interval found the store
// unreachable (or has an unknown outcome), its store session did not end,
// and it did not Unhold key.
func connected(h []porcupine.Operation, replica, key int, from, to int64) bool {
	for _, op := range h {
		in, o := op.Input.(Input), op.Output.(Output)
		if op.Return < from || op.Call > to {
			continue
		}
		switch {
		case (in.Op == OpEndSession || in.Op == OpDropRegistrations) && in.Replica == replica:
			return false
		case in.Client != replica:
		case o.Unknown || o.Err == ErrUnavailable:
			return false
		case in.Op == OpUnhold && in.Key == key:
			return false
		}
	}
	return true
}

// revision is what the store history says of a key's revision.
type revision struct {
	Claim
	known bool
	// seen is the earliest return of a call that returned it; endedBy the
	// earliest time it had surely ended (0: not known to have ended).
	seen, endedBy int64
}

// timeline is what a store history says of every key's revisions.
type timeline map[int]map[int64]*revision

// lineage returns the revision that created the lineage of revision rev
// of key k (rev itself when the history does not say).
func (tl timeline) lineage(k int, rev int64) int64 {
	if r := tl[k][rev]; r != nil && r.known && r.Born != 0 {
		return r.Born
	}
	return rev
}

func (tl timeline) rev(k int, rev int64) *revision {
	m := tl[k]
	if m == nil {
		m = map[int64]*revision{}
		tl[k] = m
	}
	r := m[rev]
	if r == nil {
		r = &revision{}
		m[rev] = r
	}
	return r
}

// ended records that revision rev of k had ended by t.
func (tl timeline) ended(k int, rev int64, t int64) {
	r := tl.rev(k, rev)
	if r.endedBy == 0 || t < r.endedBy {
		r.endedBy = t
	}
}

// buildTimeline reads the revisions of every key from a store history
// (the model's operations) and the events the replicas' streams delivered:
// each revision's claim, when it was first returned, and by when it had
// surely ended (a newer revision of the key returned, the key read
// absent after it was seen, a Close of it that deleted or deferred, a
// Delete of it delivered).
func buildTimeline(h []porcupine.Operation, delivered []Received) timeline {
	tl := timeline{}
	sorted := append([]porcupine.Operation(nil), h...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Return < sorted[j].Return })
	saw := func(k int, c Claim, t int64) {
		r := tl.rev(k, c.Rev)
		if !r.known {
			r.Claim, r.known, r.seen = c, true, t
		}
		r.seen = min(r.seen, t)
	}
	for _, op := range sorted {
		in, out := op.Input.(Input), op.Output.(Output)
		if out.Unknown || !in.Op.keyed() {
			continue
		}
		switch {
		case out.Has && (out.Err == ErrNone || out.Err == ErrFenced):
			saw(in.Key, out.Claim, op.Return)
		case in.Op == OpClose && (out.Close == CloseDeleted || out.Close == CloseDeferred):
			tl.ended(in.Key, in.Rev, op.Return)
		}
	}
	// A newer revision returned, or the key read absent, ends every older
	// one seen before it was called.
	for _, op := range sorted {
		in, out := op.Input.(Input), op.Output.(Output)
		if out.Unknown || !in.Op.keyed() {
			continue
		}
		absent := in.Op == OpGet && out.Err == ErrNone && !out.Has ||
			in.Op == OpResolve && out.Err == ErrNone && !out.Has ||
			in.Op == OpResolve && out.Err == ErrFenced && !out.Has
		if !(out.Has && (out.Err == ErrNone || out.Err == ErrFenced)) && !absent {
			continue
		}
		for rev, r := range tl[in.Key] {
			switch {
			case absent && r.known && r.seen < op.Call:
				tl.ended(in.Key, rev, op.Return)
			case !absent && rev < out.Claim.Rev:
				tl.ended(in.Key, rev, op.Return)
			}
		}
	}
	for _, ev := range delivered {
		if ev.Event.Kind == claims.Delete {
			if k := index(ev.Event.Key, "s%d"); k >= 0 {
				tl.ended(k, ev.Event.Rev, ev.At)
			}
		}
	}
	return tl
}

// CheckGuarantees checks the guarantees of docs/claims.md that a model
// of the store alone cannot see, on the replicas' observations of a run:
// the store history h (every call the replicas made, as the model's
// operations; its linearizability, and so guarantees 3 and 6 at the
// store, is Porcupine's to check), the events each replica's stream
// delivered (delivered), each route and when each event was processed.
//
//   - 1, routing: a route under revision r of a session's claim goes to
//     r's target, and is not decided after the replica processed the
//     Delete of r, or a Reset delivered after r had ended.
//   - 2, agreement: routes under the same revision agree on the target
//     and the generation (and with the store's claim).
//   - 3, fenced close: a replica closes only a revision one of its turns
//     routed under (or held when it ended), or that its own Hold fenced
//     in: never a newer claim it merely read.
//   - 4, quarantine everywhere: no new attempt is dispatched under a
//     quarantined revision.
//   - 6, no close under another's leases: a Close that deleted a claim
//     did not run wholly inside another replica's local lease on the
//     claim (any revision of its lineage) once its Hold had reached the
//     store (heldLineage), while that replica stayed connected
//     (connected); and a Close that a final turn's Done made did not run
//     wholly inside a lease of another turn of the closer's on the
//     session's claim (any revision of its lineage, whichever local
//     record held it: the session's last local lease ends first).
//
// Guarantee 5 (no expiry in use) is checked on the store history by the
// model (Params.HeldNoExpiry).
func CheckGuarantees(h []porcupine.Operation, delivered []Received, routes []Route, processed []Processed) []Violation {
	tl := buildTimeline(h, delivered)
	var out []Violation
	add := func(g int, format string, args ...any) {
		out = append(out, Violation{Guarantee: g, What: fmt.Sprintf(format, args...)})
	}
	byReplica := map[int][]Processed{}
	for _, p := range processed {
		byReplica[p.Replica] = append(byReplica[p.Replica], p)
	}
	routed := map[int][]Route{}
	for _, r := range routes {
		routed[r.Replica] = append(routed[r.Replica], r)
	}
	type agreed struct {
		t   Tgt
		gen int64
		r   Route
	}
	same := map[[2]int64]agreed{}
	for _, r := range routes {
		if r.Rev == 0 {
			continue // unclaimed: outside the guarantees until reconciled
		}
		rv := tl.rev(r.Key, r.Rev)
		if rv.known && (rv.T != r.Target || r.Gen != 0 && rv.Gen != r.Gen) {
			add(1, "r%d routed s%d to %s gen %d under rev %d [%d,%d], whose claim is %s", r.Replica, r.Key, r.Target, r.Gen, r.Rev, r.Call, r.Return, rv.Claim)
		}
		if a, ok := same[[2]int64{int64(r.Key), r.Rev}]; ok && (a.t != r.Target || a.gen != 0 && r.Gen != 0 && a.gen != r.Gen) {
			add(2, "r%d routed s%d rev %d to %s gen %d, r%d to %s gen %d", a.r.Replica, r.Key, r.Rev, a.t, a.gen, r.Replica, r.Target, r.Gen)
		} else if !ok {
			same[[2]int64{int64(r.Key), r.Rev}] = agreed{r.Target, r.Gen, r}
		}
		if r.Attempt && rv.known && rv.St == StQuarantined {
			add(4, "r%d dispatched a new attempt for s%d under its quarantined rev %d [%d,%d]", r.Replica, r.Key, r.Rev, r.Call, r.Return)
		}
		for _, p := range byReplica[r.Replica] {
			if p.By == 0 || p.By >= r.Call {
				continue
			}
			switch ev := p.Event; {
			case ev.Kind == claims.Delete && ev.Key == keyName(r.Key) && ev.Rev == r.Rev:
				add(1, "r%d routed s%d to %s under rev %d at [%d,%d], after it processed that revision's Delete (delivered %d, done by %d)",
					r.Replica, r.Key, r.Target, r.Rev, r.Call, r.Return, p.Delivered, p.By)
			case ev.Kind == claims.Reset && rv.endedBy > 0 && p.Delivered > rv.endedBy:
				add(1, "r%d routed s%d to %s under rev %d at [%d,%d], which had ended by %d, after it processed a Reset (%q, delivered %d, done by %d)",
					r.Replica, r.Key, r.Target, r.Rev, r.Call, r.Return, rv.endedBy, ev.Why, p.Delivered, p.By)
			default:
				continue
			}
			break
		}
	}
	for _, op := range h {
		in, o := op.Input.(Input), op.Output.(Output)
		if in.Op != OpClose {
			continue
		}
		// 3: a replica closes only a revision it held: one a turn of its
		// routed under (or held when it ended) before the Close, or one
		// its own Hold fenced in (a session reconciled after the store
		// came back is held under the claim its reconcile read).
		held := false
		for _, r := range routed[in.Client] {
			if r.Key == in.Key && (r.Rev == in.Rev || r.EndRev == in.Rev) && r.Return <= op.Call {
				held = true
				break
			}
		}
		for _, x := range h {
			xi, xo := x.Input.(Input), x.Output.(Output)
			if !held && xi.Op == OpHold && xi.Client == in.Client && xi.Key == in.Key && xi.Rev == in.Rev &&
				!xo.Unknown && xo.Err == ErrNone && x.Return <= op.Call {
				held = true
			}
		}
		if !held {
			add(3, "r%d closed s%d rev %d at [%d,%d] (%s), a revision none of its turns held and no Hold of its fenced in", in.Client, in.Key, in.Rev, op.Call, op.Return,
				Describe(in, o))
		}
		// 6: a Close that deleted the claim wholly inside another
		// replica's local lease on the revision that the store knew of;
		// or a Close a final turn's Done made (it ran within that Done)
		// wholly inside a lease of another turn of the closer's on the
		// session's claim (any revision of the lineage).
		if o.Unknown || o.Err != ErrNone || o.Close == CloseStale {
			continue
		}
		var final *Route
		for i, r := range routed[in.Client] {
			if r.Key == in.Key && r.Final && r.End > 0 && r.End <= op.Call && op.Return <= r.DoneAt && (r.Rev == in.Rev || r.EndRev == in.Rev) {
				final = &routed[in.Client][i]
				break
			}
		}
		lineage := tl.lineage(in.Key, in.Rev)
		for _, r := range routes {
			if r.Key != in.Key || r.LeaseFrom == 0 || r.LeaseFrom >= op.Call || r.End <= op.Return {
				continue
			}
			// Another replica's lease under any revision of the claim's
			// lineage (the store's holds follow its rewrites) counts when
			// that replica's Hold of the lineage had reached the store
			// before the Close (a lease taken while the Hold is still in
			// flight or queued is the one window impl/replica leaves by
			// design) and it stayed connected since it first routed under
			// the lease's revision (a replica cut off from the store, or
			// whose session was lost, or that gave its hold up, is not
			// protected). Resets it processed meanwhile do not matter:
			// impl/replica holds every leased claim again after one.
			if r.Replica != in.Client && (r.Rev == 0 || tl.lineage(in.Key, r.Rev) != lineage || o.Close != CloseDeleted ||
				!heldLineage(h, tl, r.Replica, in.Key, lineage, op.Call) ||
				!connected(h, r.Replica, in.Key, firstUnder(routed[r.Replica], in.Key, r.Rev), op.Return)) {
				continue
			}
			// The closer's own turns: every lease on the session's claim
			// counts, on any of its local records, under any revision of
			// the lineage (impl/replica counts leases per session).
			if r.Replica == in.Client && (final == nil || !(r.Rev == in.Rev || r.EndRev == in.Rev ||
				r.Rev != 0 && tl.lineage(in.Key, r.Rev) == lineage || r.EndRev != 0 && tl.lineage(in.Key, r.EndRev) == lineage)) {
				continue
			}
			whose := fmt.Sprintf("r%d", r.Replica)
			if r.Replica == in.Client {
				whose = fmt.Sprintf("another of its own turns (rev %d; the final turn [%d,%d] whose Done closed)", r.Rev, final.LeaseFrom, final.End)
			}
			add(6, "r%d's Close of s%d rev %d (%s) at [%d,%d] while %s held a local lease on it ([%d,%d])",
				in.Client, in.Key, in.Rev, closeNames[o.Close%4], op.Call, op.Return, whose, r.LeaseFrom, r.End)
			break
		}
	}
	return out
}

// CheckEvents checks the replicas' event streams against the store
// history h: each stream begins with a Reset (nothing is cached relative
// to it yet), and no call made after a Delete of revision r was delivered
// (to any replica) reads r as the key's current claim.
func CheckEvents(h []porcupine.Operation, events [][]Received) []string {
	var out []string
	ended := map[[2]int64]int64{} // (key, rev) → earliest delivery of its Delete
	for i, evs := range events {
		if len(evs) > 0 && evs[0].Event.Kind != claims.Reset {
			out = append(out, fmt.Sprintf("r%d's event stream began with %s, not a Reset", i, evs[0].Event.Kind))
		}
		for _, ev := range evs {
			if ev.Event.Kind != claims.Delete {
				continue
			}
			k := index(ev.Event.Key, "s%d")
			id := [2]int64{int64(k), ev.Event.Rev}
			if t, ok := ended[id]; !ok || ev.At < t {
				ended[id] = ev.At
			}
		}
	}
	for _, op := range h {
		in, o := op.Input.(Input), op.Output.(Output)
		if !in.Op.keyed() || o.Unknown || !o.Has || (o.Err != ErrNone && o.Err != ErrFenced && o.Err != ErrMoved && o.Err != ErrNotBound) {
			continue
		}
		if t, ok := ended[[2]int64{int64(in.Key), o.Claim.Rev}]; ok && t < op.Call {
			out = append(out, fmt.Sprintf("%s [%d,%d] read s%d rev %d as current after a Delete of it was delivered at %d",
				Describe(in, o), op.Call, op.Return, in.Key, o.Claim.Rev, t))
		}
	}
	return out
}
