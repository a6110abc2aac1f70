package affinity

// Candidate is a target the scheduler may send a request to, with the
// scheduler's own load signal.
type Candidate struct {
	Target Target
	// Overloaded: the target is over the scheduler's load threshold. An
	// overloaded target is never narrowed to (a soft binding falls back to
	// the full set; a pin or a hard binding is an error), but stays in the
	// full set, where the scheduler's scorers weigh its load.
	Overloaded bool
}

// Eligibility decides which of a request's candidates the scheduler may
// choose from: the one helper both the layer's requests and a scheduler
// that embeds it use, so both apply the same rules. Its With methods
// return a copy with one constraint set; they may be called in any order,
// and Select evaluates every constraint together, at the end, so the
// result does not depend on the order they were given in (the anchor
// router's bug was an affinity narrowing evaluated before the availability
// it depended on).
//
// A candidate is dispatchable when its worker is a member, up (not
// failed), available (WithAvailable), allowed (WithAllow), and serves the
// candidate's rank. It is eligible when it is dispatchable and not
// overloaded. Select returns, keeping the candidates' order:
//
//   - with a pin: the eligible candidates the pin accepts, or a typed error
//     (*IneligibleError: gone, not allowed, overloaded; *PinError: a rank
//     the worker does not serve), in every mode; with a binding the pin
//     agrees with (a worker-only pin and a binding to one of the worker's
//     ranks), those the binding accepts among them, if there is one;
//     otherwise all the pin's (soft mode) or the binding's typed
//     *IneligibleError (hard mode);
//   - with an affinity target (a binding, or the hint of a session's first
//     turn): the eligible candidates it accepts (a worker-only target
//     accepts every rank of its worker), if there is one; otherwise the
//     dispatchable candidates (soft mode, and every hint), or a typed
//     *IneligibleError (a hard binding);
//   - otherwise the dispatchable candidates;
//
// and ErrNoCandidates when that set is empty.
type Eligibility struct {
	members     members
	mode        Mode
	pin         Target
	hasPin      bool
	affinity    Target
	hasAffinity bool
	bound       bool // affinity is a binding (not a first turn's hint)
	allow       func(worker string) bool
	available   func(worker string) bool
	// cached: the snapshot members is, and a request's read of its
	// binding's worker in it (Turn.Eligible; nil otherwise).
	cached memberCache
}

// Eligibility returns the layer's eligibility helper over its membership
// as it is now, in the layer's mode, with no other constraint.
func (l *Layer) Eligibility() Eligibility {
	snap := l.mem.snap.Load()
	return Eligibility{members: *snap, mode: l.cfg.Mode, cached: memberCache{snap: snap}}
}

// WithPin makes the request exact: only targets p accepts.
func (e Eligibility) WithPin(p Target) Eligibility { e.pin, e.hasPin = p, true; return e }

// WithBinding narrows to the session's binding t when t is eligible.
func (e Eligibility) WithBinding(t Target) Eligibility {
	e.affinity, e.hasAffinity, e.bound = t, true, true
	return e
}

// WithHint narrows to t when t is eligible, and never fails for it (as a
// soft binding, in every mode).
func (e Eligibility) WithHint(t Target) Eligibility {
	e.affinity, e.hasAffinity, e.bound = t, true, false
	return e
}

// WithMode sets the mode a binding is judged in (the layer's by default).
func (e Eligibility) WithMode(m Mode) Eligibility { e.mode = m; return e }

// WithAllow restricts the candidates to workers allow accepts (nil: all).
func (e Eligibility) WithAllow(allow func(worker string) bool) Eligibility { e.allow = allow; return e }

// WithAvailable restricts the candidates to workers available accepts,
// beyond the membership's own state (nil: all members that are up).
func (e Eligibility) WithAvailable(available func(worker string) bool) Eligibility {
	e.available = available
	return e
}

// up reports whether worker is a member, up and available.
func (e Eligibility) up(worker string) bool {
	m, ok := e.members[worker]
	return ok && !m.failed && (e.available == nil || e.available(worker))
}

func (e Eligibility) allowed(worker string) bool { return e.allow == nil || e.allow(worker) }

// dispatchable reports whether t may be sent a request at all.
func (e Eligibility) dispatchable(t Target) bool {
	m, ok := e.members[t.Worker] // one lookup: up's, inlined
	return ok && !m.failed && (e.available == nil || e.available(t.Worker)) && m.serves(t) && e.allowed(t.Worker)
}

