//go:build placement_mutants

package placement

import (
	"os"
	"runtime"
)

// activeMutant is the broken variant this test binary runs, from
// PLACEMENT_MUTANT. This file is compiled only with -tags placement_mutants.
var activeMutant = os.Getenv("PLACEMENT_MUTANT")

func mutant(name string) bool { return activeMutant == name }

// widenWindow yields a few times inside a race window of a variant, so
// that a short concurrent run lands other operations in it.
func widenWindow() {
	for i := 0; i < 4; i++ {
		runtime.Gosched()
	}
}
