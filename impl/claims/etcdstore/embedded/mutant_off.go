//go:build !placement_mutants

package embedded

// mutant reports whether the named deliberately broken variant is active.
// In the production build it is constant false and the compiler removes the
// broken branches; `-tags placement_mutants` builds the bug zoo (see
// mutant_on.go). The variants:
//
//   - NoReadIdleTimeout: NewClient's connections have no read idle
//     timeout: a dead connection is noticed only by gRPC's keepalive
//     (10 s and its timeout, and never with no stream open).
//
// mutant_test.go checks that each of them fails a test of the package.
func mutant(string) bool { return false }