// Select returns the candidates the scheduler may choose from (see
// Eligibility). It does not modify cands. When the candidates it keeps
// are one run of cands (a binding's rank, a worker's ranks side by side,
// or every candidate), the result is that sub-slice of cands, with its
// capacity capped at its length (an append to it copies): it allocates
// nothing then. Treat the result as read-only, or copy it before changing
// its elements (a change would show in cands).
func (e Eligibility) Select(cands []Candidate) ([]Candidate, error) {
	if e.hasPin {
		out, err := e.exact(e.pin, false, cands)
		if err != nil || !e.hasAffinity || !e.bound || !agreesWith(e.pin, e.affinity) || mutant("PinIgnoresBinding") {
			return out, err
		}
		// A pin that agrees with the binding (row P3) is narrowed to it: a
		// worker-only pin leaves the rank open, and the binding's rank is
		// where the session's cache is.
		var narrowed []Candidate
		for _, c := range out {
			if e.affinity.Accepts(c.Target) {
				narrowed = append(narrowed, c)
			}
		}
		switch {
		case len(narrowed) > 0:
			return narrowed, nil
		case e.mode == ModeHard:
			return e.exact(e.affinity, true, cands)
		}
		return out, nil
	}
	if e.hasAffinity {
		narrowed := e.narrow(cands)
		if len(narrowed) > 0 {
			return narrowed, nil
		}
		if e.bound && e.mode == ModeHard {
			return e.exact(e.affinity, true, cands)
		}
	}
	full := keep(cands, func(c Candidate) bool { return e.dispatchable(c.Target) })
	if len(full) == 0 {
		return nil, ErrNoCandidates
	}
	return full, nil
}

// narrow returns the candidates the affinity target accepts that are
// eligible (not overloaded, dispatchable), as keep would: the target names
// one worker, so its membership, availability and allowance are read once,
// and each candidate costs a comparison.
func (e Eligibility) narrow(cands []Candidate) []Candidate {
	t := e.affinity
	m, ok := e.cached.m, true
	if m == nil || m.ID != t.Worker {
		m, ok = e.members[t.Worker]
	}
	up := ok && !m.failed && (e.available == nil || e.available(t.Worker)) && e.allowed(t.Worker)
	anyway := mutant("NarrowsToUnavailable")
	if !up && !anyway {
		return nil
	}
	var r run
	for x := range cands {
		c := &cands[x]
		if c.Overloaded || !t.Accepts(c.Target) || !(anyway || m.serves(c.Target)) {
			continue
		}
		r.add(cands, x)
	}
	return r.result(cands)
}

// exact returns the eligible candidates t accepts, or why there are none:
// the worker is gone (not a member, failed, unavailable), t names a rank it
// does not serve, no candidate t accepts is allowed, or every one is
// overloaded.
func (e Eligibility) exact(t Target, bound bool, cands []Candidate) ([]Candidate, error) {
	m, ok := e.members[t.Worker]
	if !ok || !e.up(t.Worker) {
		return nil, &IneligibleError{Target: t, Bound: bound, Cause: ErrPinnedWorkerGone}
	}
	if !m.serves(t) {
		if bound {
			return nil, &IneligibleError{Target: t, Bound: bound, Cause: ErrPinnedWorkerGone}
		}
		return nil, &PinError{Pin: t, Reason: "the worker does not serve that rank"}
	}
	var out []Candidate
	var allowed bool
	for _, c := range cands {
		if !t.Accepts(c.Target) || !m.serves(c.Target) || !e.allowed(c.Target.Worker) {
			continue
		}
		allowed = true
		if !c.Overloaded {
			out = append(out, c)
		}
	}
	switch {
	case !allowed:
		return nil, &IneligibleError{Target: t, Bound: bound, Cause: ErrPinnedWorkerNotAllowed}
	case len(out) == 0:
		return nil, &IneligibleError{Target: t, Bound: bound, Cause: ErrPinnedWorkerOverloaded}
	}
	return out, nil
}

// keep returns the candidates of cands ok accepts, in order: the sub-slice
// of cands (capacity capped at its length) when they are one run, which
// allocates nothing (the common case: a binding's candidates, or all of
// them), a copy otherwise, nil when there are none.
func keep(cands []Candidate, ok func(Candidate) bool) []Candidate {
	var r run
	for x, c := range cands {
		if ok(c) {
			r.add(cands, x)
		}
	}
	return r.result(cands)
}

// run collects candidates kept in order, each judged once: [i, j) is the
// first run of them; out, once a second run shows, the copy.
type run struct {
	i, j int
	out  []Candidate
	any  bool
}

// add keeps cands[x] (x increasing).
func (r *run) add(cands []Candidate, x int) {
	switch {
	case r.out != nil:
		r.out = append(r.out, cands[x])
	case !r.any:
		r.i, r.j, r.any = x, x+1, true
	case x == r.j:
		r.j++
	default:
		r.out = append(make([]Candidate, 0, len(cands)-r.i), cands[r.i:r.j]...)
		r.out = append(r.out, cands[x])
	}
}

// result is what was kept: the sub-slice of cands for one run (capacity
// capped), the copy otherwise, nil for none.
func (r *run) result(cands []Candidate) []Candidate {
	switch {
	case r.out != nil:
		return r.out
	case !r.any:
		return nil
	}
	return cands[r.i:r.j:r.j]
}
