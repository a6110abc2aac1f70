// Package mutanttest checks a package's own bug-zoo variants (its
// mutant_off.go/mutant_on.go hooks, build tag placement_mutants): its
// mutant_test.go lists each variant with the test that must catch it, and
// its TestVariantsCaught calls Run. linearizability/cmd/mutants reads the
// same table (its rows must stay in the form {"Variant", "TestCatcher"}).
package mutanttest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Variant is a broken variant, by the name its mutant("Name") hooks test,
// and the test that must fail under it: {"Name", "TestCatcher"}. (An
// array, not a struct, so that the tables' rows stay unkeyed and vet
// clean.)
type Variant [2]string

// Run re-runs the running test binary under each variant with its catcher
// (PLACEMENT_MUTANT set to the variant, -test.run=^Catcher$), and checks
// that the catcher fails, and passes with no variant. Each run is bounded
// by timeout. It skips when active, the variant this binary runs, is not
// empty: only the binary with no variant active re-runs.
func Run(t *testing.T, active string, timeout time.Duration, variants []Variant) {
	t.Helper()
	if active != "" {
		t.Skip("a variant is active")
	}
	run := func(variant, test string) (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
		cmd.Env = append(os.Environ(), "PLACEMENT_MUTANT="+variant)
		out, err := cmd.CombinedOutput()
		return err == nil, string(out)
	}
	for _, v := range variants {
		name, catcher := v[0], v[1]
		t.Run(name, func(t *testing.T) {
			ok, out := run("", catcher)
			assert.True(t, ok, "%s fails with no variant:\n%s", catcher, out)
			ok, out = run(name, catcher)
			assert.False(t, ok, "%s passes under %s:\n%s", catcher, name, out)
		})
	}
}
