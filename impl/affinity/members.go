package affinity

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
)

// Worker is a worker as it registers: its id, the identity of the running
// instance (a boot id or a pod uid, which changes when the worker
// restarts and loses its caches) and the data-parallel ranks it serves.
type Worker struct {
	ID string
	// Identity names the running instance. The same identity back after a
	// failed health check is a flap and fences nothing; a new identity is a
	// restart and fences every binding to the worker.
	Identity string
	// FirstRank and Ranks: the worker serves ranks FirstRank ..
	// FirstRank+Ranks-1. Ranks 0 means no data-parallel ranks: targets to
	// the worker are worker only.
	FirstRank, Ranks int
}

// hasRank reports whether r is one of w's ranks.
func (w Worker) hasRank(r int) bool { return r >= w.FirstRank && r < w.FirstRank+w.Ranks }

// serves reports whether t is a target of w: worker only, or one of its ranks.
func (w Worker) serves(t Target) bool { return t.Worker == w.ID && (!t.HasRank || w.hasRank(t.Rank)) }

// JoinKind says what a Join did.
type JoinKind uint8

const (
	// Joined: a worker the layer did not know (or that had left).
	Joined JoinKind = iota + 1
	// Recovered: the same instance back (after Fail, or a repeated Join):
	// nothing is fenced, its bindings serve again.
	Recovered
	// Restarted: a new identity: every binding to the worker, whatever its
	// rank, is fenced, and every quarantine of an attempt on it ends.
	Restarted
)

// String names k.
func (k JoinKind) String() string {
	switch k {
	case Joined:
		return "joined"
	case Recovered:
		return "recovered"
	case Restarted:
		return "restarted"
	}
	return fmt.Sprintf("JoinKind(%d)", k)
}

// member is one worker in a membership snapshot. Snapshots are immutable:
// a change copies the map and publishes it with one atomic store, so a
// request reads one consistent membership with one atomic load.
type member struct {
	Worker
	instance uint64
	failed   bool
}

type members map[string]*member

// membership holds the published snapshot; writers serialize on mu.
type membership struct {
	mu       sync.Mutex
	snap     atomic.Pointer[members]
	instance uint64 // the last instance number given out (under mu)
}

func newMembership() *membership {
	m := &membership{}
	m.snap.Store(&members{})
	return m
}

func (m *membership) load() members { return *m.snap.Load() }

// publish stores a copy of the current snapshot changed by f (under mu).
func (m *membership) publish(f func(members)) {
	cur := m.load()
	next := make(members, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	f(next)
	m.snap.Store(&next)
}

// memberCache is a request's read of one worker in one membership
// snapshot (its binding's, read at Start): a later read of the same
// worker in the same snapshot (snapshots are immutable) takes it instead
// of a map lookup.
type memberCache struct {
	snap *members
	m    *member
}

// lookup returns worker's entry in the current snapshot of ms (and the
// snapshot), from c when c read it there.
func (c *memberCache) lookup(ms *membership, worker string) (*member, bool, *members) {
	snap := ms.snap.Load()
	if c.m != nil && snap == c.snap && c.m.ID == worker {
		return c.m, true, snap
	}
	m, ok := (*snap)[worker]
	return m, ok, snap
}

// current returns w's member entry if t's worker is a member.
func (ms members) current(worker string) (*member, bool) {
	w, ok := ms[worker]
	return w, ok
}

// WorkerState is a worker's state in the membership.
type WorkerState uint8

const (
	// WorkerGone: not a member (never joined, or left).
	WorkerGone WorkerState = iota
	// WorkerUp: a member that is dispatched to.
	WorkerUp
	// WorkerFailed: a member whose health check failed: not dispatched to
	// until it joins again; its bindings move when their sessions' next
	// requests come, and stay where they are if it recovers first.
	WorkerFailed
)

// String names s.
func (s WorkerState) String() string {
	switch s {
	case WorkerGone:
		return "gone"
	case WorkerUp:
		return "up"
	case WorkerFailed:
		return "failed"
	}
	return fmt.Sprintf("WorkerState(%d)", s)
}

func (m *member) state() WorkerState {
	if m.failed {
		return WorkerFailed
	}
	return WorkerUp
}

// validate checks a Worker given to Join.
func (w Worker) validate() error {
	switch {
	case w.ID == "":
		return &WorkerError{Worker: w.ID, Reason: "empty worker id"}
	case len(w.ID) > MaxWorkerIDBytes:
		return &WorkerError{Worker: w.ID[:32] + "...", Reason: fmt.Sprintf("worker id of %d bytes exceeds %d", len(w.ID), MaxWorkerIDBytes)}
	case !printable(w.ID):
		return &WorkerError{Worker: w.ID, Reason: "worker id is not printable UTF-8 (metrics label it with the id)"}
	case w.Identity == "":
		return &WorkerError{Worker: w.ID, Reason: "empty instance identity"}
	case w.Ranks < 0 || w.FirstRank < 0:
		return &WorkerError{Worker: w.ID, Reason: fmt.Sprintf("negative rank range %d+%d", w.FirstRank, w.Ranks)}
	case w.Ranks > maxRanks || w.FirstRank > maxRanks:
		return &WorkerError{Worker: w.ID, Reason: fmt.Sprintf("rank range %d+%d beyond %d", w.FirstRank, w.Ranks, maxRanks)}
	}
	return nil
}

// MaxWorkerIDBytes bounds a worker id (a host:port, a pod name, a URL).
const MaxWorkerIDBytes = 256

// printable reports whether s is valid UTF-8 without control characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// maxRanks bounds a worker's rank numbers (a data-parallel group of more
// than 65,536 ranks is a configuration error).
const maxRanks = 1 << 16
