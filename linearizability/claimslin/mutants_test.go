//go:build placement_mutants

package claimslin

import (
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// caught matches what TestRoutingMem prints when it catches a variant: a
// broken guarantee, an event stream at odds with the store, or a store
// history Porcupine rejects.
var caught = regexp.MustCompile(`guarantee \d broken: [^\n]*|event streams: [^\n]*|history of \d+ operations is Illegal`)

// TestRoutingCatchesReplicaMutants runs TestRoutingMem (this test binary,
// again) under each of impl/replica's broken variants and shows each
// caught: the routing check or Porcupine fails it, not a timeout or a
// thin run. Build with -tags placement_mutants:
//
//	go test -tags placement_mutants -run TestRoutingCatchesReplicaMutants ./linearizability/claimslin/
func TestRoutingCatchesReplicaMutants(t *testing.T) {
	if os.Getenv("PLACEMENT_MUTANT") != "" {
		t.Skip("running under a variant already")
	}
	for _, v := range []string{"UnfencedClose", "NoEvictOnReset", "CloseWhileHeld", "SkipsHold", "ExpiresInUse"} {
		t.Run(v, func(t *testing.T) {
			began := time.Now()
			cmd := exec.Command(os.Args[0], "-test.run", "^TestRoutingMem$", "-test.count=1")
			cmd.Env = append(os.Environ(), "PLACEMENT_MUTANT="+v, "CLAIMSLIN_REPORT_DIR="+t.TempDir())
			out, err := cmd.CombinedOutput()
			assert.Error(t, err, "%s: TestRoutingMem passed under the variant:\n%s", v, out)
			what := caught.Find(out)
			assert.NotNil(t, what, "%s: TestRoutingMem failed, but not by a check:\n%s", v, out)
			t.Logf("%s caught in %v: %s", v, time.Since(began).Round(time.Millisecond), what)
		})
	}
}
