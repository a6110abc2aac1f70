//go:build placement_mutants

package replica

import (
	"testing"
	"time"

	"github.com/placementlab/placement/internal/mutanttest"
)

// variants are the package's broken variants (mutant_off.go), each with
// the contract test that must fail under it.
var variants = []mutanttest.Variant{
	{"UnfencedClose", "TestContract_StaleCloseKeepsNewerClaim"},
	{"NoEvictOnReset", "TestContract_ResetEvicts"},
	{"CloseWhileHeld", "TestContract_CloseWaitsForLocalLeases"},
	{"SkipsHold", "TestContract_CloseDeferredWhileAnotherHolds"},
	{"ExpiresInUse", "TestContract_NoExpiryInUse"},
	{"NoRehold", "TestContract_ReconnectHoldsLineageAgain"},
	{"LeasesPerRecord", "TestGap_LeasesCountedPerSession"},
	{"ResolveUnchecked", "TestGap_ResolveUnwrittenChecksRevision"},
	{"DropsDeferredDelete", "TestGap_DeferredDeleteAppliedAfterResolve"},
	{"DefersEveryRecord", "TestGap_DeleteDuringQuarantineWriteEvictsBinding"},
	{"ForgetsLateQuarantine", "TestGap_LateQuarantineWriteResolved"},
	{"DropsLeasedSlot", "TestGap_SlotKeptWhileLeased"},
	{"IgnoresStoreTTL", "TestGap_IdleTTLFromStore"},
	{"UnsettledQuarantine", "TestGap_LostQuarantineReplySettled"},
	{"UnsettledResolve", "TestGap_LostResolveReplySettled"},
	{"UnsettledClose", "TestGap_LostCloseReplyCounted"},
	{"SerialTouches", "TestGap_SlowStoreKeepsClaimsInUse"},
	{"DropsSecondQuarantine", "TestGap_SecondAmbiguousQuarantineRecorded"},
	{"UnsettledHold", "TestGap_LostHoldReplyGivenUp"},
	{"UnsettledCreate", "TestGap_LostCreateReplySettled"},
	{"UnfencedMove", "TestContract_MoveFirstWins"},
	{"UnsettledMove", "TestGap_LostMoveReplySettled"},
	{"KeepsExpiredQuarantine", "TestGap_ExpiredQuarantineSettledInStore"},
	{"ReopensSettled", "TestGap_SettledQuarantineNotReopened"},
	{"OldLineageKeepsClaim", "TestGap_MoveEndsOldLineageLeases"},
	{"AdoptsClosing", "TestGap_ReadWaitsForOwnClose"},
	{"ClosesEndedBinding", "TestGap_FinalOnEndedBindingKeepsReadoptedClaim"},
	{"DropsRefusedSlot", "TestGap_RefusalSurvivesKeepalive"},
	{"ForgetsAdoptedRefusal", "TestGap_AdoptedClaimRefusalRemembered"},
	{"RefusedLeasesKeepClaim", "TestGap_RefusedLeasesKeepNothing"},
	{"WriteLossMeansDown", "TestGap_LostWriteReplyNotDown"},
	{"ClosesUnderAdopter", "TestGap_AdopterJoinsClosingBinding"},
	{"PlacerLeaseLate", "TestGap_PlacerLeaseCountedBeforeCommit"},
	{"BoundForgetsRefusal", "TestGap_RefusalDuringCommitStands"},
	{"LateEviction", "TestGap_NoHitAfterLastLease"},
	{"RefusesStaleClaim", "TestGap_StaleQuarantineReadIsNotRefused"},
}

// TestVariantsCaught re-runs this test binary under each variant with its
// catcher, and checks that the catcher fails (and passes with no
// variant). It runs only in the bug-zoo build (-tags placement_mutants)
// with no variant active.
func TestVariantsCaught(t *testing.T) {
	mutanttest.Run(t, activeMutant, 60*time.Second, variants)
}
