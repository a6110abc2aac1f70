package peers

import (
	"time"

	"github.com/placementlab/placement/benchmarks"
	"github.com/placementlab/placement/impl/placement"
)

type placementLease = placement.Lease[benchmarks.Worker]

// checkCoordinator checks the core on a manual clock (its default clock
// cannot be moved): the same checks as the peers, the TTL being
// benchmarks.TTL.
func checkCoordinator() error {
	p := benchmarks.NewManualCoordinator(16)
	defer p.Close()
	if err := checkBasic(p); err != nil {
		return err
	}
	return checkIdle(p, time.Duration(benchmarks.TTL), func(d time.Duration) { _ = p.Clk.AdvanceBy(d) })
}
