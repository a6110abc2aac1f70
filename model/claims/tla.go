package claims

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/placementlab/placement/model/tlcout"
)

// ErrDecode is returned (wrapped) for a state key or a TLC state the model
// cannot read.
var ErrDecode = errors.New("claims: cannot decode state")

// DecodeKey is the inverse of State.Key for m's configuration.
func (m *Model) DecodeKey(key string) (State, error) {
	b := []byte(key)
	pos := 0
	bad := false
	rd := func() int {
		if pos >= len(b) {
			bad = true
			return 0
		}
		pos++
		return int(b[pos-1]) - 1
	}
	u64 := func() uint64 {
		var v uint64
		for shift := uint(0); ; shift += 7 {
			if pos >= len(b) || shift > 63 {
				bad = true
				return 0
			}
			c := b[pos]
			pos++
			v |= uint64(c&0x7f) << shift
			if c < 0x80 {
				return v
			}
		}
	}
	s := m.Init()
	s.Rev = rd()
	s.Faults = rd()
	s.NMoves = rd()
	for w := range s.Gen {
		s.Gen[w] = rd()
	}
	for i := range s.Claim {
		c := &s.Claim[i]
		c.St = St(rd())
		c.Rev, c.Born, c.Target, c.Gen, c.Attempt = rd(), rd(), rd(), rd(), rd()
		s.Holders[i] = u64()
		s.Ended[i] = u64()
		s.Lineage[i] = rd()
		n := rd()
		for j := 0; j < n && !bad; j++ {
			s.Moves[i] = append(s.Moves[i], Move{From: rd(), To: rd()})
		}
	}
	for r := range s.Up {
		s.Up[r] = rd() == 0
	}
	for i := range s.Cache {
		e := &s.Cache[i]
		e.St = St(rd())
		e.Rev, e.Target, e.Gen = rd(), rd(), rd()
		s.Lease[i] = Lease{N: rd(), Rev: rd()}
	}
	for r := range s.Chan {
		n := rd()
		for j := 0; j < n && !bad; j++ {
			kind := rd()
			s.Chan[r] = append(s.Chan[r], Event{Reset: kind == -1, S: rd(), Rev: rd()})
		}
	}
	if bad || pos != len(b) {
		return State{}, fmt.Errorf("%w: key of %d bytes", ErrDecode, len(b))
	}
	return s, nil
}

func nameOr(names []string, i int, none string) string {
	if i < 0 || i >= len(names) {
		return none
	}
	return names[i]
}

func tlaBool(b bool) string {
	if b {
		return "TRUE"
	}
	return "FALSE"
}

