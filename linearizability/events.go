package linearizability

import (
	"fmt"
	"sync"

	"github.com/placementlab/placement/impl/placement"
)

// Lifecycle checks the order of the events an Observer receives, key by
// key: the coordinator promises each key's events in the order its changes
// happened, so each event must be possible in the state that key's earlier
// events left it in; and the events of an attempt or a binding name its
// target. Use Observe as the Observer (it is safe for
// concurrent use) and Err after the run.
type Lifecycle struct {
	mu    sync.Mutex
	state map[string]lifeState
	seq   map[string]uint64 // each key's last Seq
	err   error
	n     int
}

type lifeState uint8

const (
	lifeAbsent lifeState = iota
	lifeInit             // reserved or dispatching
	lifeQuarantined
	lifeBound
	lifeSettled // resolved: bound or absent, the next event tells
)

var lifeNames = [...]string{"Absent", "Init", "Quarantined", "Bound", "Settled"}

// next is the state after kind in state from, or false if kind cannot
// happen there.
func (from lifeState) next(kind placement.EventKind) (lifeState, bool) {
	switch kind {
	case placement.EventReserved:
		return lifeInit, from == lifeAbsent || from == lifeSettled
	case placement.EventCommitted:
		return lifeBound, from == lifeInit || from == lifeQuarantined
	case placement.EventRolledBack:
		return lifeInit, from == lifeInit
	case placement.EventQuarantined:
		return lifeQuarantined, from == lifeInit
	case placement.EventResolved:
		return lifeSettled, from == lifeQuarantined
	case placement.EventRemoved:
		return lifeAbsent, from != lifeAbsent
	case placement.EventExpired:
		return lifeAbsent, from == lifeBound || from == lifeSettled
	case placement.EventCapacityRejected:
		return lifeAbsent, from == lifeAbsent || from == lifeSettled
	case placement.EventQuarantineExpired, placement.EventQuarantineDropped:
		return lifeAbsent, from == lifeQuarantined
	}
	return from, false
}

// carriesTarget reports whether events of kind always name their attempt's
// or binding's target (Removed does only when a binding ends).
func carriesTarget(kind placement.EventKind) bool {
	switch kind {
	case placement.EventCommitted, placement.EventRolledBack, placement.EventQuarantined,
		placement.EventResolved, placement.EventExpired:
		return true
	}
	return false
}

// Observe records ev; use it as Config.Observer.
func (l *Lifecycle) Observe(ev placement.Event[int]) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == nil {
		l.state, l.seq = map[string]lifeState{}, map[string]uint64{}
	}
	l.n++
	from := l.state[ev.Key]
	to, ok := from.next(ev.Kind)
	switch {
	case l.err != nil:
	case !ok:
		l.err = fmt.Errorf("key %s: event %v (attempt %d, seq %d) cannot follow state %s",
			ev.Key, ev.Kind, ev.Attempt, ev.Seq, lifeNames[from])
	case ev.Seq <= l.seq[ev.Key]:
		l.err = fmt.Errorf("key %s: event %v has seq %d after seq %d", ev.Key, ev.Kind, ev.Seq, l.seq[ev.Key])
	case !ev.HasTarget && carriesTarget(ev.Kind):
		l.err = fmt.Errorf("key %s: event %v (attempt %d, seq %d) names no target", ev.Key, ev.Kind, ev.Attempt, ev.Seq)
	}
	l.state[ev.Key], l.seq[ev.Key] = to, ev.Seq
}

// Err returns the first out-of-order event, if any.
func (l *Lifecycle) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Events returns how many events were observed.
func (l *Lifecycle) Events() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}
