package tlcout

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const passing = `TLC2 Version 2026.12.01.060837 (rev: 1)
Running breadth-first search Model-Checking with fp 1 and seed 2 with 1 worker on 2 cores
Finished computing initial states: 1 distinct state generated.
Model checking completed. No error has been found.
1,234 states generated, 567 distinct states found, 0 states left on queue.
The depth of the complete state graph search is 9.
Finished in 2min 03s at (2026-12-01 06:08:40)
`

const failing = `TLC2 Version 2026.12.01.060837 (rev: 1)
Running breadth-first search Model-Checking with fp 1 and seed 2 with 1 worker on 2 cores
Error: Invariant WithinCapacity is violated.
Error: The behavior up to this point is:
State 1: <Initial predicate>
/\ now = 0
State 2: <Tick line 1>
/\ now = 1
State 3: <Tick line 1>
/\ now = 2
14 states generated, 14 distinct states found, 11 states left on queue.
The depth of the complete state graph search is 3.
Finished in 04s at (2026-12-01 06:08:40)
`

func TestParseOutput(t *testing.T) {
	r, err := ParseOutput(strings.NewReader(passing), "MCX.cfg")
	require.NoError(t, err)
	assert.Equal(t, Result{Config: "MCX.cfg", TLCVersion: "2026.12.01.060837", Workers: 1,
		Distinct: 567, Generated: 1234, Depth: 9, Seconds: 123}, r)

	r, err = ParseOutput(strings.NewReader(failing), "MCBugX.cfg")
	require.NoError(t, err)
	assert.Equal(t, &Violation{Property: "WithinCapacity", Kind: "invariant", TraceLength: 3}, r.Violation)
	assert.Equal(t, 4, r.Seconds)

	_, err = ParseOutput(strings.NewReader("TLC2 Version 1\nError: out of memory\n"), "MCX.cfg")
	require.ErrorIs(t, err, ErrUnfinished)
}

func TestDiffCounts(t *testing.T) {
	want := Result{Config: "MCX.cfg", Distinct: 5, Generated: 9, Depth: 3, StateSetHash: StateSetHash([]string{"a", "b"})}
	assert.Empty(t, want.DiffCounts(5, 9, 3, StateSetHash([]string{"b", "a"})))
	// Broken variants of the explorer's report: each must be told apart.
	assert.Len(t, want.DiffCounts(6, 9, 3, want.StateSetHash), 1)
	assert.Len(t, want.DiffCounts(5, 9, 4, want.StateSetHash), 1)
	assert.Len(t, want.DiffCounts(5, 9, 3, StateSetHash([]string{"a", "c"})), 1)
	want.StateSetHash = ""
	assert.Equal(t, []string{"TLC data for MCX.cfg has no state-set hash"}, want.DiffCounts(5, 9, 3, "x"))
}

func TestStateSetHash(t *testing.T) {
	// Length-prefixed: {"ab"} and {"a","b"} differ.
	assert.NotEqual(t, StateSetHash([]string{"ab"}), StateSetHash([]string{"a", "b"}))
	assert.Equal(t, StateSetHash([]string{"x", "y"}), StateSetHash([]string{"y", "x"}))
}

func TestParseState(t *testing.T) {
	vars, err := ParseState(`/\ now = -3
/\ up = (r1 :> TRUE @@ r2 :> FALSE)
/\ t = [st |-> "bound", holder |-> NoReq]
/\ q = (k1 :> <<r1, r2>> @@ k2 :> <<>>)
/\ s = {1, 2}`)
	require.NoError(t, err)
	assert.Equal(t, &Value{Kind: KindInt, Num: -3}, vars["now"])
	assert.Equal(t, &Value{Kind: KindBool, Num: 0}, vars["up"].Fields["r2"])
	assert.Equal(t, KindRecord, vars["t"].Kind)
	assert.Equal(t, &Value{Kind: KindModel, Str: "NoReq"}, vars["t"].Fields["holder"])
	assert.Len(t, vars["q"].Fields["k1"].Elems, 2)
	assert.Empty(t, vars["q"].Fields["k2"].Elems)
	assert.Equal(t, KindSet, vars["s"].Kind)

	for _, bad := range []string{`now = 1`, `/\ now 1`, `/\ t = [st |-> 1 @@ x |-> 2]`, `/\ q = <<1 2>>`,
		`/\ f = (a :> 1, b :> 2)`, `/\ s = "open`, `/\ x =`} {
		_, err := ParseState(bad)
		var se *SyntaxError
		require.ErrorAs(t, err, &se, bad)
		assert.Contains(t, se.Error(), "tla: expected ", bad)
	}
}

