package claimslin

import (
	"fmt"
	"hash/maphash"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Bounds of the model's state (fixed arrays keep State comparable).
const (
	MaxWorkers  = 3
	MaxKeys     = 4
	MaxReplicas = 8
)

// Op is a recorded public call of a claims.Store.
type Op uint8

// The operations.
const (
	OpCreateOrGet Op = iota + 1 // CreateOrGet(key, propose Target)
	OpGet                       // Get(key)
	OpHold                      // Hold(key, rev, replica)
	OpUnhold                    // Unhold(key, replica)
	OpClose                     // Close(key, rev, replica)
	OpQuarantine                // Quarantine(key, rev, attempt, gen)
	OpResolve                   // Resolve(key, attempt, gen, accepted)
	OpTouch                     // Touch(key, rev)
	OpRegister                  // Register(worker, identity)
	OpDeregister                // Deregister(worker)
	OpMembers                   // Members()
	// OpEndSession is the end of replica Replica's store session (its
	// handle shut down, and opened again: a restart; or memstore's
	// LoseSession): the holds it made are released, as Unhold would (a
	// Closing claim whose last holder it was is deleted). A session's end
	// is recorded as two operations over the same interval, OpEndSession
	// and OpDropRegistrations: etcd releases the holds one by one and then
	// revokes the session's lease, and another call may come between.
	OpEndSession
	// OpAdvance moves the store's manual clock by D: the claims whose idle
	// deadline it passes expire.
	OpAdvance
	// OpDropRegistrations is the other half of a session's end: the
	// registrations replica Replica's session made vanish.
	OpDropRegistrations
	// OpMove is Move(key, rev, target): a new lineage of the key's claim,
	// Bound to Target under its worker's generation, fenced by Rev (a
	// keyed call, numbered after the others so that saved histories keep
	// their numbers).
	OpMove
)

var opNames = [...]string{"?", "CreateOrGet", "Get", "Hold", "Unhold", "Close", "Quarantine", "Resolve", "Touch",
	"Register", "Deregister", "Members", "EndSession", "Advance", "DropRegistrations", "Move"}

// String names the operation as the reports print it.
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// keyed reports whether o is a call on one session key (else it goes to
// every partition).
func (o Op) keyed() bool { return o >= OpCreateOrGet && o <= OpTouch || o == OpMove }

// Tgt is a target: worker W (0 to MaxWorkers-1, named "w0", "w1", ...)
// and rank R, -1 for none.
type Tgt struct {
	W int8 `json:"w"`
	R int8 `json:"r"`
}

// String formats the target as claims.Target does.
func (t Tgt) String() string {
	if t.R < 0 {
		return fmt.Sprintf("w%d", t.W)
	}
	return fmt.Sprintf("w%d/%d", t.W, t.R)
}

// Claim states (claims.State).
const (
	StNone        uint8 = 0
	StBound       uint8 = 1
	StQuarantined uint8 = 2
	StClosing     uint8 = 3
)

var stNames = [...]string{"none", "bound", "quarantined", "closing"}

// Claim is one revision of a key's claim as a call returned it.
type Claim struct {
	Rev int64  `json:"rev"`
	T   Tgt    `json:"t"`
	Gen int64  `json:"gen"`
	St  uint8  `json:"st"`
	Att uint64 `json:"att,omitempty"`
	// Born is the revision that created the claim's lineage (0: not
	// recorded, in histories saved before stores returned it).
	Born int64 `json:"born,omitempty"`
}

// String formats the claim.
func (c Claim) String() string {
	s := fmt.Sprintf("{rev %d %s gen %d %s", c.Rev, c.T, c.Gen, stNames[c.St%4])
	if c.St == StQuarantined {
		s += fmt.Sprintf(" att %#x", c.Att)
	}
	return s + "}"
}

// Input is one call: what the test asked for.
type Input struct {
	Op Op `json:"op"`
	// Client is the replica that made the call (its index: replica
	// "r<Client>").
	Client int `json:"client"`
	// Key: the session key's index ("s<Key>").
	Key int `json:"key,omitempty"`
	// Target: CreateOrGet's proposal, Move's target.
	Target Tgt `json:"target,omitzero"`
	// Rev: the revision Hold, Close, Quarantine, Move and Touch are
	// fenced by.
	Rev int64 `json:"rev,omitempty"`
	// Attempt and Gen: Quarantine's and Resolve's attempt and generation;
	// Accepted: Resolve's outcome.
	Attempt  uint64 `json:"attempt,omitempty"`
	Gen      int64  `json:"gen,omitempty"`
	Accepted bool   `json:"accepted,omitempty"`
	// Worker and Ident: Register's and Deregister's worker, Register's
	// identity ("a" or "b").
	Worker int `json:"worker,omitempty"`
	Ident  int `json:"ident,omitempty"`
	// Replica: the replica whose session EndSession ends.
	Replica int `json:"replica,omitempty"`
	// D: how far Advance moves the clock (nanoseconds).
	D int64 `json:"d,omitempty"`
}

// ErrKind classifies an error a call returned.
type ErrKind uint8

// The error kinds.
const (
	ErrNone          ErrKind = iota
	ErrMoved                 // claims.ErrClaimMoved
	ErrFenced                // claims.ErrFenced (a *FencedError)
	ErrUnknownWorker         // claims.ErrUnknownWorker
	ErrUnavailable           // claims.ErrUnavailable: the outcome is unknown
	ErrOther                 // anything else: never legal
	// ErrProposal: CreateOrGet returned its propose's error (nothing
	// written; propose is called only when the key has no current claim).
	ErrProposal
	// ErrStoreClosed: claims.ErrClosed, a call on a handle shut down
	// (nothing done).
	ErrStoreClosed
	// ErrNotBound: claims.ErrNotBound, a Move from the current revision
	// of a claim that is not Bound (a *MoveError; nothing done).
	ErrNotBound
)

var errNames = [...]string{"nil", "ClaimMoved", "Fenced", "UnknownWorker", "Unavailable", "Other", "Proposal", "Closed", "NotBound"}

// String names the error kind as the reports print it.
func (e ErrKind) String() string {
	if int(e) < len(errNames) {
		return errNames[e]
	}
	return fmt.Sprintf("ErrKind(%d)", uint8(e))
}

// Close results (claims.CloseResult).
const (
	CloseDeleted  = 1
	CloseDeferred = 2
	CloseStale    = 3
)

var closeNames = [...]string{"?", "deleted", "deferred", "stale"}

// Member is a registered worker as Register or Members returned it.
type Member struct {
	Gen   int64 `json:"gen"`
	Ident int   `json:"ident"`
}

// Output is what a call returned.
type Output struct {
	Err ErrKind `json:"err,omitempty"`
	// Unknown: the call failed with ErrUnavailable; it may or may not have
	// taken effect (its Return is the end of the history).
	Unknown bool `json:"unknown,omitempty"`
	// Msg is the error's text (not compared).
	Msg string `json:"msg,omitempty"`
	// Has and Claim: the claim CreateOrGet, Get, Quarantine, Resolve
	// (Accepted) and Move returned; with ErrFenced, the *FencedError's
	// Current (Has: Found); with Move's ErrMoved and ErrNotBound, the
	// *MoveError's Current (Has: Found).
	Has     bool  `json:"has,omitempty"`
	Claim   Claim `json:"claim,omitzero"`
	Created bool  `json:"created,omitempty"`
	// Close: Close's result.
	Close int `json:"close,omitempty"`
	// Gen: Register's generation.
	Gen int64 `json:"gen,omitempty"`
	// Members: what Members returned, by worker (Gen 0: not registered),
	// and Rev the revision it read at.
	Members [MaxWorkers]Member `json:"members,omitzero"`
	Rev     int64              `json:"rev,omitempty"`
}

// val is a revision or generation the model may not know yet: V when
// positive, else unknown and above Lo.
type val struct {
	V, Lo int64
}

func known(v int64) val { return val{V: v} }

func (v val) String() string {
	if v.V > 0 {
		return fmt.Sprint(v.V)
	}
	return fmt.Sprintf("?>%d", v.Lo)
}

// pin makes v x if it can be x: true when v is x or unknown and below x.
func (v *val) pin(x int64) bool {
	if v.V > 0 {
		return v.V == x
	}
	if x <= v.Lo {
		return false
	}
	v.V = x
	return true
}

// A claim's generation is known (Gen.V), linked (the unknown generation
// of its worker's current registration, made by a registration whose
// outcome is unknown) or old (an unknown generation of an earlier
// registration: stale).
const (
	genKnown  uint8 = 0
	genLinked uint8 = 1
	genOld    uint8 = 2
)

// claimState is the key's claim in the model (St StNone: none).
type claimState struct {
	St      uint8
	Rev     val
	T       Tgt
	Gen     val
	GenMode uint8
	Att     uint64
	// Born is the revision that created the claim's lineage, when it was
	// rewritten since (Rewritten); else the lineage is Rev alone.
	Born      val
	Rewritten bool
}

// memberState is a worker's registration in the model.
type memberState struct {
	On    bool
	Ident int8
	By    int8 // the replica whose store session registered it
	Gen   val
}

// State is the model's state for one key's partition: the key's claim
// and when it was last written or touched (its idle expiry counts from
// then), the replicas holding it (a bit per replica), the
// workers' registrations, the largest revision linearized so far (every
// later write's is above it) and the manual clock's reading. States are
// comparable values; steps return new ones.
type State struct {
	C       claimState
	Used    int64 // when the claim was last written or touched
	Holders uint8
	M       [MaxWorkers]memberState
	MaxRev  int64
	Now     int64
}

// Params are what the model needs to know of a run's store: TTL is its
// IdleTTL in nanoseconds when the run drives a manual clock (OpAdvance),
// else 0 (nothing expires within a run).
type Params struct {
	TTL int64 `json:"ttl,omitempty"`
	// HeldNoExpiry checks guarantee 5 on the store history of replicas
	// that keep the claims they hold alive (impl/replica's coordinators,
	// every one connected): a Bound or Quarantined claim some replica
	// holds (Hold, not yet Unhold) must not expire while its worker's
	// generation is current. A Closing claim may (the session's final
	// request ended, no turn routes under it any more, and its expiry
	// ends it as its last Unhold would), and so may a stale one (its
	// worker left or restarted: every replica fences it, and CreateOrGet
	// replaces it). The store alone does not promise it (it expires an
	// idle claim whoever holds it).
	HeldNoExpiry bool `json:"held_no_expiry,omitempty"`
}

// Init is the model's initial state: no claim, no workers.
func Init() State { return State{} }

func (s *State) bump(x int64) { s.MaxRev = max(s.MaxRev, x) }

// newRev checks that x can be a new write's revision and records it.
func (s *State) newRev(x int64) bool {
	if x <= s.MaxRev {
		return false
	}
	s.MaxRev = x
	return true
}

// pinRev pins the claim's revision to x.
func (s *State) pinRev(x int64) bool {
	if !s.C.Rev.pin(x) {
		return false
	}
	s.bump(x)
	return true
}

// pinGen pins the claim's generation to g (and its worker's, when linked).
func (s *State) pinGen(g int64) bool {
	switch s.C.GenMode {
	case genLinked:
		m := &s.M[s.C.T.W]
		if !m.Gen.pin(g) {
			return false
		}
		s.bump(g)
	case genOld:
		if g <= s.C.Gen.Lo {
			return false
		}
		if m := s.M[s.C.T.W]; m.On && m.Gen.V == g {
			return false // an old registration's generation is not the current one's
		}
	}
	if s.C.GenMode == genKnown {
		return s.C.Gen.V == g
	}
	s.C.Gen, s.C.GenMode = known(g), genKnown
	return true
}

// matchClaim returns the states in which the key's claim is c (pinning
// what the model did not know), none if it cannot be.
func matchClaim(s State, c Claim) []State {
	if s.C.St == StNone || s.C.St != c.St || s.C.T != c.T || s.C.Att != c.Att {
		return nil
	}
	if !s.pinRev(c.Rev) || !s.pinGen(c.Gen) || !s.pinBorn(c) {
		return nil
	}
	return []State{s}
}

// pinBorn pins the claim's lineage to c's Born (when c has one): a claim
// not rewritten was born at its revision, a rewritten one before it.
func (s *State) pinBorn(c Claim) bool {
	switch {
	case c.Born == 0:
		return true
	case !s.C.Rewritten:
		return c.Born == c.Rev
	}
	return c.Born < c.Rev && s.C.Born.pin(c.Born)
}

// lineageFence returns the states in which rev is a revision of the
// current claim's lineage (Born <= rev <= Rev: Touch is fenced in) and
// those in which it is not. A claim not rewritten is its
// revision alone (fenceRev); with a revision or a birth not known yet,
// either may be (the model does not pin an inequality).
func lineageFence(s State, rev int64) (ok, moved []State) {
	if s.C.St == StNone || !s.C.Rewritten {
		return fenceRev(s, rev)
	}
	b, r := s.C.Born, s.C.Rev
	in := (b.V == 0 && rev > b.Lo || b.V > 0 && b.V <= rev) && (r.V == 0 || rev <= r.V)
	out := b.V == 0 || rev < b.V || r.V == 0 || rev > r.V
	return when(in, s), when(out, s)
}

// fenceRev returns the states in which the claim's revision is rev (ok)
// and those in which it is not (moved).
func fenceRev(s State, rev int64) (ok, moved []State) {
	switch {
	case s.C.St == StNone:
		return nil, []State{s}
	case s.C.Rev.V > 0:
		if s.C.Rev.V == rev {
			return []State{s}, nil
		}
		return nil, []State{s}
	}
	moved = []State{s}
	if s.pinRev(rev) {
		ok = []State{s}
	}
	return ok, moved
}

// staleness returns the states in which the claim is stale (its worker is
// not registered, or under another generation) and those in which it is
// current.
func staleness(s State) (stale, fresh []State) {
	m := s.M[s.C.T.W]
	switch {
	case !m.On:
		return []State{s}, nil
	case s.C.GenMode == genLinked:
		return nil, []State{s}
	case s.C.GenMode == genOld:
		return []State{s}, nil
	case m.Gen.V > 0:
		if m.Gen.V == s.C.Gen.V {
			return nil, []State{s}
		}
		return []State{s}, nil
	}
	stale = []State{s}
	if s.M[s.C.T.W].Gen.pin(s.C.Gen.V) {
		fresh = []State{s}
	}
	return stale, fresh
}

// unlink makes a claim linked to worker w's registration old (the
// registration is changing).
func (s *State) unlink(w int) {
	if s.C.St != StNone && int(s.C.T.W) == w && s.C.GenMode == genLinked {
		s.C.GenMode, s.C.Gen = genOld, val{Lo: s.M[w].Gen.Lo}
	}
}

// write replaces the key's claim with a new revision (known, or unknown
// when rev is 0) of state st: a new lineage when there was no claim (the
// caller cleared it), else a rewrite of the lineage (Born kept).
func (s *State) write(rev int64, st uint8, att uint64) bool {
	if s.C.St != StNone && !s.C.Rewritten {
		// A rewrite of the lineage: it was born at the revision it had.
		s.C.Born, s.C.Rewritten = s.C.Rev, true
	}
	if rev == 0 {
		s.C.Rev = val{Lo: s.MaxRev}
	} else if !s.newRev(rev) {
		return false
	} else {
		s.C.Rev = known(rev)
	}
	s.C.St, s.C.Att = st, att
	s.Used = s.Now
	return true
}

// remove deletes the key's claim; the holds on the key go with it.
func (s *State) remove() {
	s.C, s.Holders = claimState{}, 0
}

func bit(client int) uint8 { return 1 << uint(client) }

// Step returns every state the call in/out can leave s in (none: the
// model refuses the call in s), for a store with params p. An unknown
// outcome (out.Unknown) leaves s as it was or as any successful call
// would have left it.
func Step(p Params, s State, in Input, out Output) []State {
	if out.Err == ErrOther || in.Client < 0 || in.Client >= MaxReplicas+1 {
		return nil
	}
	if in.Op.keyed() && in.Client >= MaxReplicas {
		return nil // the fault injector makes no claim calls
	}
	if out.Unknown {
		return append([]State{s}, effects(p, s, in)...)
	}
	if out.Err == ErrUnavailable || out.Err == ErrStoreClosed {
		return []State{s} // a store that says an unreachable call changes nothing (memstore), a closed handle
	}
	switch in.Op {
	case OpCreateOrGet:
		return stepCreateOrGet(s, in, out)
	case OpGet:
		if s.C.St == StNone {
			return when(!out.Has && out.Err == ErrNone, s)
		}
		if !out.Has || out.Err != ErrNone {
			return nil
		}
		return matchClaim(s, out.Claim)
	case OpHold:
		ok, moved := fenceRev(s, in.Rev)
		if out.Err == ErrMoved {
			return moved
		}
		if out.Err != ErrNone {
			return nil
		}
		for i := range ok {
			ok[i].Holders |= bit(in.Client)
		}
		return ok
	case OpUnhold:
		return when(out.Err == ErrNone, unhold(s, in.Client))
	case OpClose:
		if out.Err != ErrNone {
			return nil
		}
		ok, moved := fenceRev(s, in.Rev)
		if out.Close == CloseStale {
			return moved
		}
		var next []State
		for _, n := range ok {
			if c, res := closeEffect(n, in.Client); res == out.Close {
				next = append(next, c)
			}
		}
		return next
	case OpQuarantine:
		ok, moved := quarantineFence(s, in)
		if out.Err == ErrMoved {
			return moved
		}
		if out.Err != ErrNone || !out.Has {
			return nil
		}
		var next []State
		for _, n := range ok {
			c := out.Claim
			if c.St == StQuarantined && c.Att == in.Attempt && c.T == n.C.T && c.Gen == in.Gen && n.write(c.Rev, StQuarantined, in.Attempt) && n.pinBorn(c) {
				next = append(next, n)
			}
		}
		return next
	case OpResolve:
		return stepResolve(s, in, out)
	case OpMove:
		return stepMove(s, in, out)
	case OpTouch:
		ok, moved := lineageFence(s, in.Rev)
		if out.Err == ErrMoved {
			return moved
		}
		if out.Err != ErrNone {
			return nil
		}
		for i := range ok {
			ok[i].Used = ok[i].Now
		}
		return ok
	case OpRegister:
		if out.Err != ErrNone || in.Worker < 0 || in.Worker >= MaxWorkers {
			return nil
		}
		if m := s.M[in.Worker]; m.On && int(m.Ident) == in.Ident {
			// The same identity: idempotent, the registration it has.
			n := s
			if !n.M[in.Worker].Gen.pin(out.Gen) {
				return nil
			}
			n.bump(out.Gen)
			return []State{n}
		}
		n := register(s, in)
		if !n.newRev(out.Gen) {
			return nil
		}
		n.M[in.Worker].Gen = known(out.Gen)
		return []State{n}
	case OpDeregister:
		if out.Err != ErrNone || in.Worker < 0 || in.Worker >= MaxWorkers {
			return nil
		}
		return []State{deregister(s, in.Worker)}
	case OpMembers:
		return stepMembers(s, out)
	case OpEndSession:
		return when(out.Err == ErrNone && in.Replica >= 0 && in.Replica < MaxReplicas, unhold(s, in.Replica))
	case OpDropRegistrations:
		return when(out.Err == ErrNone && in.Replica >= 0 && in.Replica < MaxReplicas, dropRegistrations(s, in.Replica))
	case OpAdvance:
		n, ok := advance(p, s, in.D)
		return when(ok && out.Err == ErrNone && in.D >= 0, n)
	}
	return nil
}

// stepAll steps every state of s (the set of states a nondeterministic
// model is in), without duplicates.
func stepAll(p Params, s []State, in Input, out Output) []State {
	var next []State
	seen := map[State]bool{}
	for _, x := range s {
		for _, n := range Step(p, x, in, out) {
			if !seen[n] {
				seen[n] = true
				next = append(next, n)
			}
		}
	}
	return next
}

// when returns states if ok, else none.
func when(ok bool, states ...State) []State {
	if !ok {
		return nil
	}
	return states
}

func stepCreateOrGet(s State, in Input, out Output) []State {
	if out.Err == ErrProposal {
		// propose is called only when there is no current claim
		if s.C.St == StNone {
			return []State{s}
		}
		stale, _ := staleness(s)
		return stale
	}
	if s.C.St == StNone {
		return created(s, in, out)
	}
	stale, fresh := staleness(s)
	var next []State
	if !out.Created {
		if out.Err == ErrUnknownWorker {
			for _, n := range stale {
				next = append(next, created(n, in, out)...)
			}
			return next
		}
		if out.Err != ErrNone || !out.Has {
			return nil
		}
		for _, n := range fresh {
			next = append(next, matchClaim(n, out.Claim)...)
		}
		return next
	}
	for _, n := range stale {
		next = append(next, created(n, in, out)...)
	}
	return next
}

// created checks a CreateOrGet that found no current claim: it writes
// the proposal, Bound, under its worker's generation (a new lineage: no
// holds), or fails with ErrUnknownWorker when the worker is not
// registered.
func created(s State, in Input, out Output) []State {
	w := in.Target.W
	if w < 0 || int(w) >= MaxWorkers {
		return nil
	}
	m := s.M[w]
	if !m.On {
		return when(out.Err == ErrUnknownWorker && !out.Created && !out.Has, s)
	}
	c := out.Claim
	if out.Err != ErrNone || !out.Created || !out.Has || c.St != StBound || c.T != in.Target || c.Att != 0 {
		return nil
	}
	n := s
	n.C, n.Holders = claimState{T: in.Target}, 0
	if !n.M[w].Gen.pin(c.Gen) {
		return nil
	}
	n.bump(c.Gen)
	if !n.write(c.Rev, StBound, 0) || !n.pinBorn(c) {
		return nil
	}
	n.C.Gen = known(c.Gen)
	return []State{n}
}

// unhold removes client's hold; the last Unhold of a Closing claim
// deletes it.
func unhold(s State, client int) State {
	s.Holders &^= bit(client)
	if s.C.St == StClosing && s.Holders == 0 {
		s.remove()
	}
	return s
}

// closeEffect is a Close of the current revision by client: its own hold
// goes; the claim is deleted when no other replica holds it, else it is
// Closing (a new revision the store does not return, unless it was
// Closing already).
func closeEffect(s State, client int) (State, int) {
	s.Holders &^= bit(client)
	if s.Holders == 0 {
		s.remove()
		return s, CloseDeleted
	}
	if s.C.St != StClosing {
		s.write(0, StClosing, 0)
	}
	return s, CloseDeferred
}

// quarantineFence returns the states in which a Quarantine of in.Rev at
// in.Gen is fenced in (the revision is current and the claim's
// generation is in.Gen) and those in which it is fenced out.
func quarantineFence(s State, in Input) (ok, moved []State) {
	okRev, movedRev := fenceRev(s, in.Rev)
	moved = movedRev
	for _, n := range okRev {
		if m := n; m.pinGen(in.Gen) {
			ok = append(ok, m)
		}
		if n.C.GenMode != genKnown || n.C.Gen.V != in.Gen {
			moved = append(moved, n)
		}
	}
	return ok, moved
}

func stepResolve(s State, in Input, out Output) []State {
	var match, other []State
	if s.C.St == StQuarantined && s.C.Att == in.Attempt {
		// fenced by the generation too, and by the worker's current
		// registration (a stale quarantine is fenced)
		if n := s; n.pinGen(in.Gen) {
			stale, fresh := staleness(n)
			match = append(match, fresh...)
			other = append(other, stale...)
		}
		if s.C.GenMode != genKnown || s.C.Gen.V != in.Gen {
			other = append(other, s)
		}
	} else {
		other = []State{s}
	}
	var next []State
	if out.Err == ErrFenced {
		// the *FencedError says what it found
		for _, n := range other {
			if !out.Has {
				if n.C.St == StNone {
					next = append(next, n)
				}
				continue
			}
			next = append(next, matchClaim(n, out.Claim)...)
		}
		return next
	}
	if out.Err != ErrNone {
		return nil
	}
	for _, n := range match {
		if !in.Accepted {
			if !out.Has {
				n.remove()
				next = append(next, n)
			}
			continue
		}
		c := out.Claim
		if out.Has && c.St == StBound && c.T == n.C.T && c.Att == 0 && c.Gen == in.Gen && n.write(c.Rev, StBound, 0) && n.pinBorn(c) {
			next = append(next, n)
		}
	}
	return next
}

// stepMove checks a Move: fenced by its revision (ErrMoved, the
// *MoveError carrying the claim found), only a Bound claim moves
// (ErrNotBound, carrying it), to a registered worker (ErrUnknownWorker);
// else a new lineage, Bound to the target under its worker's generation,
// with no holds (the old lineage's end).
func stepMove(s State, in Input, out Output) []State {
	ok, moved := fenceRev(s, in.Rev)
	var next []State
	switch out.Err {
	case ErrMoved:
		for _, n := range moved {
			switch {
			case !out.Has:
				if n.C.St == StNone {
					next = append(next, n)
				}
			case out.Claim.Rev != in.Rev:
				next = append(next, matchClaim(n, out.Claim)...)
			}
		}
		return next
	case ErrNotBound:
		for _, n := range ok {
			if n.C.St != StBound && out.Has && out.Claim.Rev == in.Rev {
				next = append(next, matchClaim(n, out.Claim)...)
			}
		}
		return next
	}
	for _, n := range ok {
		if n.C.St != StBound {
			continue
		}
		next = append(next, moveTo(n, in, out)...)
	}
	return next
}

// moveTo checks a Move from the current revision of a Bound claim: it
// writes the target, Bound, under its worker's generation (a new
// lineage: no holds), or fails with ErrUnknownWorker when the worker is
// not registered.
func moveTo(s State, in Input, out Output) []State {
	w := in.Target.W
	if w < 0 || int(w) >= MaxWorkers {
		return nil
	}
	if !s.M[w].On {
		return when(out.Err == ErrUnknownWorker && !out.Has, s)
	}
	c := out.Claim
	if out.Err != ErrNone || !out.Has || out.Created || c.St != StBound || c.T != in.Target || c.Att != 0 {
		return nil
	}
	n := s
	n.C, n.Holders = claimState{T: in.Target}, 0
	if !n.M[w].Gen.pin(c.Gen) {
		return nil
	}
	n.bump(c.Gen)
	if !n.write(c.Rev, StBound, 0) || !n.pinBorn(c) {
		return nil
	}
	n.C.Gen = known(c.Gen)
	return []State{n}
}

// moveEffect is what a Move whose outcome is unknown leaves s in had it
// taken effect: a new lineage at the target, under its worker's
// generation (linked when not known yet), with no holds.
func moveEffect(s State, in Input) []State {
	ok, _ := fenceRev(s, in.Rev)
	var next []State
	for _, n := range ok {
		w := in.Target.W
		if n.C.St != StBound || w < 0 || int(w) >= MaxWorkers || !n.M[w].On {
			continue
		}
		m := n.M[w]
		n.C, n.Holders = claimState{T: in.Target}, 0
		n.write(0, StBound, 0)
		if m.Gen.V > 0 {
			n.C.Gen = m.Gen
		} else {
			n.C.GenMode = genLinked
		}
		next = append(next, n)
	}
	return next
}

func stepMembers(s State, out Output) []State {
	if out.Err != ErrNone || out.Rev < s.MaxRev {
		return nil
	}
	n := s
	for w := range n.M {
		m, o := &n.M[w], out.Members[w]
		if !m.On {
			if o.Gen != 0 {
				return nil
			}
			continue
		}
		if o.Gen == 0 || o.Ident != int(m.Ident) || o.Gen > out.Rev || !m.Gen.pin(o.Gen) {
			return nil
		}
		if n.C.St != StNone && int(n.C.T.W) == w && n.C.GenMode == genLinked {
			n.C.Gen, n.C.GenMode = known(o.Gen), genKnown
		}
	}
	n.bump(out.Rev)
	return []State{n}
}

// register is a successful Register of in.Worker by in.Client, its
// generation (a new revision) not yet set.
func register(s State, in Input) State {
	s.unlink(in.Worker)
	s.M[in.Worker] = memberState{On: true, Ident: int8(in.Ident), By: int8(in.Client), Gen: val{Lo: s.MaxRev}}
	return s
}

func deregister(s State, w int) State {
	s.unlink(w)
	s.M[w] = memberState{}
	return s
}

// dropRegistrations removes the registrations replica's session made.
func dropRegistrations(s State, replica int) State {
	for w := range s.M {
		if s.M[w].On && int(s.M[w].By) == replica {
			s = deregister(s, w)
		}
	}
	return s
}

// advance moves the clock by d: a claim idle for the TTL expires. ok is
// false when it expires held and p.HeldNoExpiry says it must not.
func advance(p Params, s State, d int64) (State, bool) {
	s.Now += d
	if p.TTL > 0 && s.C.St != StNone && s.Now >= s.Used+p.TTL {
		if p.HeldNoExpiry && s.Holders != 0 && s.C.St != StClosing {
			if stale, _ := staleness(s); len(stale) == 0 {
				return s, false
			}
		}
		s.remove()
	}
	return s, true
}

// effects returns every state a call whose outcome is unknown leaves s in
// had it taken effect (the revisions and generations it wrote unknown).
func effects(p Params, s State, in Input) []State {
	switch in.Op {
	case OpCreateOrGet:
		base := []State{s}
		if s.C.St != StNone {
			base, _ = staleness(s)
		}
		var next []State
		for _, n := range base {
			w := in.Target.W
			if w < 0 || int(w) >= MaxWorkers || !n.M[w].On {
				continue
			}
			m := n.M[w]
			n.C, n.Holders = claimState{T: in.Target}, 0
			n.write(0, StBound, 0)
			if m.Gen.V > 0 {
				n.C.Gen = m.Gen
			} else {
				n.C.GenMode = genLinked
			}
			next = append(next, n)
		}
		return next
	case OpHold:
		ok, _ := fenceRev(s, in.Rev)
		for i := range ok {
			ok[i].Holders |= bit(in.Client)
		}
		return ok
	case OpUnhold:
		return []State{unhold(s, in.Client)}
	case OpClose:
		ok, _ := fenceRev(s, in.Rev)
		for i := range ok {
			ok[i], _ = closeEffect(ok[i], in.Client)
		}
		return ok
	case OpQuarantine:
		ok, _ := quarantineFence(s, in)
		for i := range ok {
			ok[i].write(0, StQuarantined, in.Attempt)
		}
		return ok
	case OpResolve:
		if s.C.St != StQuarantined || s.C.Att != in.Attempt || !s.pinGen(in.Gen) {
			return nil
		}
		_, fresh := staleness(s)
		if len(fresh) == 0 {
			return nil // a stale quarantine is fenced
		}
		s = fresh[0]
		if !in.Accepted {
			s.remove()
			return []State{s}
		}
		s.write(0, StBound, 0)
		return []State{s}
	case OpMove:
		return moveEffect(s, in)
	case OpTouch:
		ok, _ := lineageFence(s, in.Rev)
		for i := range ok {
			ok[i].Used = ok[i].Now
		}
		return ok
	case OpRegister:
		if in.Worker < 0 || in.Worker >= MaxWorkers {
			return nil
		}
		if m := s.M[in.Worker]; m.On && int(m.Ident) == in.Ident {
			return []State{s} // idempotent
		}
		return []State{register(s, in)}
	case OpDeregister:
		if in.Worker < 0 || in.Worker >= MaxWorkers {
			return nil
		}
		return []State{deregister(s, in.Worker)}
	case OpEndSession:
		return []State{unhold(s, in.Replica)}
	case OpDropRegistrations:
		return []State{dropRegistrations(s, in.Replica)}
	case OpAdvance:
		if n, ok := advance(p, s, in.D); ok {
			return []State{n}
		}
	}
	return nil // Get and Members change nothing
}

var seed = maphash.MakeSeed()

// Partition splits a history by session key: a key's calls, with every
// call on the membership or on a replica's session (which every key's
// partition needs), in each.
func Partition(h []porcupine.Operation) [][]porcupine.Operation {
	var shared []int
	byKey := map[int][]porcupine.Operation{}
	var keys []int
	for i, op := range h {
		in := op.Input.(Input)
		if !in.Op.keyed() {
			shared = append(shared, i)
			continue
		}
		if _, ok := byKey[in.Key]; !ok {
			keys = append(keys, in.Key)
		}
		byKey[in.Key] = append(byKey[in.Key], op)
	}
	if len(keys) == 0 {
		return [][]porcupine.Operation{h}
	}
	var out [][]porcupine.Operation
	for _, k := range keys {
		part := byKey[k]
		for _, i := range shared {
			part = append(part, h[i])
		}
		out = append(out, part)
	}
	return out
}

// NewModel returns the Porcupine model of a claim store with params p,
// partitioned by key (Partition).
func NewModel(p Params) porcupine.Model {
	m := PartitionModel(p)
	m.Partition = Partition
	return m
}

// PartitionModel is the model over one partition (no Partition function):
// what the explainer replays.
func PartitionModel(p Params) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{Init()} },
		Step: func(state, input, output any) []any {
			var out []any
			for _, n := range Step(p, state.(State), input.(Input), output.(Output)) {
				out = append(out, n)
			}
			return out
		},
		Equal:             func(a, b any) bool { return a.(State) == b.(State) },
		Hash:              func(a any) uint64 { return maphash.Comparable(seed, a.(State)) },
		DescribeOperation: func(in, out any) string { return Describe(in.(Input), out.(Output)) },
		DescribeState:     func(a any) string { return a.(State).String() },
	}
	return nm.ToModel()
}

