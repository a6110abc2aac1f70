//go:build placement_mutants

package replica

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// variants are the package's broken variants (mutant_off.go), each with
// the contract test that must fail under it.
var variants = []struct{ name, catcher string }{
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
}

// TestVariantsCaught re-runs this test binary under each variant with its
// catcher, and checks that the catcher fails (and passes with no
// variant). It runs only in the bug-zoo build (-tags placement_mutants)
// with no variant active.
func TestVariantsCaught(t *testing.T) {
	if activeMutant != "" {
		t.Skip("a variant is active")
	}
	run := func(variant, test string) (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
		cmd.Env = append(os.Environ(), "PLACEMENT_MUTANT="+variant)
		out, err := cmd.CombinedOutput()
		return err == nil, string(out)
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			ok, out := run("", v.catcher)
			assert.True(t, ok, "%s fails with no variant:\n%s", v.catcher, out)
			ok, out = run(v.name, v.catcher)
			assert.False(t, ok, "%s passes under %s:\n%s", v.catcher, v.name, out)
		})
	}
}