// FormatState renders s as TLC prints a state (the ghost step left out).
func (m *Model) FormatState(s *State) string {
	c := &m.Cfg
	var b strings.Builder
	fn := func(name string, dom []string, val func(i int) string) {
		fmt.Fprintf(&b, "/\\ %s = (", name)
		for i, d := range dom {
			if i > 0 {
				b.WriteString(" @@ ")
			}
			fmt.Fprintf(&b, "%s :> %s", d, val(i))
		}
		b.WriteString(")\n")
	}
	set := func(names []string, bits uint64) string {
		var xs []string
		for i := range names {
			if bits&(1<<uint(i)) != 0 {
				xs = append(xs, names[i])
			}
		}
		return "{" + strings.Join(xs, ", ") + "}"
	}
	fmt.Fprintf(&b, "/\\ rev = %d\n", s.Rev)
	fmt.Fprintf(&b, "/\\ faults = %d\n", s.Faults)
	fmt.Fprintf(&b, "/\\ nmoves = %d\n", s.NMoves)
	fn("gen", c.Workers, func(w int) string { return strconv.Itoa(s.Gen[w]) })
	fn("claim", c.Sessions, func(i int) string {
		x := s.Claim[i]
		return fmt.Sprintf("[st |-> %q, rev |-> %d, born |-> %d, target |-> %s, gen |-> %d, attempt |-> %d]",
			x.St.String(), x.Rev, x.Born, nameOr(c.Workers, x.Target, "NoWorker"), x.Gen, x.Attempt)
	})
	fn("holders", c.Sessions, func(i int) string { return set(c.Replicas, s.Holders[i]) })
	fn("up", c.Replicas, func(r int) string { return tlaBool(s.Up[r]) })
	fn("cache", c.Replicas, func(r int) string {
		var parts []string
		for ss, sn := range c.Sessions {
			e := s.Cache[m.ix(r, ss)]
			parts = append(parts, fmt.Sprintf("%s :> [st |-> %q, rev |-> %d, target |-> %s, gen |-> %d]",
				sn, e.St.String(), e.Rev, nameOr(c.Workers, e.Target, "NoWorker"), e.Gen))
		}
		return "(" + strings.Join(parts, " @@ ") + ")"
	})
	fn("lease", c.Replicas, func(r int) string {
		var parts []string
		for ss, sn := range c.Sessions {
			l := s.Lease[m.ix(r, ss)]
			parts = append(parts, fmt.Sprintf("%s :> [n |-> %d, rev |-> %d]", sn, l.N, l.Rev))
		}
		return "(" + strings.Join(parts, " @@ ") + ")"
	})
	fn("chan", c.Replicas, func(r int) string {
		var evs []string
		for _, ev := range s.Chan[r] {
			kind := "Delete"
			if ev.Reset {
				kind = "Reset"
			}
			evs = append(evs, fmt.Sprintf("[kind |-> %q, s |-> %s, rev |-> %d]", kind, nameOr(c.Sessions, ev.S, "NoSession"), ev.Rev))
		}
		return "<<" + strings.Join(evs, ", ") + ">>"
	})
	fn("ended", c.Sessions, func(i int) string {
		var xs []string
		for v := 0; v < 64; v++ {
			if s.Ended[i]&(1<<uint(v)) != 0 {
				xs = append(xs, strconv.Itoa(v))
			}
		}
		return "{" + strings.Join(xs, ", ") + "}"
	})
	fn("lineage", c.Sessions, func(i int) string { return strconv.Itoa(s.Lineage[i]) })
	fn("moves", c.Sessions, func(i int) string {
		var xs []string
		for _, mv := range s.Moves[i] {
			xs = append(xs, fmt.Sprintf("<<%d, %d>>", mv.From, mv.To))
		}
		return "{" + strings.Join(xs, ", ") + "}"
	})
	return b.String()
}

