//go:build !placement_mutants

package replica

// mutant reports whether the named deliberately broken variant is active.
// In the production build it is constant false and the compiler removes the
// broken branches; `-tags placement_mutants` builds the bug zoo (see
// mutant_on.go). The variants:
//
//   - UnfencedClose: a terminal close uses the store's current revision,
//     not the one the replica holds (it deletes a newer claim).
//   - NoEvictOnReset: a Reset leaves the cached entries (a replica keeps
//     routing to a claim that ended while its stream lost events).
//   - CloseWhileHeld: a final request closes the claim while other local
//     leases on it remain.
//   - SkipsHold: the replica never tells the store it holds a claim, so
//     another replica's close deletes it under this one's leases.
//   - ExpiresInUse: no keepalive Touch while leases are held (a claim in
//     use expires).
//   - NoRehold: a replica that regains the store (a Reset), or whose hold
//     failed, does not hold again the claims it has requests in flight on
//     (claims.HoldLineage): another replica's close deletes the claim
//     under them (linearizability/claimsconf's finding D2).
//
// mutant_test.go checks that each of them fails a contract test.
func mutant(string) bool { return false }
