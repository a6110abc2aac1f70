//go:build placement_mutants

package etcdstore

import (
	"testing"
	"time"

	"github.com/placementlab/placement/internal/mutanttest"
)

// variants are the package's broken variants (mutant_off.go), each with
// the test that must fail under it.
var variants = []mutanttest.Variant{
	{"ResolveTwoReads", "TestResolveJudgesOneMoment"},
	{"EOFNotUnavailable", "TestTouchConnectionCut"},
	{"RefreshLossUnmarked", "TestRefreshConnectionCut"},
	{"SessionNotResumed", "TestQuorumLossKeepsRegistrations"},
	{"RegistrationsNotRewritten", "TestSessionLost"},
	{"MoveIgnoresRegistration", "TestMoveJudgesOneMoment"},
	{"CloseTrustsOldRead", "TestCloseWritesTheClaimAtItsRevision"},
	{"LeaseReusedTooLate", "TestClaimLeasesReused"},
	{"LeaseReusedWhileHeld", "TestClaimLeasesReused"},
}

// TestVariantsCaught re-runs this test binary under each variant with its
// catcher, and checks that the catcher fails (and passes with no
// variant). It runs only in the bug-zoo build (-tags placement_mutants)
// with no variant active.
func TestVariantsCaught(t *testing.T) {
	mutanttest.Run(t, activeMutant, 120*time.Second, variants)
}
