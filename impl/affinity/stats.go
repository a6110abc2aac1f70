package affinity

import "sort"

// counters are the layer's cumulative counts, each on its own cache line.
type counters struct {
	hits, binds, waits, errors, staleAtBirth           counter
	quarantined, resolvedAccepted, resolvedNotAccepted counter
	quarantineExpired, quarantineDropped, expired      counter
	unpinned                                           [numCauses]counter
	moves                                              [numMoveCauses]counter
}

// Stats is what an operator watches. The counters are cumulative (they
// never go down); Live, Quarantined and Workers are gauges.
type Stats struct {
	// Hits: later turns served by their session's live binding (a
	// dispatch to it that was Accepted).
	Hits uint64
	// Binds: new bindings (a placing dispatch accepted, late or in time,
	// or a quarantine resolved Accepted through Resolve), not counting
	// those stale at birth.
	Binds uint64
	// Waits: requests that waited while another request placed their session.
	Waits uint64
	// Unpinned counts requests routed unpinned, by Cause.
	Unpinned [NumCauses]uint64
	// Moves counts bindings moved, by MoveCause: a refused hit's binding
	// when its fenced invalidation removes it (once for concurrent
	// refusals of one binding version, and not for a refusal on a version
	// another request's move had already ended); the others when the
	// request that gave the binding up places the session again (a request
	// that finds it placed by someone else meanwhile moved nothing).
	Moves [NumMoveCauses]uint64
	// QuarantinesOpened, ResolvedAccepted, ResolvedNotAccepted,
	// QuarantinesExpired (QuarantineTTL) and QuarantinesDropped (the
	// worker restarted or left): the quarantines' lives.
	QuarantinesOpened, ResolvedAccepted, ResolvedNotAccepted uint64
	QuarantinesExpired, QuarantinesDropped                   uint64
	// Expirations: bindings that ended idle past their TTL.
	Expirations uint64
	// StaleAtBirth: accepted placing dispatches whose worker restarted
	// before the commit (served, not bound).
	StaleAtBirth uint64
	// Errors: typed errors the layer returned to requests (pin conflicts,
	// ineligible exact targets, mismatches, hard-mode quarantines).
	Errors uint64
	// Live: entries in the phases' tables (bindings, placements in
	// progress, quarantines); Quarantined: the live quarantines.
	Live, Quarantined int
	// Tables: each phase's table (index Phase): its entries, its
	// quarantines, its capacity and the entries at which second-turn
	// admission starts.
	Tables [NumPhases]TableStats
	// Workers: the members, their states and bound sessions.
	Workers []WorkerInfo
}

// TableStats is one phase's table.
type TableStats struct {
	Live, Quarantined int
	// Capacity is Config.MaxEntries (or the core's default); AdmitMark the
	// entries from which a new session binds only at its second turn.
	Capacity, AdmitMark int
}

// Source is what a metrics adapter reads: a Layer.
type Source interface {
	Stats() Stats
}

// Stats returns the layer's counters and gauges. It walks the tables (the
// core's Stats): call it from a scrape, not per request.
func (l *Layer) Stats() Stats {
	// The walks first: they apply passed deadlines (and the quarantines a
	// restart ended), whose events the counters below then include.
	var out Stats
	for p, c := range l.rep {
		if c == nil {
			break
		}
		q := len(c.Quarantined())
		out.Tables[p] = TableStats{Live: c.Len(), Quarantined: q, Capacity: c.MaxEntries(), AdmitMark: l.admit}
		out.Live += c.Len()
		out.Quarantined += q
	}
	for p, c := range l.core {
		if c == nil {
			break
		}
		cs := c.Stats()
		out.Tables[p] = TableStats{Live: int(cs.Live), Quarantined: int(cs.Quarantined),
			Capacity: c.Config().MaxEntries, AdmitMark: l.admit}
		out.Live += int(cs.Live)
		out.Quarantined += int(cs.Quarantined)
	}
	s := &l.stats
	tables, live, quarantined := out.Tables, out.Live, out.Quarantined
	out = Stats{
		Hits: s.hits.Load(), Binds: s.binds.Load(), Waits: s.waits.Load(),
		QuarantinesOpened: s.quarantined.Load(), ResolvedAccepted: s.resolvedAccepted.Load(),
		ResolvedNotAccepted: s.resolvedNotAccepted.Load(), QuarantinesExpired: s.quarantineExpired.Load(),
		QuarantinesDropped: s.quarantineDropped.Load(), Expirations: s.expired.Load(),
		StaleAtBirth: s.staleAtBirth.Load(), Errors: s.errors.Load(),
	}
	for i := range s.unpinned {
		out.Unpinned[i] = s.unpinned[i].Load()
	}
	for i := range s.moves {
		out.Moves[i] = s.moves[i].Load()
	}
	out.Tables, out.Live, out.Quarantined = tables, live, quarantined
	for _, c := range l.rep {
		if c != nil {
			out.Waits += c.Stats().Waits
		}
	}
	out.Workers = l.Workers()
	return out
}

func sortWorkers(ws []WorkerInfo) { sort.Slice(ws, func(i, j int) bool { return ws[i].ID < ws[j].ID }) }
