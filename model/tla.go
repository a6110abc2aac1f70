package model

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
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

// StateSetHash is the SHA-256 of a set of state keys, independent of order.
func StateSetHash(keys []string) string {
	sorted := append([]string(nil), keys...)
	sort.Strings(sorted)
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, k := range sorted {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(k)))])
		h.Write([]byte(k))
	}
	return hex.EncodeToString(h.Sum(nil))
}

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

// tlaValue is a parsed TLA+ value as TLC prints it.
type tlaValue struct {
	kind   byte // 'i' int, 's' string, 'b' bool, 'm' model value, 'r' record, 'f' function, 't' tuple
	num    int64
	str    string
	fields map[string]*tlaValue // records and functions over model values
	elems  []*tlaValue          // tuples (sequences)
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
	return fmt.Errorf("tla: expected %s at %q", what, p.s[p.pos:end])
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

func (p *tlaParser) value() (*tlaValue, error) {
	p.skip()
	if p.pos >= len(p.s) {
		return nil, p.fail("a value")
	}
	switch c := p.s[p.pos]; {
	case strings.HasPrefix(p.s[p.pos:], "<<"):
		p.pos += 2
		v := &tlaValue{kind: 't'}
		if p.eat(">>") {
			return v, nil
		}
		for {
			e, err := p.value()
			if err != nil {
				return nil, err
			}
			v.elems = append(v.elems, e)
			if p.eat(">>") {
				return v, nil
			}
			if !p.eat(",") {
				return nil, p.fail("',' or '>>'")
			}
		}
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
	case c == '[':
		p.pos++
		v := &tlaValue{kind: 'r', fields: map[string]*tlaValue{}}
		for {
			name := p.ident()
			if name == "" || !p.eat("|->") {
				return nil, p.fail("a record field")
			}
			f, err := p.value()
			if err != nil {
				return nil, err
			}
			v.fields[name] = f
			if p.eat("]") {
				return v, nil
			}
			if !p.eat(",") {
				return nil, p.fail("',' or ']'")
			}
		}
	case c == '(':
		p.pos++
		v := &tlaValue{kind: 'f', fields: map[string]*tlaValue{}}
		for {
			name := p.ident()
			if name == "" || !p.eat(":>") {
				return nil, p.fail("a function pair")
			}
			f, err := p.value()
			if err != nil {
				return nil, err
			}
			v.fields[name] = f
			if p.eat(")") {
				return v, nil
			}
			if !p.eat("@@") {
				return nil, p.fail("'@@' or ')'")
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

// ParseState reads a state as TLC prints it (`/\ var = value` lines).
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
	get := func(v *tlaValue, kind byte, what string) *tlaValue {
		if v == nil || v.kind != kind {
			if err == nil {
				err = fmt.Errorf("tla: %s is missing or of the wrong kind", what)
			}
			return &tlaValue{fields: map[string]*tlaValue{}}
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
		if err == nil {
			err = fmt.Errorf("tla: %s names unknown value %s", what, v.str)
		}
		return None
	}
	num := func(v *tlaValue, what string) int64 { return get(v, 'i', what).num }
	fn := func(name string, dom []string) []*tlaValue {
		f := get(vars[name], 'f', name)
		if err == nil && len(f.fields) != len(dom) {
			err = fmt.Errorf("tla: %s has %d entries, want %d", name, len(f.fields), len(dom))
		}
		out := make([]*tlaValue, len(dom))
		for i, d := range dom {
			out[i] = f.fields[d]
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
		r := get(ev, 'r', "table[k]").fields
		st := get(r["st"], 's', "st").str
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
		e.Closing = get(r["closing"], 'b', "closing").num == 1
		s.Table = append(s.Table, e)
	}
	for _, t := range fn("since", c.Keys) {
		s.Since = append(s.Since, num(t, "since[k]"))
	}
	for _, rv := range fn("req", c.Requests) {
		r := get(rv, 'r', "req[r]").fields
		pc := get(r["pc"], 's', "pc").str
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
			for _, e := range get(wv, 't', name+"[k]").elems {
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
