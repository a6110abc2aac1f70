//go:build placement_mutants

package etcdstore

import "os"

// activeMutant is the broken variant this test binary runs, from
// PLACEMENT_MUTANT. This file is compiled only with -tags placement_mutants.
var activeMutant = os.Getenv("PLACEMENT_MUTANT")

func mutant(name string) bool { return activeMutant == name }
