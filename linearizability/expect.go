package linearizability

import "github.com/placementlab/placement/model"

// Want is what in must return in state s, and the next state: the
// Stepper's Expect, with what the implementation reports beyond the
// model's result, derived from the model's states:
//
//   - an Ambiguous answer names the quarantined attempt's target;
//
// ok is false when the model has no step for in.
func (st *Stepper) Want(s model.State, in Input) (out Output, next model.State, ok bool) {
	out, next, ok = st.Expect(s, in)
	if !ok {
		return out, next, ok
	}
	if out.Kind == OutAmbiguous && in.Key >= 0 && in.Key < len(s.Table) {
		out.Target = s.Table[in.Key].Target
	}
	return out, next, ok
}
