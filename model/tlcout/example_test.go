package tlcout_test

import (
	"fmt"
	"strings"

	"github.com/placementlab/placement/model/tlcout"
)

func ExampleParseOutput() {
	out := `Error: Invariant WithinCapacity is violated.
State 1: <Initial predicate>
State 2: <Admit line 7>
14 states generated, 14 distinct states found, 11 states left on queue.
`
	r, err := tlcout.ParseOutput(strings.NewReader(out), "MCBugRoomOffByOne.cfg")
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Distinct, r.Violation.Kind, r.Violation.Property, r.Violation.TraceLength)
	// Output: 14 invariant WithinCapacity 2
}

func ExampleParseState() {
	vars, err := tlcout.ParseState(`/\ now = 3
/\ gen = (t1 :> 0 @@ t2 :> 1)`)
	if err != nil {
		panic(err)
	}
	fmt.Println(vars["now"].Num, vars["gen"].Fields["t2"].Num)
	// Output: 3 1
}
