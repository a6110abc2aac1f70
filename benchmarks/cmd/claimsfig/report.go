package main

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/etcdstore"
	"github.com/placementlab/placement/impl/claims/etcdstore/embedded"
	"github.com/placementlab/placement/impl/replica"
)

// ms formats d in milliseconds with three significant figures or so.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case v >= 10:
		return fmt.Sprintf("%.1f ms", v)
	case v >= 1:
		return fmt.Sprintf("%.2f ms", v)
	}
	return fmt.Sprintf("%.3f ms", v)
}

// ns formats a nanosecond figure.
func ns(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f ns", v)
	}
	return fmt.Sprintf("%.1f ns", v)
}

// stats are a latency series' order statistics.
type stats struct{ p50, p90, p99, max time.Duration }

func statsOf(ds []time.Duration) stats {
	ds = slices.Clone(ds)
	return stats{quantile(ds, 0.5), quantile(ds, 0.9), quantile(ds, 0.99), quantile(ds, 1)}
}

// durations is a slice of one field of the agreement rounds.
func durations(rs []*agreeResult, get func(*agreeResult) time.Duration) []time.Duration {
	out := make([]time.Duration, len(rs))
	for i, r := range rs {
		out[i] = get(r)
	}
	return out
}

// headline holds the summary's figures.
type headline struct {
	newStart, newWhole, adoptStart, memStart stats
	cachedRepl, cachedCore                   float64
	rate                                     *rateResult
	afterRestart, afterStop                  stats
}

func headlines(r *results) headline {
	var h headline
	h.newStart, h.newWhole = statsOf(r.first[0].start), statsOf(r.first[0].whole)
	h.adoptStart, h.memStart = statsOf(r.first[1].start), statsOf(r.first[2].start)
	h.cachedRepl, h.cachedCore = median(slices.Clone(r.cached.repl)), median(slices.Clone(r.cached.core))
	for _, x := range r.rates {
		if x.store == "etcd" && x.replicas == r.opts.replicas {
			h.rate = x
		}
	}
	h.afterRestart = statsOf(durations(r.agree, func(a *agreeResult) time.Duration { return a.afterRestart }))
	h.afterStop = statsOf(durations(r.agree, func(a *agreeResult) time.Duration { return a.afterStop }))
	return h
}

