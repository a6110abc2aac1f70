package affinity

import "fmt"

// Target is where a request goes: a worker and, when the worker serves
// data-parallel ranks, one of them. A target without a rank (HasRank
// false) is "worker only": any rank of that worker.
type Target struct {
	Worker  string
	Rank    int
	HasRank bool
}

// WorkerOnly returns the target "any rank of worker".
func WorkerOnly(worker string) Target { return Target{Worker: worker} }

// Ranked returns the target "rank of worker".
func Ranked(worker string, rank int) Target { return Target{Worker: worker, Rank: rank, HasRank: true} }

// String formats t as worker or worker/rank.
func (t Target) String() string {
	if !t.HasRank {
		return t.Worker
	}
	return fmt.Sprintf("%s/%d", t.Worker, t.Rank)
}

// Accepts reports whether a dispatch to d agrees with a binding (or a pin)
// to t: the same worker, and, when t names a rank, the same rank. A
// worker-only t accepts any rank of its worker (the anchor's rule V2).
func (t Target) Accepts(d Target) bool {
	return t.Worker == d.Worker && (!t.HasRank || (d.HasRank && d.Rank == t.Rank))
}

// agreesWith reports whether a pin p agrees with a binding b (the anchor's
// rule V1): the same worker; if both name a rank, the same one; and a pin
// adds no rank to a worker-only binding.
func agreesWith(p, b Target) bool {
	if p.Worker != b.Worker {
		return false
	}
	if p.HasRank && !b.HasRank {
		return false
	}
	return !p.HasRank || !b.HasRank || p.Rank == b.Rank
}

// slot is the core coordinator's target: a Target at one instance of its
// worker. The instance (the worker's epoch in the membership) is what
// makes a restart fence every binding to the worker, whatever its rank, in
// one step: a binding to an older instance is stale for the layer the
// moment the membership moves on (see members.go).
type slot struct {
	worker   string
	rank     int
	hasRank  bool
	instance uint64
}

func slotOf(t Target, instance uint64) slot {
	return slot{worker: t.Worker, rank: t.Rank, hasRank: t.HasRank, instance: instance}
}

func (s slot) target() Target { return Target{Worker: s.worker, Rank: s.rank, HasRank: s.hasRank} }
