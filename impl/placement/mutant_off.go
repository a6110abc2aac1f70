//go:build !placement_mutants

package placement

// mutant reports whether the named deliberately broken variant is active.
// In the production build it is constant false and the compiler removes the
// broken branches; `-tags placement_mutants` builds the bug zoo (see
// mutant_on.go and linearizability/mutants).
func mutant(string) bool { return false }

// widenWindow does nothing outside the bug zoo (see mutant_on.go).
func widenWindow() {}