// summary is what the command prints when it is done.
func summary(r *results) string {
	h := headlines(r)
	var b strings.Builder
	fmt.Fprintf(&b, "first turn, new session (Start): p50 %s, p99 %s (%.1fx memstore's p50)\n", ms(h.newStart.p50), ms(h.newStart.p99), ratio(h.newStart.p50, h.memStart.p50))
	fmt.Fprintf(&b, "first turn, claim exists (Start): p50 %s, p99 %s\n", ms(h.adoptStart.p50), ms(h.adoptStart.p99))
	fmt.Fprintf(&b, "cached turn: %s (%.2fx the core alone, %s), %d store calls\n", ns(h.cachedRepl), h.cachedRepl/h.cachedCore, ns(h.cachedCore), r.cached.storeCalls)
	if h.rate != nil {
		fmt.Fprintf(&b, "claims/s, %d replicas: %.0f\n", h.rate.replicas, h.rate.perSecond())
	}
	fmt.Fprintf(&b, "agreement after a member restart: median %s, max %s (after the stop: median %s, max %s)\n",
		ms(h.afterRestart.p50), ms(h.afterRestart.max), ms(h.afterStop.p50), ms(h.afterStop.max))
	return b.String()
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// report renders report.md.
func report(r *results) string {
	o, h := r.opts, headlines(r)
	var b strings.Builder
	b.WriteString("# Claims across router replicas: figures over the embedded etcd\n\n")
	cmd := "go run ./benchmarks/cmd/claimsfig"
	if len(r.args) > 0 {
		cmd += " " + strings.Join(r.args, " ")
	}
	fmt.Fprintf(&b, "Produced by `%s` on %s; the run took %v.\n\n", cmd, r.started.UTC().Format("2006-01-02 15:04 MST"), r.took.Round(time.Second))
	model := cpuModel()
	if model != "" {
		model = ", " + model
	}
	fmt.Fprintf(&b, "Machine: %s/%s, %d CPUs%s, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), model, runtime.Version())
	if r.load != "" {
		fmt.Fprintf(&b, "; load average at the start %s", r.load)
	}
	b.WriteString(". The machine is shared: absolute times are noisy; each figure has its baseline beside it, measured in the same run.\n\n")
	fmt.Fprintf(&b, "Setup, every part in the configuration a user gets without asking: the embedded etcd (impl/claims/etcdstore/embedded: "+
		"its members in this process on loopback, without fsync, heartbeat %d ms, election timeout %d ms), one member for the latency and "+
		"throughput figures and three for the agreement figure; replicas are impl/replica coordinators in this process, each with an "+
		"etcd client and an etcdstore handle of its own (store defaults: session TTL %v, request timeout %v; claims' idle TTL %v; "+
		"replica defaults: store timeout %v, the least-loaded proposal); %d workers registered through a handle of their own. "+
		"A turn's dispatch is accepted at once (no worker is called): the figures are the claims layer's own.\n\n",
		embedded.DefaultTickMs, embedded.DefaultElectionMs, etcdstore.DefaultSessionTTL, etcdstore.DefaultRequestTimeout,
		claims.DefaultIdleTTL, replica.DefaultStoreTimeout, len(workers))

	b.WriteString("## Summary\n\n| figure | measured | baseline, same run |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| first-turn claim latency, new session (Start: the claim written before the dispatch) | p50 %s, p99 %s | memstore p50 %s (%.1f×) |\n",
		ms(h.newStart.p50), ms(h.newStart.p99), ms(h.memStart.p50), ratio(h.newStart.p50, h.memStart.p50))
	fmt.Fprintf(&b, "| first-turn claim latency, claim written by another replica (Start) | p50 %s, p99 %s | |\n", ms(h.adoptStart.p50), ms(h.adoptStart.p99))
	fmt.Fprintf(&b, "| a one-turn session, whole (claim, hold, close) | p50 %s, p99 %s | |\n", ms(h.newWhole.p50), ms(h.newWhole.p99))
	fmt.Fprintf(&b, "| cached turn (Start hits, Done) | %s, %d store calls in %d turns | the core alone %s (%.2f×) |\n",
		ns(h.cachedRepl), r.cached.storeCalls, r.cached.ops*len(r.cached.repl), ns(h.cachedCore), h.cachedRepl/h.cachedCore)
	if h.rate != nil {
		base := ""
		for _, x := range r.rates {
			if x.store == "etcd" && x.replicas == 1 {
				base = fmt.Sprintf("1 replica %.0f/s (%.2f×)", x.perSecond(), h.rate.perSecond()/x.perSecond())
			}
		}
		if h.rate.cpu > 0 {
			base += fmt.Sprintf("; the process's CPU per claim %s, %.2f cores busy", ms(h.rate.cpu/time.Duration(h.rate.claims)), h.rate.cpu.Seconds()/h.rate.elapsed.Seconds())
		}
		fmt.Fprintf(&b, "| claims per second, %d replicas × %d in flight | %.0f/s | %s |\n", h.rate.replicas, h.rate.inFlight, h.rate.perSecond(), base)
	}
	fmt.Fprintf(&b, "| every replica agrees with the store after a member restart (%d restarts) | median %s, max %s | after the stop: median %s, max %s |\n\n",
		len(r.agree), ms(h.afterRestart.p50), ms(h.afterRestart.max), ms(h.afterStop.p50), ms(h.afterStop.max))

	b.WriteString("## First-turn latency (one member)\n\n")
	fmt.Fprintf(&b, "%d sessions per series, the series interleaved session by session. `Start` is the claim latency: from the call until "+
		"the target is known (the claim read, or written, before the first dispatch). `whole` adds Complete(Accepted) (the replica's "+
		"Hold) and Done: final for a new session (the terminal Close), not final for an adopted one. Store calls are the replica's, per turn.\n\n", o.first)
	b.WriteString("| series | part | p50 | p90 | p99 | max | store calls/turn |\n|---|---|---:|---:|---:|---:|---:|\n")
	for _, l := range r.first {
		for _, part := range []struct {
			name string
			ds   []time.Duration
		}{{"Start", l.start}, {"whole", l.whole}} {
			s := statsOf(part.ds)
			calls := ""
			if part.name == "whole" {
				calls = fmt.Sprintf("%.2f", l.storeCalls)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", l.name, part.name, ms(s.p50), ms(s.p90), ms(s.p99), ms(s.max), calls)
		}
	}
	b.WriteString("\n![first-turn latency: the share of turns within a time, per series](first-turn.svg)\n\n")

	b.WriteString("## Cached turn (one member)\n\n")
	fmt.Fprintf(&b, "A later turn on a session the replica holds: `Start` hits the local table, `Done` releases the lease; no store round trip "+
		"(the replica's store-call counter did not move: %d calls). The baseline is impl/placement's core alone in its default "+
		"configuration (Acquire hits, Done), what a single router does. %d rounds of %d turns on one session, replica and core alternating; "+
		"the figure is each one's median round. Allocations are the whole process's per turn over the rounds (a little of them "+
		"the background's). The process also runs the etcd member, whose heap the garbage collector scans: an allocation per "+
		"turn costs more here than in a router whose etcd runs elsewhere.\n\n", r.cached.storeCalls, len(r.cached.repl), r.cached.ops)
	b.WriteString("| contender | ns/turn (median) | fastest round | slowest round | ×core | allocations/turn |\n|---|---:|---:|---:|---:|---:|\n")
	for _, c := range []struct {
		name   string
		vs     []float64
		allocs float64
	}{{"replica (impl/replica over etcd)", r.cached.repl, r.cached.replAllocs}, {"core alone (impl/placement)", r.cached.core, r.cached.coreAllocs}} {
		vs := slices.Clone(c.vs)
		m := median(vs)
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %.2f | %.2f |\n", c.name, ns(m), ns(vs[0]), ns(vs[len(vs)-1]), m/h.cachedCore, c.allocs)
	}

	b.WriteString("\n## Claims per second (one member)\n\n")
	fmt.Fprintf(&b, "One-turn sessions (Start writes the claim, Complete holds it, Done(final) closes it: a claim made and ended) started "+
		"by each replica, %d at a time, for %v; the rate is the turns completed over the time until the last one ended. "+
		"The memstore row is the same replicas on the in-memory store: the layer's ceiling without a network or raft. "+
		"CPU is the whole process's (etcd's member, every client, the replicas) over the run: per claim, and in cores busy on average; "+
		"when it nears the machine's %d cores (less what other jobs take), more replicas cannot add claims.\n\n", o.inFlight, o.rateFor, runtime.NumCPU())
	b.WriteString(claimsTable(r))
	b.WriteString("\n## The store's own limit (one member)\n\n")
	fmt.Fprintf(&b, "etcd's own transaction rate on the same member, measured with etcd's client just before each claims row at the same "+
		"clients and in flight, then saturated: each transaction is a claim's write at its cheapest (a put fenced by a compare on the "+
		"key's ModRevision, no lease, no read). A claim made and ended writes %d times (the fenced create, the Hold, the Close; "+
		"etcdstore's costs: its lease is a deleted claim's, reused, so that a Grant is made only once per turn in flight and "+
		"reuse window, IdleTTL/16), and reads once more (the create's read of the claim and the workers; a Close after "+
		"this store's own Hold reads nothing). The share is claims/s × %d ÷ the raw rate: how much of what the store can write the "+
		"claims use.\n\n", writesPerClaim, writesPerClaim)
	b.WriteString(rawTable(r))
	b.WriteString("\n## Agreement after a member restart (three members)\n\n")
	fmt.Fprintf(&b, "%d replicas hold %d sessions (each claimed by one replica, adopted by the others). Each round stops a member "+
		"(the leader in odd rounds, a follower in even ones; StopMember is etcd's graceful stop, in which a leader hands its "+
		"leadership over first, and it cuts the member's client streams at once) and, at that moment, adds %d new sessions to the "+
		"set, so that first turns meet the fault too; it keeps the member down %v, restarts it, and watches the replicas for %v "+
		"after it serves again. StopMember and RestartMember run while the replicas serve: passes run back to back throughout, "+
		"each every replica's turn on every session at once (a cached hit, or a placing turn: the claim read or written; each turn "+
		"bounded by %v, beyond the replica's own store timeout). When the replicas route every session alike, the store's claims "+
		"are read, and every pass of the phase is judged against them: it agrees when every turn succeeded, claimed (not placed "+
		"unclaimed), to the claim's target and revision. The agreement time is the end of the first agreeing pass after the last "+
		"one that did not, from StopMember's call (after the stop) or RestartMember's (after the restart). The columns after it "+
		"count, over the round's passes that did not agree, the turns that failed, were placed unclaimed or went elsewhere; then "+
		"the replicas' Resets, unclaimed placements and reconciles (impl/replica's Stats) over the round, and the round's slowest "+
		"turn, of all and of the new sessions' (their first turns, begun as the member stopped).\n\n",
		o.replicas, o.sessions, o.fresh, o.downtime, o.settle, replica.DefaultStoreTimeout+time.Second)
	cols := []string{"round", "member stopped", "sessions", "stop took", "agreed after the stop", "restart took", "agreed after the restart",
		"passes", "not agreeing (after the stop + after the restart)", "failed", "unclaimed", "elsewhere", "Resets", "unclaimed placed", "reconciles (lost)", "slowest turn",
		"slowest new-session turn", "slowest store call"}
	b.WriteString("| " + strings.Join(cols, " | ") + " |\n|")
	for _, c := range cols {
		if c == "member stopped" || c == "reconciles (lost)" || c == "slowest store call" {
			b.WriteString("---|")
		} else {
			b.WriteString("---:|")
		}
	}
	b.WriteString("\n")
	for i, a := range r.agree {
		role := "follower"
		if a.leader {
			role = "leader"
		}
		fmt.Fprintf(&b, "| %d | %d (%s) | %d | %s | %s | %s | %s | %d | %d + %d | %d | %d | %d | %d | %d | %d (%d) | %s | %s | %s |\n", i+1, a.member, role,
			o.sessions+(i+1)*o.fresh, ms(a.stopTook), ms(a.afterStop), ms(a.restartTook), ms(a.afterRestart), a.passes, a.badPasses-a.badAfterRestart, a.badAfterRestart, a.errs, a.unclaimed, a.moved,
			a.resets, a.unclaimedPlaced, a.reconciles, a.reconcilesLost, ms(a.slowest), ms(a.slowestFresh), describe(a.slowestCall))
	}
	took := statsOf(durations(r.agree, func(a *agreeResult) time.Duration { return a.restartTook }))
	stopTook := statsOf(durations(r.agree, func(a *agreeResult) time.Duration { return a.stopTook }))
	fmt.Fprintf(&b, "\nMedian (max): stop took %s (%s); agreed after the stop %s (%s); restart took %s (%s); agreed after the restart %s (%s).\n\n",
		ms(stopTook.p50), ms(stopTook.max), ms(h.afterStop.p50), ms(h.afterStop.max), ms(took.p50), ms(took.max), ms(h.afterRestart.p50), ms(h.afterRestart.max))
	b.WriteString("![claims per second against replicas; agreement time per restart](cluster.svg)\n")
	return b.String()
}

// describe formats a store call for the agreement table.
func describe(c slowCall) string {
	if c.op == "" {
		return ""
	}
	s := c.op + " " + ms(c.took)
	if c.err != nil {
		s += ": " + strings.ReplaceAll(c.err.Error(), "|", "/")
	}
	return s
}

// claimsTable is the claims/s table.
func claimsTable(r *results) string {
	var b strings.Builder
	b.WriteString("| store | replicas | in flight | claims | failed | claims/s | ×1 replica | whole turn p50 | p99 | CPU per claim | cores busy |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	var one float64
	for _, x := range r.rates {
		if x.store == "etcd" && x.replicas == 1 {
			one = x.perSecond()
		}
	}
	for _, x := range r.rates {
		s := statsOf(x.whole)
		rel := ""
		if x.store == "etcd" && one > 0 {
			rel = fmt.Sprintf("%.2f", x.perSecond()/one)
		}
		cpuPer, busy := "", ""
		if x.cpu > 0 {
			cpuPer = ms(x.cpu / time.Duration(x.claims))
			busy = fmt.Sprintf("%.2f", x.cpu.Seconds()/x.elapsed.Seconds())
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %.0f | %s | %s | %s | %s | %s |\n", x.store, x.replicas, x.replicas*x.inFlight, x.claims, x.errors,
			x.perSecond(), rel, ms(s.p50), ms(s.p99), cpuPer, busy)
	}

	return b.String()
}

// rawTable is the table of etcd's own transaction rate beside the claims.
func rawTable(r *results) string {
	var b strings.Builder
	b.WriteString("| clients | in flight | transactions/s | CPU per transaction | cores busy | claims/s beside it | share of this rate | share of the saturated rate |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	var sat float64
	if len(r.raws) > 0 {
		sat = r.raws[len(r.raws)-1].perSecond()
	}
	for i, x := range r.raws {
		claimsRate, share, shareSat := "", "", ""
		for _, c := range r.rates {
			if c.store == "etcd" && c.replicas == x.clients && c.inFlight == x.inFlight && i < len(r.raws)-1 {
				claimsRate = fmt.Sprintf("%.0f", c.perSecond())
				share = fmt.Sprintf("%.0f%%", 100*c.perSecond()*writesPerClaim/x.perSecond())
				shareSat = fmt.Sprintf("%.0f%%", 100*c.perSecond()*writesPerClaim/sat)
			}
		}
		cpuPer, busy := "", ""
		if x.cpu > 0 {
			cpuPer = ms(x.cpu / time.Duration(x.txns))
			busy = fmt.Sprintf("%.2f", x.cpu.Seconds()/x.elapsed.Seconds())
		}
		fmt.Fprintf(&b, "| %d | %d | %.0f | %s | %s | %s | %s | %s |\n", x.clients, x.clients*x.inFlight, x.perSecond(), cpuPer, busy, claimsRate, share, shareSat)
	}

	return b.String()
}

// rateTables is what -rate-only prints: the claims/s table and etcd's own
// rate beside it.
func rateTables(r *results) string {
	return claimsTable(r) + "\n" + rawTable(r)
}