// Describe formats a call and its result.
func Describe(in Input, out Output) string {
	var b strings.Builder
	fmt.Fprintf(&b, "r%d %s", in.Client, in.Op)
	switch in.Op {
	case OpCreateOrGet:
		fmt.Fprintf(&b, "(s%d, propose %s)", in.Key, in.Target)
	case OpGet:
		fmt.Fprintf(&b, "(s%d)", in.Key)
	case OpHold, OpClose, OpTouch:
		fmt.Fprintf(&b, "(s%d, rev %d)", in.Key, in.Rev)
	case OpUnhold:
		fmt.Fprintf(&b, "(s%d)", in.Key)
	case OpQuarantine:
		fmt.Fprintf(&b, "(s%d, rev %d, att %#x, gen %d)", in.Key, in.Rev, in.Attempt, in.Gen)
	case OpResolve:
		fmt.Fprintf(&b, "(s%d, att %#x, gen %d, accepted %v)", in.Key, in.Attempt, in.Gen, in.Accepted)
	case OpMove:
		fmt.Fprintf(&b, "(s%d, rev %d, to %s)", in.Key, in.Rev, in.Target)
	case OpRegister:
		fmt.Fprintf(&b, "(w%d, %c)", in.Worker, 'a'+rune(in.Ident))
	case OpDeregister:
		fmt.Fprintf(&b, "(w%d)", in.Worker)
	case OpEndSession, OpDropRegistrations:
		fmt.Fprintf(&b, "(r%d)", in.Replica)
	case OpAdvance:
		fmt.Fprintf(&b, "(%v)", time.Duration(in.D))
	}
	switch {
	case out.Unknown:
		b.WriteString(" -> unknown (unavailable)")
		return b.String()
	case (out.Err == ErrFenced || out.Err == ErrMoved || out.Err == ErrNotBound) && out.Has:
		fmt.Fprintf(&b, " -> %s, found %s", out.Err, out.Claim)
		return b.String()
	case out.Err == ErrOther:
		fmt.Fprintf(&b, " -> Other (%s)", out.Msg)
		return b.String()
	case out.Err != ErrNone:
		fmt.Fprintf(&b, " -> %s", out.Err)
		return b.String()
	}
	switch in.Op {
	case OpCreateOrGet, OpGet, OpQuarantine, OpResolve, OpMove:
		if !out.Has {
			b.WriteString(" -> none")
		} else {
			fmt.Fprintf(&b, " -> %s", out.Claim)
		}
		if out.Created {
			b.WriteString(" created")
		}
	case OpClose:
		fmt.Fprintf(&b, " -> %s", closeNames[out.Close%4])
	case OpRegister:
		fmt.Fprintf(&b, " -> gen %d", out.Gen)
	case OpMembers:
		b.WriteString(" ->")
		for w, m := range out.Members {
			if m.Gen != 0 {
				fmt.Fprintf(&b, " w%d(%c)@%d", w, 'a'+rune(m.Ident), m.Gen)
			}
		}
		fmt.Fprintf(&b, " at rev %d", out.Rev)
	}
	return b.String()
}

