// Package affinityprom exports the statistics of the session-affinity layer
// (impl/affinity) as Prometheus metrics, through the official client library.
//
// A Collector reads its affinity.Source's Stats once per scrape (Stats walks
// the layer's tables, so never once per metric) and turns them into const
// metrics: nothing is kept between scrapes, and a worker that left has no
// series at the next scrape.
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(affinityprom.NewCollector(layer, affinityprom.Options{
//		ConstLabels: prometheus.Labels{"router": "r1"},
//	}))
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// # Metrics
//
// Every name below is prefixed with the namespace (Options.Namespace,
// "placement" by default) and the subsystem "affinity", as in
// placement_affinity_hits_total. Counters are cumulative since the layer
// started; gauges are read at the scrape.
//
// Counters:
//
//	hits_total                      later turns served by their session's live binding
//	binds_total                     new bindings: a placing dispatch accepted, or a
//	                                quarantine resolved accepted
//	waits_total                     requests that waited while another request placed
//	                                their session
//	unpinned_total{cause}           requests routed unpinned (no binding consulted or
//	                                made), by affinity.Cause: off, no_session, capacity,
//	                                admission, quarantined, move_lost, moves_exhausted,
//	                                leases, reservation_lost, hit_refused (one series per Cause but
//	                                CauseNone, every one present from the first scrape)
//	moves_total{cause}              bindings moved, by affinity.MoveCause: worker_gone,
//	                                worker_failed, rank_gone, follow, refused
//	quarantines_opened_total        sessions quarantined after an ambiguous placing dispatch
//	quarantines_resolved_total{result}
//	                                quarantines settled by a late outcome or a resolver:
//	                                result="accepted" (the session bound) or
//	                                result="not_accepted"
//	quarantines_expired_total       quarantines ended by the QuarantineTTL
//	quarantines_dropped_total       quarantines ended because their worker restarted or left
//	binding_expirations_total       bindings that ended idle past their TTL
//	stale_at_birth_total            accepted placing dispatches whose worker restarted
//	                                before the commit (served, not bound)
//	errors_total                    typed errors the layer returned to requests (pin
//	                                conflicts, ineligible exact targets, mismatches,
//	                                hard-mode quarantines)
//
// Gauges:
//
//	live_entries                    entries in the layer's tables, both phases: bindings,
//	                                placements in progress and quarantines
//	quarantined_sessions            live quarantines, both phases
//	table_entries{phase}            entries in one phase's table ("decode", "prefill")
//	table_quarantined_sessions{phase}
//	                                live quarantines in one phase's table
//	table_capacity{phase}           the most entries the phase's table holds
//	table_admission_mark{phase}     entries from which a new session binds only at its
//	                                second turn (affinity.Config.AdmitAllBelow)
//	worker_up{worker}               1 for a member that is up (dispatched to), 0 for a
//	                                member whose health check failed
//	worker_bound_sessions{worker}   sessions bound to the worker's current instance, over
//	                                its ranks and both phases
//
// The worker series cover the members only: a worker that left (or never
// joined) has none, so absent() or a missing series, not a value, says a
// worker is gone. worker_up is a plain 1/0 gauge rather than a series per
// state, since a member is either up or failed.
//
// A worker id that is not valid UTF-8 cannot be a label value: that
// worker's series fail the scrape with an error (promhttp reports it, or
// serves the rest with promhttp.ContinueOnError) rather than panic.
package affinityprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/placementlab/placement/impl/affinity"
)

// DefaultNamespace is the namespace of the metrics when Options.Namespace is
// empty.
const DefaultNamespace = "placement"

// Subsystem is the subsystem of every metric's name.
const Subsystem = "affinity"

// Options configures a Collector. The zero value is valid.
type Options struct {
	// Namespace prefixes every metric's name; empty means DefaultNamespace.
	Namespace string
	// ConstLabels are added to every series, e.g. {"router": "r1"} when
	// several layers report to one Prometheus. They must not be named
	// cause, result or worker (registration fails).
	ConstLabels prometheus.Labels
}

// Collector is a prometheus.Collector over an affinity.Source. It is safe
// for concurrent scrapes.
type Collector struct {
	src affinity.Source

	hits, binds, waits, unpinned, moves                   *prometheus.Desc
	opened, resolved, expired, dropped, expirations       *prometheus.Desc
	staleAtBirth, errors, live, quarantined, up, bound    *prometheus.Desc
	tableLive, tableQuarantined, tableCapacity, tableMark *prometheus.Desc
}

// NewCollector returns a Collector that reads src.Stats once per scrape.
// Register it on a prometheus.Registerer.
func NewCollector(src affinity.Source, opts Options) *Collector {
	ns := opts.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, Subsystem, name), help, labels, opts.ConstLabels)
	}
	return &Collector{
		src:              src,
		hits:             desc("hits_total", "Later turns served by their session's live binding."),
		binds:            desc("binds_total", "New bindings: a placing dispatch accepted, or a quarantine resolved accepted."),
		waits:            desc("waits_total", "Requests that waited while another request placed their session."),
		unpinned:         desc("unpinned_total", "Requests routed unpinned (no binding consulted or made), by cause.", "cause"),
		moves:            desc("moves_total", "Bindings moved, by cause.", "cause"),
		opened:           desc("quarantines_opened_total", "Sessions quarantined after an ambiguous placing dispatch."),
		resolved:         desc("quarantines_resolved_total", "Quarantines settled by a late outcome or a resolver, by result.", "result"),
		expired:          desc("quarantines_expired_total", "Quarantines ended by the quarantine TTL."),
		dropped:          desc("quarantines_dropped_total", "Quarantines ended because their worker restarted or left."),
		expirations:      desc("binding_expirations_total", "Bindings that ended idle past their TTL."),
		staleAtBirth:     desc("stale_at_birth_total", "Accepted placing dispatches whose worker restarted before the commit (served, not bound)."),
		errors:           desc("errors_total", "Typed errors the layer returned to requests."),
		live:             desc("live_entries", "Entries in the layer's tables: bindings, placements in progress and quarantines."),
		quarantined:      desc("quarantined_sessions", "Live quarantines."),
		up:               desc("worker_up", "Whether a member worker is up (1) or its health check failed (0).", "worker"),
		bound:            desc("worker_bound_sessions", "Sessions bound to the worker's current instance, over its ranks and both phases.", "worker"),
		tableLive:        desc("table_entries", "Entries in one phase's table.", "phase"),
		tableQuarantined: desc("table_quarantined_sessions", "Live quarantines in one phase's table.", "phase"),
		tableCapacity:    desc("table_capacity", "The most entries one phase's table holds.", "phase"),
		tableMark:        desc("table_admission_mark", "Entries from which a new session binds only at its second turn.", "phase"),
	}
}

