package model

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/placementlab/placement/model/tlcout"
)

// Key is a compact canonical encoding of s: two states are equal exactly
// when their keys are. The explorer deduplicates on it and the state-set
// hash is computed over it. It is appendKey's encoding, the one codec of
// states (see explore_store.go).
func (s *State) Key() string {
	return string(appendKey(make([]byte, 0, 16+len(s.Gen)+len(s.Table)*12+len(s.Req)*3), s))
}

// DecodeKey is the inverse of Key.
func DecodeKey(key string) (State, error) {
	var d keyDecoder
	s, err := d.decode([]byte(key))
	if err != nil {
		return State{}, err
	}
	return s.Clone(), nil
}

// StateSetHash is the SHA-256 of a set of state keys, independent of order
// (tlcout.StateSetHash, which the claims model's explorer uses as well).
func StateSetHash(keys []string) string { return tlcout.StateSetHash(keys) }

func nameOr(names []string, i int, none string) string {
	if i == None || i < 0 || i >= len(names) {
		return none
	}
	return names[i]
}

// writeNumbers writes the variable name, a function from names to numbers,
// as TLC prints it.
func writeNumbers(b *strings.Builder, name string, names []string, values []int64) {
	fmt.Fprintf(b, "/\\ %s = (", name)
	for i, v := range values {
		if i > 0 {
			b.WriteString(" @@ ")
		}
		fmt.Fprintf(b, "%s :> %d", names[i], v)
	}
	b.WriteString(")\n")
}

// writeQueues writes the variable name, a function from keys to sequences
// of requests, as TLC prints it.
func writeQueues(b *strings.Builder, name string, c *Config, qs [][]int) {
	fmt.Fprintf(b, "/\\ %s = (", name)
	for k := range c.Keys {
		if k > 0 {
			b.WriteString(" @@ ")
		}
		var names []string
		if k < len(qs) {
			for _, r := range qs[k] {
				names = append(names, c.Requests[r])
			}
		}
		fmt.Fprintf(b, "%s :> <<%s>>", c.Keys[k], strings.Join(names, ", "))
	}
	b.WriteString(")\n")
}

// FormatState renders s as TLC prints a state.
func (m *Model) FormatState(s *State) string {
	c := &m.Cfg
	var b strings.Builder
	fmt.Fprintf(&b, "/\\ now = %d\n", s.Now)
	gen := make([]int64, len(s.Gen))
	for t, g := range s.Gen {
		gen[t] = int64(g)
	}
	writeNumbers(&b, "gen", c.Targets, gen)
	fmt.Fprintf(&b, "/\\ nextAttempt = %d\n", s.NextAttempt)
	b.WriteString("/\\ table = (")
	for k, e := range s.Table {
		if k > 0 {
			b.WriteString(" @@\n    ")
		}
		fmt.Fprintf(&b, "%s :> [st |-> %q, holder |-> %s, attempt |-> %d, target |-> %s, tgen |-> %d, deadline |-> %d, rdeadline |-> %d, leases |-> %d, closing |-> %s]",
			c.Keys[k], e.St.String(), nameOr(c.Requests, e.Holder, "NoReq"), e.Attempt,
			nameOr(c.Targets, e.Target, "NoTarget"), e.TGen, e.Deadline, e.RDeadline, e.Leases,
			strings.ToUpper(strconv.FormatBool(e.Closing)))
	}
	b.WriteString(")\n")
	writeNumbers(&b, "since", c.Keys, s.Since)
	b.WriteString("/\\ req = (")
	for r, q := range s.Req {
		if r > 0 {
			b.WriteString(" @@\n    ")
		}
		fmt.Fprintf(&b, "%s :> [pc |-> %q, key |-> %s, attempt |-> %d]",
			c.Requests[r], q.Pc.String(), nameOr(c.Keys, q.Key, "NoKey"), q.Attempt)
	}
	b.WriteString(")\n")
	writeQueues(&b, "waitq", c, s.Waitq)
	writeQueues(&b, "arrivals", c, s.Arrivals)
	return b.String()
}