// String describes the state.
func (s State) String() string {
	var b strings.Builder
	if s.C.St == StNone {
		b.WriteString("no claim")
	} else {
		fmt.Fprintf(&b, "claim {rev %s %s gen ", s.C.Rev, s.C.T)
		switch s.C.GenMode {
		case genLinked:
			b.WriteString("(w's)")
		case genOld:
			fmt.Fprintf(&b, "old %s", s.C.Gen)
		default:
			b.WriteString(s.C.Gen.String())
		}
		fmt.Fprintf(&b, " %s", stNames[s.C.St%4])
		if s.C.St == StQuarantined {
			fmt.Fprintf(&b, " att %#x", s.C.Att)
		}
		b.WriteString("}")
	}
	b.WriteString("; holders:")
	for r := 0; r < MaxReplicas; r++ {
		if s.Holders&bit(r) != 0 {
			fmt.Fprintf(&b, " r%d", r)
		}
	}
	b.WriteString("; workers:")
	for w, m := range s.M {
		if m.On {
			fmt.Fprintf(&b, " w%d(%c by r%d)@%s", w, 'a'+rune(m.Ident), m.By, m.Gen)
		}
	}
	fmt.Fprintf(&b, "; max rev %d", s.MaxRev)
	if s.Now > 0 || s.Used > 0 {
		fmt.Fprintf(&b, "; now %v, claim used at %v", time.Duration(s.Now), time.Duration(s.Used))
	}
	return b.String()
}