// ParseState reads a state as TLC prints it (`/\ var = value` lines);
// variables the model does not have (the ghost step) are ignored.
func (m *Model) ParseState(text string) (State, error) {
	vars, err := tlcout.ParseState(text)
	if se := (*tlcout.SyntaxError)(nil); errors.As(err, &se) {
		return State{}, fmt.Errorf("%w: expected %s at %q", ErrDecode, se.Want, se.Near)
	}
	if err != nil {
		return State{}, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	return m.stateFromValues(vars)
}

func (m *Model) stateFromValues(vars map[string]*tlcout.Value) (State, error) {
	c := &m.Cfg
	var err error
	fail := func(format string, args ...any) {
		if err == nil {
			err = fmt.Errorf("%w: %s", ErrDecode, fmt.Sprintf(format, args...))
		}
	}
	get := func(v *tlcout.Value, kind tlcout.Kind, what string) *tlcout.Value {
		if v == nil || v.Kind != kind {
			fail("%s is missing or of the wrong kind", what)
			return &tlcout.Value{Kind: kind, Fields: map[string]*tlcout.Value{}}
		}
		return v
	}
	index := func(names []string, none string, v *tlcout.Value, what string) int {
		v = get(v, tlcout.KindModel, what)
		if v.Str == none {
			return None
		}
		for i, n := range names {
			if n == v.Str {
				return i
			}
		}
		fail("%s names unknown value %s", what, v.Str)
		return None
	}
	num := func(v *tlcout.Value, what string) int { return int(get(v, tlcout.KindInt, what).Num) }
	fn := func(v *tlcout.Value, name string, dom []string) []*tlcout.Value {
		f := get(v, tlcout.KindFunc, name)
		if len(f.Fields) != len(dom) {
			fail("%s has %d entries, want %d", name, len(f.Fields), len(dom))
		}
		out := make([]*tlcout.Value, len(dom))
		for i, d := range dom {
			out[i] = f.Fields[d]
		}
		return out
	}
	st := func(v *tlcout.Value) St {
		name := get(v, tlcout.KindString, "st").Str
		for i, n := range stNames {
			if n == name {
				return St(i)
			}
		}
		fail("unknown state %q", name)
		return StNone
	}
	s := m.Init()
	s.Rev = num(vars["rev"], "rev")
	s.Faults = num(vars["faults"], "faults")
	s.NMoves = num(vars["nmoves"], "nmoves")
	for w, g := range fn(vars["gen"], "gen", c.Workers) {
		s.Gen[w] = num(g, "gen[w]")
	}
	for i, cv := range fn(vars["claim"], "claim", c.Sessions) {
		f := get(cv, tlcout.KindRecord, "claim[s]").Fields
		s.Claim[i] = Claim{St: st(f["st"]), Rev: num(f["rev"], "rev"), Born: num(f["born"], "born"),
			Target: index(c.Workers, "NoWorker", f["target"], "target"), Gen: num(f["gen"], "gen"),
			Attempt: num(f["attempt"], "attempt")}
	}
	for i, hv := range fn(vars["holders"], "holders", c.Sessions) {
		for _, e := range get(hv, tlcout.KindSet, "holders[s]").Elems {
			s.Holders[i] |= 1 << uint(index(c.Replicas, "", e, "holder")&63)
		}
	}
	for r, uv := range fn(vars["up"], "up", c.Replicas) {
		s.Up[r] = get(uv, tlcout.KindBool, "up[r]").Num == 1
	}
	for r, rv := range fn(vars["cache"], "cache", c.Replicas) {
		for ss, ev := range fn(rv, "cache[r]", c.Sessions) {
			f := get(ev, tlcout.KindRecord, "cache[r][s]").Fields
			s.Cache[m.ix(r, ss)] = Entry{St: st(f["st"]), Rev: num(f["rev"], "rev"),
				Target: index(c.Workers, "NoWorker", f["target"], "target"), Gen: num(f["gen"], "gen")}
		}
	}
	for r, rv := range fn(vars["lease"], "lease", c.Replicas) {
		for ss, lv := range fn(rv, "lease[r]", c.Sessions) {
			f := get(lv, tlcout.KindRecord, "lease[r][s]").Fields
			s.Lease[m.ix(r, ss)] = Lease{N: num(f["n"], "n"), Rev: num(f["rev"], "rev")}
		}
	}
	for r, qv := range fn(vars["chan"], "chan", c.Replicas) {
		for _, ev := range get(qv, tlcout.KindTuple, "chan[r]").Elems {
			f := get(ev, tlcout.KindRecord, "event").Fields
			kind := get(f["kind"], tlcout.KindString, "kind").Str
			if kind != "Reset" && kind != "Delete" {
				fail("unknown event kind %q", kind)
			}
			s.Chan[r] = append(s.Chan[r], Event{Reset: kind == "Reset",
				S: index(c.Sessions, "NoSession", f["s"], "event s"), Rev: num(f["rev"], "event rev")})
		}
	}
	for i, ev := range fn(vars["ended"], "ended", c.Sessions) {
		for _, e := range get(ev, tlcout.KindSet, "ended[s]").Elems {
			v := num(e, "ended[s] element")
			if v < 0 || v > 63 {
				fail("ended revision %d out of range", v)
				continue
			}
			s.Ended[i] |= 1 << uint(v)
		}
	}
	for i, lv := range fn(vars["lineage"], "lineage", c.Sessions) {
		s.Lineage[i] = num(lv, "lineage[s]")
	}
	for i, mv := range fn(vars["moves"], "moves", c.Sessions) {
		for _, e := range get(mv, tlcout.KindSet, "moves[s]").Elems {
			t := get(e, tlcout.KindTuple, "a move")
			if len(t.Elems) != 2 {
				fail("a move has %d elements, want 2", len(t.Elems))
				continue
			}
			s.Moves[i] = addMove(s.Moves[i], Move{From: num(t.Elems[0], "move from"), To: num(t.Elems[1], "move to")})
		}
	}
	return s, err
}

// ReadDump reads a TLC `-dump` file, calling yield for each state in it.
func (m *Model) ReadDump(r io.Reader, yield func(State) error) error {
	return tlcout.ReadDump(r, func(text string) error {
		s, err := m.ParseState(text)
		if err != nil {
			return err
		}
		return yield(s)
	})
}