func TestReadDump(t *testing.T) {
	dump := "State 1:\n/\\ now = 0\n\nState 2:\n/\\ now = 1\n\n"
	var got []string
	require.NoError(t, ReadDump(strings.NewReader(dump), func(text string) error {
		got = append(got, strings.TrimSpace(text))
		return nil
	}))
	assert.Equal(t, []string{`/\ now = 0`, `/\ now = 1`}, got)
	stop := errors.New("stop")
	n := 0
	err := ReadDump(strings.NewReader(dump), func(string) error { n++; return stop })
	require.ErrorIs(t, err, stop)
	assert.Equal(t, 1, n)
}

// keysOf is a DumpKeys that takes each state's text as its key.
func keysOf(_ string, dump io.Reader, yield func(string)) error {
	return ReadDump(dump, func(text string) error { yield(strings.TrimSpace(text)); return nil })
}

func TestRecord(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "tlc.out")
	dump := filepath.Join(dir, "states.dump")
	o := filepath.Join(dir, "r.json")
	out2 := strings.Replace(passing, "567 distinct", "2 distinct", 1)
	require.NoError(t, os.WriteFile(out, []byte(out2), 0o644))
	require.NoError(t, os.WriteFile(dump, []byte("State 1:\n/\\ x = 1\n\nState 2:\n/\\ x = 2\n\nState 3:\n/\\ x = 1\n"), 0o644))
	require.NoError(t, Record("spec/MCX.cfg", out, dump, o, keysOf))
	r, err := ReadResult(o)
	require.NoError(t, err)
	assert.Equal(t, StateSetHash([]string{`/\ x = 1`, `/\ x = 2`}), r.StateSetHash)
	assert.Equal(t, "MCX.cfg", r.Config)
	b, err := os.ReadFile(o)
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf(`{
  "config": "MCX.cfg",
  "tlc_version": "2026.12.01.060837",
  "workers": 1,
  "distinct": 2,
  "generated": 1234,
  "depth": 9,
  "tlc_seconds": 123,
  "state_set_hash": %q,
  "violation": null
}
`, r.StateSetHash), string(b))

	// A dump with more states than TLC reported, and a violated config's dump, are refused.
	require.NoError(t, os.WriteFile(out, []byte(passing), 0o644))
	require.ErrorContains(t, Record("MCX.cfg", out, dump, o, keysOf), "holds 2 distinct states, TLC reported 567")
	require.NoError(t, os.WriteFile(out, []byte(failing), 0o644))
	require.ErrorIs(t, Record("MCX.cfg", out, dump, o, keysOf), ErrPartialDump)
	require.NoError(t, Record("MCX.cfg", out, "", o, keysOf))
	require.Error(t, Record("", out, "", o, keysOf))
	require.ErrorIs(t, Record("MCX.cfg", filepath.Join(dir, "none"), "", o, keysOf), os.ErrNotExist)
}

func TestResultPath(t *testing.T) {
	assert.Equal(t, filepath.Join("spec", "tla", "results", "MCClaims.json"), ResultPath(filepath.Join("spec", "tla", "MCClaims.cfg")))
}

func TestCompare(t *testing.T) {
	pass := Result{Config: "MCX.cfg", Distinct: 5, Generated: 9, Depth: 3, StateSetHash: "h"}
	assert.Empty(t, pass.Compare(5, 9, 3, "h", nil))
	assert.Len(t, pass.Compare(5, 9, 3, "h", &Violation{Property: "P", Kind: "invariant", TraceLength: 2}), 1)
	assert.Len(t, pass.Compare(5, 9, 3, "g", nil), 1)
	fail := Result{Config: "MCBugX.cfg", Violation: &Violation{Property: "P", Kind: "invariant", TraceLength: 3}}
	assert.Empty(t, fail.Compare(1, 1, 1, "", &Violation{Property: "P", Kind: "invariant", TraceLength: 3}))
	assert.Len(t, fail.Compare(1, 1, 1, "", nil), 1)
	assert.Len(t, fail.Compare(1, 1, 1, "", &Violation{Property: "Q", Kind: "invariant", TraceLength: 3}), 1)
	assert.Len(t, fail.Compare(1, 1, 1, "", &Violation{Property: "P", Kind: "action property", TraceLength: 3}), 1)
	assert.Len(t, fail.Compare(1, 1, 1, "", &Violation{Property: "P", Kind: "invariant", TraceLength: 4}), 1)
	fail.Violation.Kind = "liveness" // not shortest in TLC: any length will do
	assert.Empty(t, fail.Compare(1, 1, 1, "", &Violation{Property: "P", Kind: "liveness", TraceLength: 9}))
}
