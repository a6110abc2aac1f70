package claims

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
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
	for w := range s.Gen {
		s.Gen[w] = rd()
	}
	for i := range s.Claim {
		c := &s.Claim[i]
		c.St = St(rd())
		c.Rev, c.Born, c.Target, c.Gen, c.Attempt = rd(), rd(), rd(), rd(), rd()
		s.Holders[i] = u64()
		s.Ended[i] = u64()
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
	return b.String()
}

// tlaValue is a parsed TLA+ value as TLC prints it.
type tlaValue struct {
	kind   byte // 'i' int, 's' string, 'b' bool, 'm' model value, 'r' record, 'f' function, 't' tuple, 'e' set
	num    int64
	str    string
	fields map[string]*tlaValue
	elems  []*tlaValue
}

type tlaParser struct {
	s   string
	pos int
}

func (p *tlaParser) skip() {
	for p.pos < len(p.s) && strings.ContainsRune(" \t\r\n", rune(p.s[p.pos])) {
		p.pos++
	}
}

func (p *tlaParser) eat(tok string) bool {
	p.skip()
	if strings.HasPrefix(p.s[p.pos:], tok) {
		p.pos += len(tok)
		return true
	}
	return false
}

func (p *tlaParser) fail(what string) error {
	end := min(p.pos+30, len(p.s))
	return fmt.Errorf("%w: expected %s at %q", ErrDecode, what, p.s[p.pos:end])
}

func (p *tlaParser) ident() string {
	p.skip()
	i := p.pos
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			p.pos++
			continue
		}
		break
	}
	return p.s[i:p.pos]
}

// list parses values separated by sep up to close (the opener is eaten).
func (p *tlaParser) list(close string) ([]*tlaValue, error) {
	var out []*tlaValue
	if p.eat(close) {
		return out, nil
	}
	for {
		e, err := p.value()
		if err != nil {
			return nil, err
		}
		out = append(out, e)
		if p.eat(close) {
			return out, nil
		}
		if !p.eat(",") {
			return nil, p.fail("',' or '" + close + "'")
		}
	}
}

func (p *tlaParser) value() (*tlaValue, error) {
	p.skip()
	if p.pos >= len(p.s) {
		return nil, p.fail("a value")
	}
	switch c := p.s[p.pos]; {
	case strings.HasPrefix(p.s[p.pos:], "<<"):
		p.pos += 2
		elems, err := p.list(">>")
		return &tlaValue{kind: 't', elems: elems}, err
	case c == '{':
		p.pos++
		elems, err := p.list("}")
		return &tlaValue{kind: 'e', elems: elems}, err
	case c == '"':
		end := strings.IndexByte(p.s[p.pos+1:], '"')
		if end < 0 {
			return nil, p.fail("a closing quote")
		}
		v := &tlaValue{kind: 's', str: p.s[p.pos+1 : p.pos+1+end]}
		p.pos += end + 2
		return v, nil
	case c == '-' || c >= '0' && c <= '9':
		i := p.pos
		p.pos++
		for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
			p.pos++
		}
		n, err := strconv.ParseInt(p.s[i:p.pos], 10, 64)
		return &tlaValue{kind: 'i', num: n}, err
	case c == '[' || c == '(':
		p.pos++
		sep, close, kind := "|->", "]", byte('r')
		if c == '(' {
			sep, close, kind = ":>", ")", 'f'
		}
		v := &tlaValue{kind: kind, fields: map[string]*tlaValue{}}
		for {
			name := p.ident()
			if name == "" || !p.eat(sep) {
				return nil, p.fail("a field or pair")
			}
			f, err := p.value()
			if err != nil {
				return nil, err
			}
			v.fields[name] = f
			if p.eat(close) {
				return v, nil
			}
			if !p.eat(",") && !p.eat("@@") {
				return nil, p.fail("a separator")
			}
		}
	default:
		name := p.ident()
		switch name {
		case "":
			return nil, p.fail("a value")
		case "TRUE", "FALSE":
			return &tlaValue{kind: 'b', num: map[bool]int64{true: 1}[name == "TRUE"]}, nil
		}
		return &tlaValue{kind: 'm', str: name}, nil
	}
}

// ParseState reads a state as TLC prints it (`/\ var = value` lines);
// variables the model does not have (the ghost step) are ignored.
func (m *Model) ParseState(text string) (State, error) {
	vars := map[string]*tlaValue{}
	p := &tlaParser{s: text}
	for {
		p.skip()
		if p.pos >= len(p.s) {
			break
		}
		if !p.eat(`/\`) {
			return State{}, p.fail(`'/\'`)
		}
		name := p.ident()
		if !p.eat("=") {
			return State{}, p.fail("'='")
		}
		v, err := p.value()
		if err != nil {
			return State{}, err
		}
		vars[name] = v
	}
	return m.stateFromValues(vars)
}

