package tlcout

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Kind is the kind of a parsed TLA+ value.
type Kind byte

// The kinds of value TLC prints in states.
const (
	KindInt    Kind = 'i' // an integer: Num
	KindString Kind = 's' // a string: Str
	KindBool   Kind = 'b' // TRUE or FALSE: Num is 1 or 0
	KindModel  Kind = 'm' // a model value (a bare name): Str
	KindRecord Kind = 'r' // [f |-> v, ...]: Fields
	KindFunc   Kind = 'f' // (a :> v @@ ...), a function over model values: Fields
	KindTuple  Kind = 't' // <<v, ...>>, a tuple or sequence: Elems
	KindSet    Kind = 'e' // {v, ...}: Elems
)

// Value is a TLA+ value as TLC prints it.
type Value struct {
	Kind   Kind
	Num    int64
	Str    string
	Fields map[string]*Value // records, and functions over model values
	Elems  []*Value          // tuples (sequences) and sets
}

// SyntaxError is returned by ParseState for text that is not a state as
// TLC prints one.
type SyntaxError struct {
	Want string // what the parser expected
	Near string // the text where it expected it (up to 30 bytes)
}

// Error says what was expected where.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("tla: expected %s at %q", e.Want, e.Near)
}

type parser struct {
	s   string
	pos int
}

func (p *parser) skip() {
	for p.pos < len(p.s) && strings.ContainsRune(" \t\r\n", rune(p.s[p.pos])) {
		p.pos++
	}
}

func (p *parser) eat(tok string) bool {
	p.skip()
	if strings.HasPrefix(p.s[p.pos:], tok) {
		p.pos += len(tok)
		return true
	}
	return false
}

func (p *parser) fail(what string) error {
	end := min(p.pos+30, len(p.s))
	return &SyntaxError{Want: what, Near: p.s[p.pos:end]}
}

func (p *parser) ident() string {
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

// list parses values separated by ',' up to close (the opener is eaten).
func (p *parser) list(close string) ([]*Value, error) {
	var out []*Value
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

// pairs parses name sep value pairs separated by next up to close (the
// opener is eaten): a record's fields or a function's pairs.
func (p *parser) pairs(v *Value, sep, next, close, what string) (*Value, error) {
	for {
		name := p.ident()
		if name == "" || !p.eat(sep) {
			return nil, p.fail(what)
		}
		f, err := p.value()
		if err != nil {
			return nil, err
		}
		v.Fields[name] = f
		if p.eat(close) {
			return v, nil
		}
		if !p.eat(next) {
			return nil, p.fail("'" + next + "' or '" + close + "'")
		}
	}
}

func (p *parser) value() (*Value, error) {
	p.skip()
	if p.pos >= len(p.s) {
		return nil, p.fail("a value")
	}
	switch c := p.s[p.pos]; {
	case strings.HasPrefix(p.s[p.pos:], "<<"):
		p.pos += 2
		elems, err := p.list(">>")
		return &Value{Kind: KindTuple, Elems: elems}, err
	case c == '{':
		p.pos++
		elems, err := p.list("}")
		return &Value{Kind: KindSet, Elems: elems}, err
	case c == '"':
		end := strings.IndexByte(p.s[p.pos+1:], '"')
		if end < 0 {
			return nil, p.fail("a closing quote")
		}
		v := &Value{Kind: KindString, Str: p.s[p.pos+1 : p.pos+1+end]}
		p.pos += end + 2
		return v, nil
	case c == '-' || c >= '0' && c <= '9':
		i := p.pos
		p.pos++
		for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
			p.pos++
		}
		n, err := strconv.ParseInt(p.s[i:p.pos], 10, 64)
		return &Value{Kind: KindInt, Num: n}, err
	case c == '[':
		p.pos++
		return p.pairs(&Value{Kind: KindRecord, Fields: map[string]*Value{}}, "|->", ",", "]", "a record field")
	case c == '(':
		p.pos++
		return p.pairs(&Value{Kind: KindFunc, Fields: map[string]*Value{}}, ":>", "@@", ")", "a function pair")
	default:
		name := p.ident()
		switch name {
		case "":
			return nil, p.fail("a value")
		case "TRUE", "FALSE":
			return &Value{Kind: KindBool, Num: map[bool]int64{true: 1}[name == "TRUE"]}, nil
		}
		return &Value{Kind: KindModel, Str: name}, nil
	}
}

// ParseState reads a state as TLC prints it, `/\ var = value` lines, into
// its variables' values. Text that is not such a state is a *SyntaxError.
func ParseState(text string) (map[string]*Value, error) {
	vars := map[string]*Value{}
	p := &parser{s: text}
	for {
		p.skip()
		if p.pos >= len(p.s) {
			return vars, nil
		}
		if !p.eat(`/\`) {
			return nil, p.fail(`'/\'`)
		}
		name := p.ident()
		if !p.eat("=") {
			return nil, p.fail("'='")
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		vars[name] = v
	}
}

// ReadDump reads a TLC `-dump` file, calling yield with the text of each
// state in it (its `/\ var = value` lines) and stopping at yield's first
// error.
func ReadDump(r io.Reader, yield func(text string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var cur strings.Builder
	flush := func() error {
		if strings.TrimSpace(cur.String()) == "" {
			return nil
		}
		text := cur.String()
		cur.Reset()
		return yield(text)
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