// Describe sends the descriptors of every metric the Collector exports.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.hits, c.binds, c.waits, c.unpinned, c.moves, c.opened, c.resolved, c.expired, c.dropped,
		c.expirations, c.staleAtBirth, c.errors, c.live, c.quarantined, c.up, c.bound,
		c.tableLive, c.tableQuarantined, c.tableCapacity, c.tableMark,
	} {
		ch <- d
	}
}

// Collect reads the source's Stats once and sends them as const metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Stats()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		emit(ch, d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		emit(ch, d, prometheus.GaugeValue, v, labels...)
	}
	counter(c.hits, s.Hits)
	counter(c.binds, s.Binds)
	counter(c.waits, s.Waits)
	for i, v := range s.Unpinned {
		if affinity.Cause(i) != affinity.CauseNone {
			counter(c.unpinned, v, affinity.Cause(i).String())
		}
	}
	for i, v := range s.Moves {
		counter(c.moves, v, affinity.MoveCause(i).String())
	}
	counter(c.opened, s.QuarantinesOpened)
	counter(c.resolved, s.ResolvedAccepted, "accepted")
	counter(c.resolved, s.ResolvedNotAccepted, "not_accepted")
	counter(c.expired, s.QuarantinesExpired)
	counter(c.dropped, s.QuarantinesDropped)
	counter(c.expirations, s.Expirations)
	counter(c.staleAtBirth, s.StaleAtBirth)
	counter(c.errors, s.Errors)
	gauge(c.live, float64(s.Live))
	gauge(c.quarantined, float64(s.Quarantined))
	for p, t := range s.Tables {
		phase := affinity.Phase(p).String()
		gauge(c.tableLive, float64(t.Live), phase)
		gauge(c.tableQuarantined, float64(t.Quarantined), phase)
		gauge(c.tableCapacity, float64(t.Capacity), phase)
		gauge(c.tableMark, float64(t.AdmitMark), phase)
	}
	for _, w := range s.Workers {
		up := 0.0
		if w.State == affinity.WorkerUp {
			up = 1
		}
		gauge(c.up, up, w.ID)
		gauge(c.bound, float64(w.Bound), w.ID)
	}
}

// emit sends one const metric, or an invalid one that fails the scrape with
// the reason (a label value that is not valid UTF-8) instead of a panic.
func emit(ch chan<- prometheus.Metric, d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	ch <- m
}