func (m *Model) stateFromValues(vars map[string]*tlaValue) (State, error) {
	c := &m.Cfg
	var err error
	fail := func(format string, args ...any) {
		if err == nil {
			err = fmt.Errorf("%w: %s", ErrDecode, fmt.Sprintf(format, args...))
		}
	}
	get := func(v *tlaValue, kind byte, what string) *tlaValue {
		if v == nil || v.kind != kind {
			fail("%s is missing or of the wrong kind", what)
			return &tlaValue{kind: kind, fields: map[string]*tlaValue{}}
		}
		return v
	}
	index := func(names []string, none string, v *tlaValue, what string) int {
		v = get(v, 'm', what)
		if v.str == none {
			return None
		}
		for i, n := range names {
			if n == v.str {
				return i
			}
		}
		fail("%s names unknown value %s", what, v.str)
		return None
	}
	num := func(v *tlaValue, what string) int { return int(get(v, 'i', what).num) }
	fn := func(v *tlaValue, name string, dom []string) []*tlaValue {
		f := get(v, 'f', name)
		if len(f.fields) != len(dom) {
			fail("%s has %d entries, want %d", name, len(f.fields), len(dom))
		}
		out := make([]*tlaValue, len(dom))
		for i, d := range dom {
			out[i] = f.fields[d]
		}
		return out
	}
	st := func(v *tlaValue) St {
		name := get(v, 's', "st").str
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
	for w, g := range fn(vars["gen"], "gen", c.Workers) {
		s.Gen[w] = num(g, "gen[w]")
	}
	for i, cv := range fn(vars["claim"], "claim", c.Sessions) {
		f := get(cv, 'r', "claim[s]").fields
		s.Claim[i] = Claim{St: st(f["st"]), Rev: num(f["rev"], "rev"), Born: num(f["born"], "born"),
			Target: index(c.Workers, "NoWorker", f["target"], "target"), Gen: num(f["gen"], "gen"),
			Attempt: num(f["attempt"], "attempt")}
	}
	for i, hv := range fn(vars["holders"], "holders", c.Sessions) {
		for _, e := range get(hv, 'e', "holders[s]").elems {
			s.Holders[i] |= 1 << uint(index(c.Replicas, "", e, "holder")&63)
		}
	}
	for r, uv := range fn(vars["up"], "up", c.Replicas) {
		s.Up[r] = get(uv, 'b', "up[r]").num == 1
	}
	for r, rv := range fn(vars["cache"], "cache", c.Replicas) {
		for ss, ev := range fn(rv, "cache[r]", c.Sessions) {
			f := get(ev, 'r', "cache[r][s]").fields
			s.Cache[m.ix(r, ss)] = Entry{St: st(f["st"]), Rev: num(f["rev"], "rev"),
				Target: index(c.Workers, "NoWorker", f["target"], "target"), Gen: num(f["gen"], "gen")}
		}
	}
	for r, rv := range fn(vars["lease"], "lease", c.Replicas) {
		for ss, lv := range fn(rv, "lease[r]", c.Sessions) {
			f := get(lv, 'r', "lease[r][s]").fields
			s.Lease[m.ix(r, ss)] = Lease{N: num(f["n"], "n"), Rev: num(f["rev"], "rev")}
		}
	}
	for r, qv := range fn(vars["chan"], "chan", c.Replicas) {
		for _, ev := range get(qv, 't', "chan[r]").elems {
			f := get(ev, 'r', "event").fields
			kind := get(f["kind"], 's', "kind").str
			if kind != "Reset" && kind != "Delete" {
				fail("unknown event kind %q", kind)
			}
			s.Chan[r] = append(s.Chan[r], Event{Reset: kind == "Reset",
				S: index(c.Sessions, "NoSession", f["s"], "event s"), Rev: num(f["rev"], "event rev")})
		}
	}
	for i, ev := range fn(vars["ended"], "ended", c.Sessions) {
		for _, e := range get(ev, 'e', "ended[s]").elems {
			v := num(e, "ended[s] element")
			if v < 0 || v > 63 {
				fail("ended revision %d out of range", v)
				continue
			}
			s.Ended[i] |= 1 << uint(v)
		}
	}
	return s, err
}

// ReadDump reads a TLC `-dump` file, calling yield for each state in it.
func (m *Model) ReadDump(r io.Reader, yield func(State) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var cur strings.Builder
	flush := func() error {
		if strings.TrimSpace(cur.String()) == "" {
			return nil
		}
		s, err := m.ParseState(cur.String())
		cur.Reset()
		if err != nil {
			return err
		}
		return yield(s)
	}
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "State ") && strings.HasSuffix(line, ":") {
			if err := flush(); err != nil {
				return err
			}
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return flush()
}
