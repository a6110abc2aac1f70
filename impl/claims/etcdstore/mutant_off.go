//go:build !placement_mutants

package etcdstore

// mutant reports whether the named deliberately broken variant is active.
// In the production build it is constant false and the compiler removes the
// broken branches; `-tags placement_mutants` builds the bug zoo (see
// mutant_on.go). The variants:
//
//   - ResolveTwoReads: Resolve reads the claim, then its worker's
//     registration in a second read, and answers "stale" with the claim
//     of the first read, which may no longer be current when the
//     registration is read (linearizability/claimslin found it).
//   - EOFNotUnavailable: a transport's error that is no gRPC status (the
//     bare io.EOF etcd's client returns when a connection drops under a
//     KeepAliveOnce), or gRPC's Internal status of a broken transport, is
//     not taken for the store being unreachable: Touch returns a plain
//     error, and the store is not marked down.
//   - RefreshLossUnmarked: the keepalive that restarts a rewritten
//     claim's idle expiry (after Quarantine, Resolve accepted, a deferred
//     Close) fails for the store's being unreachable, and the store is
//     not marked down (no event stream is told to reset).
//   - SessionNotResumed: a session that ended on this side (its
//     keepalives unanswered for a TTL, as in a quorum loss) is replaced by
//     a new lease although the old one lives on in etcd: the holds and
//     registrations on the old one expire a TTL after the heal, and
//     every worker registered through the store is fenced.
//   - RegistrationsNotRewritten: a new session lease (the old one
//     expired) does not carry the registrations the store wrote: the
//     workers drop out of membership although they survived the outage.
//   - MoveIgnoresRegistration: Move's write is fenced by the claim's
//     revision only, not by the target's registration read with it: a
//     target that restarts between the read and the write gets a claim
//     under its old generation, stale from birth.
//   - CloseTrustsOldRead: Close rewrites a claim as Closing from the
//     claim the store's Hold read at an earlier revision, not the one at
//     the revision the Close is fenced by: a claim another replica moved
//     closes under its old target.
//   - LeaseReusedTooLate: a lease of a deleted claim is reused however
//     long ago it was granted: the new claim on it may expire sooner
//     than IdleTTL after its write.
//   - LeaseReusedWhileHeld: a Close that leaves the claim Closing
//     (another replica holds it) still gives its lease to the store's
//     next new claim: two claims share a lease, and a Touch of one keeps
//     the other alive (or both expire together).
//
// mutant_test.go checks that each of them fails a test of the package.
func mutant(string) bool { return false }
