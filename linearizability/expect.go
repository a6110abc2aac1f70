package linearizability

import "github.com/placementlab/placement/model"

// Want is what in must return in state s, and the next state: the
// Stepper's Expect, with what the implementation reports beyond the
// model's result, derived from the model's states:
//
//   - an Ambiguous answer names the quarantined attempt's target;
//   - a commit (Complete(Accepted), CommitAccepted, an Accepted Resolve)
//     reports its binding stale at birth (Output.Stale) exactly when the
//     model's new binding is stale in the next state: its target's
//     generation moved on before the commit.
//
// ok is false when the model has no step for in.
func (st *Stepper) Want(s model.State, in Input) (out Output, next model.State, ok bool) {
	return st.want(s, in, true)
}

// want is Want from Expect if settle is set, or else from in's own step
// (step, sweeping nothing but at a Stats): Steps lets the timeouts fire
// later.
func (st *Stepper) want(s model.State, in Input, settle bool) (out Output, next model.State, ok bool) {
	if settle {
		out, next, ok = st.Expect(s, in)
	} else {
		out, next, ok = st.step(s, in, false)
	}
	if !ok {
		return out, next, ok
	}
	if out.Kind == OutAmbiguous && in.Key >= 0 && in.Key < len(s.Table) {
		out.Target = s.Table[in.Key].Target
	}
	k := -1
	switch {
	case out.Kind == OutCommitted && (in.Op == OpComplete || in.Op == OpCommitAccepted):
		k = s.Req[in.Client].Key
	case out.Kind == OutOK && in.Op == OpResolve && model.Resolution(in.Outcome) == model.ResolvedAccepted:
		k = in.Key
	}
	if k >= 0 {
		e := &next.Table[k]
		out.Stale = e.St == model.Bound && st.M.Stale(&next, e)
	}
	if out.Stale && in.Op != OpResolve {
		next = st.endStaleLease(next, in.Client)
	}
	return out, next, ok
}

// endStaleLease ends request r's lease on a binding stale at birth: the
// implementation never hands that lease out (a commit that reports
// ErrStaleAtBirth returns none), so to the model the request abandons it
// at once. On a stale binding, which reads as absent, that changes nothing
// anyone can observe.
func (st *Stepper) endStaleLease(s model.State, r int) model.State {
	if n, _, ok := st.M.Abandon(&s, r); ok {
		return n
	}
	return s
}
