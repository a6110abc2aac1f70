//go:build !placement_mutants

package policyqueue

// mutant reports whether the named deliberately broken variant is active:
// constant false outside the bug zoo (see mutant_on.go).
func mutant(string) bool { return false }