// ParseState reads a state as TLC prints it (`/\ var = value` lines).
func (m *Model) ParseState(text string) (State, error) {
	vars, err := tlcout.ParseState(text)
	if err != nil {
		return State{}, err
	}
	return m.stateFromValues(vars)
}

func (m *Model) stateFromValues(vars map[string]*tlcout.Value) (State, error) {
	c := &m.Cfg
	var err error
	get := func(v *tlcout.Value, kind tlcout.Kind, what string) *tlcout.Value {
		if v == nil || v.Kind != kind {
			if err == nil {
				err = fmt.Errorf("tla: %s is missing or of the wrong kind", what)
			}
			return &tlcout.Value{Fields: map[string]*tlcout.Value{}}
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
		if err == nil {
			err = fmt.Errorf("tla: %s names unknown value %s", what, v.Str)
		}
		return None
	}
	num := func(v *tlcout.Value, what string) int64 { return get(v, tlcout.KindInt, what).Num }
	fn := func(name string, dom []string) []*tlcout.Value {
		f := get(vars[name], tlcout.KindFunc, name)
		if err == nil && len(f.Fields) != len(dom) {
			err = fmt.Errorf("tla: %s has %d entries, want %d", name, len(f.Fields), len(dom))
		}
		out := make([]*tlcout.Value, len(dom))
		for i, d := range dom {
			out[i] = f.Fields[d]
		}
		return out
	}
	var s State
	s.Now = num(vars["now"], "now")
	s.NextAttempt = int(num(vars["nextAttempt"], "nextAttempt"))
	for _, g := range fn("gen", c.Targets) {
		s.Gen = append(s.Gen, int(num(g, "gen[t]")))
	}
	for _, ev := range fn("table", c.Keys) {
		r := get(ev, tlcout.KindRecord, "table[k]").Fields
		st := get(r["st"], tlcout.KindString, "st").Str
		var e Entry
		e.St = 255
		for i, n := range entryStateNames {
			if n == st {
				e.St = EntryState(i)
			}
		}
		if e.St == 255 && err == nil {
			err = fmt.Errorf("tla: unknown entry state %q", st)
		}
		e.Holder = index(c.Requests, "NoReq", r["holder"], "holder")
		e.Attempt = int(num(r["attempt"], "attempt"))
		e.Target = index(c.Targets, "NoTarget", r["target"], "target")
		e.TGen = int(num(r["tgen"], "tgen"))
		e.Deadline = num(r["deadline"], "deadline")
		e.RDeadline = num(r["rdeadline"], "rdeadline")
		e.Leases = int(num(r["leases"], "leases"))
		e.Closing = get(r["closing"], tlcout.KindBool, "closing").Num == 1
		s.Table = append(s.Table, e)
	}
	for _, t := range fn("since", c.Keys) {
		s.Since = append(s.Since, num(t, "since[k]"))
	}
	for _, rv := range fn("req", c.Requests) {
		r := get(rv, tlcout.KindRecord, "req[r]").Fields
		pc := get(r["pc"], tlcout.KindString, "pc").Str
		q := Req{Pc: 255}
		for i, n := range pcNames {
			if n == pc {
				q.Pc = Pc(i)
			}
		}
		if q.Pc == 255 && err == nil {
			err = fmt.Errorf("tla: unknown pc %q", pc)
		}
		q.Key = index(c.Keys, "NoKey", r["key"], "key")
		q.Attempt = int(num(r["attempt"], "attempt"))
		s.Req = append(s.Req, q)
	}
	queues := func(name string) [][]int {
		var qs [][]int
		for _, wv := range fn(name, c.Keys) {
			var q []int
			for _, e := range get(wv, tlcout.KindTuple, name+"[k]").Elems {
				q = append(q, index(c.Requests, "NoReq", e, name+"[k][i]"))
			}
			qs = append(qs, q)
		}
		return qs
	}
	s.Waitq = queues("waitq")
	s.Arrivals = queues("arrivals")
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
