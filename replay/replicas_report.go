package replay

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// ReplicaReport is a replicated run's outcome (RunReplicas): the
// configuration and each (replica count, consistency policy)'s result, in
// the order of Config.Replicas.Counts, then Config.Replicas.Policies.
type ReplicaReport struct {
	Config   Config
	Requests int
	Results  []ReplicaResult
	// Workload, Trace and Command are as Report's (set by the caller).
	Workload *WorkloadParams
	Trace    string
	Command  string
}

// Table returns the results as a fixed-width markdown table.
func (r *ReplicaReport) Table() string {
	head := []string{"consistency", "R", "hit %", "TTFT p50", "TTFT p99", "split turns", "in outage", "per turn", "of", "later turns", "unclaimed", "reconciles lost", "end"}
	right := []bool{false, true, true, true, true, true, true, true, false, true, true, true, true}
	var rows [][]string
	for _, x := range r.Results {
		claims := x.Consistency == Claims
		dash := func(v int) string {
			if !claims {
				return "-"
			}
			return fmt.Sprint(v)
		}
		rows = append(rows, []string{
			x.Consistency.String(), fmt.Sprint(x.Replicas),
			fmt.Sprintf("%.1f", 100*x.HitRatio),
			secs(x.TTFTp50), secs(x.TTFTp99),
			fmt.Sprint(x.SplitTurns), dash(x.SplitInOutage),
			fmt.Sprintf("%.2f", x.OpsPerTurn), x.Consistency.OpsName(),
			fmt.Sprint(x.Turns), dash(x.Unclaimed), dash(x.ReconcilesLost),
			fmt.Sprintf("%.0f s", x.End.Seconds()),
		})
	}
	return table(head, rows, right)
}

// WriteMarkdown writes the replicated run's report: the table, what is
// simulated, the definitions, and the parameters and seed.
func (r *ReplicaReport) WriteMarkdown(out io.Writer, plotFile string) error {
	var b bytes.Buffer
	c, rc := &r.Config, &r.Config.Replicas
	fmt.Fprintf(&b, "# Replay: router replicas under four consistency policies\n\n")
	if r.Command != "" {
		fmt.Fprintf(&b, "Produced by `%s` (deterministic: the same seed gives the same bytes).\n\n", r.Command)
	}
	fmt.Fprintf(&b, "%d requests, %s loop, %d workers x %d ranks, seed %d. R router replicas, each running %s, behind a load balancer that sends each request to a random replica (the same draws for every policy). Every run starts from empty caches with the same requests, the same ambiguous dispatches and the same membership changes.\n\n",
		r.Requests, c.Loop, c.Workers, c.Ranks, c.Seed, rc.Mode)
	b.WriteString(r.Table())
	b.WriteString("\n")
	if plotFile != "" {
		fmt.Fprintf(&b, "![hit ratio, p99 TTFT proxy and split turns per consistency policy and replica count](%s)\n\n", plotFile)
	}
	b.WriteString(`## The policies

- none: each replica alone, its own affinity layer knowing nothing of the others.
- best-effort (Dynamo's): after each accepted dispatch of a bound session, the replica publishes the binding to every other replica, delivered after the sync delay. A replica that has a live binding of the session (its layer's, or one learned and not idled out) keeps it: the first live binding wins. TTLs are local: a learned binding lapses the idle TTL after it was last received.
- gossip-lww (SGLang's mesh, last writer wins): a replica broadcasts each change of a binding (placed, moved), stamped with its time and writer, delivered after the sync delay; a replica receiving a later write than any it knows adopts it (ending its layer's own binding of the session if it differs) and its next turn follows it. The replicated map has no local TTL: an entry holds while its worker is up as the same instance, until a later write.
- claims (ours, impl/replica's protocol): a simulated store. A session's first turn on a replica makes one store operation (CreateOrGet: a live claim is adopted and the turn pinned to it; otherwise the replica's layer places the session and the claim is created: first writer wins), and its dispatch reaches the worker a store round trip later (its outcome is reported to the layer at once, so the turn does not hold the session across the round trip). Later turns on a replica whose layer holds the claimed binding make no store call. A move (the claim's worker failed, restarted or left, or the claim idled out) rewrites the claim, fenced by the revision read; the other replicas' caches evict the old revision an event delay later. While the store is unreachable, replicas keep serving the sessions they hold and place the others locally (unclaimed); when it is back every cache is reset and each replica reconciles its unclaimed sessions through CreateOrGet with its local target (first writer wins; a loser follows the claim at the session's next turn).

## What is simulated

Each replica runs the real affinity layer (impl/affinity on its own placement.ManualClock, impl/resolver settling its own quarantines, its own impl/picker scheduler and prefix index of what it sent where). Following another replica's binding is a request pinned to that binding's target (a pin binds an unbound session; the layer's own binding is ended with Layer.EndSession first when it differs). The syncing between replicas is simulated on the simulation's event queue: messages, watch events, the store (each operation linearized when the request reaches the replica) and its outage are the simulation's, with fixed delays and no loss; there is no real store and no goroutine. Every replica sees membership changes (Join, Fail, Leave) at once, the workers' true loads and one shared estimate of their prefill backlogs. Not modelled: Claims' quarantines in the store (a replica's quarantine stays its own), its holds, keepalive touches and closes (a use refreshes the claim's idle TTL at no cost), and lost messages.

## Columns

- hit %, TTFT p50/p99: as in the policy report (the token-weighted prefix-cache hit ratio; the time-to-first-token proxy, queueing plus prefill, here also the store round trip of a dispatch that needed one).
- split turns: later turns (accepted dispatches of a session, or sibling group, after its first) sent to a worker other than the one its previous turn used while that worker was healthy: up, the same instance, and less than the idle TTL after that turn (its binding alive). In hard mode one router never does this (a binding moves only off a worker that failed, restarted or left), so every split turn is the replicas' disagreement, and a cache left behind.
- in outage: claims' split turns where the turn or the previous one fell in the store's outage window (from the outage's start to a store round trip and an event delay after its end).
- per turn, of: claims' store operations (first turns' CreateOrGet, moves' fenced rewrites, reconciles) or best-effort's and gossip's sync messages (one per receiving replica), over the requests served.
- later turns: the denominator of split turns; unclaimed: claims' sessions placed locally during the outage; reconciles lost: those whose claim another replica had written.
`)
	b.WriteString("\n## Parameters\n\n")
	fmt.Fprintf(&b, "- replicas %s; every replica runs %s; sync delay %s (best-effort, gossip); store round trip %s, watch event delay %s",
		joinInts(rc.Counts), rc.Mode, rc.SyncDelay, rc.StoreLatency, rc.EventDelay)
	if rc.StoreDownFor > 0 {
		fmt.Fprintf(&b, "; the store unreachable from %s for %s (claims)\n", rc.StoreDownAt, rc.StoreDownFor)
	} else {
		b.WriteString("; the store always reachable\n")
	}
	fmt.Fprintf(&b, "- workers %d x %d data-parallel ranks; blocks of %d tokens; %d blocks of LRU prefix cache per rank; prefill %s + uncached tokens at %.0f tokens/s; decode %s per output token\n",
		c.Workers, c.Ranks, c.BlockTokens, c.CacheBlocks, c.PrefillBase, c.PrefillRate, c.DecodeTokenTime)
	fmt.Fprintf(&b, "- %s loop; ambiguous dispatches %.2f%%, client timeout %s, retry delay %s; idle TTL %s, quarantine TTL %s, resolver every %s\n",
		c.Loop, 100*c.AmbiguousProb, c.ClientTimeout, c.RetryDelay, c.IdleTTL, c.QuarantineTTL, c.ResolverInterval)
	if len(c.Churn) == 0 {
		b.WriteString("- membership: no changes\n")
	} else {
		var cs []string
		for _, ch := range c.Churn {
			cs = append(cs, fmt.Sprintf("%s w%d at %s", ch.Kind, ch.Worker, ch.At))
		}
		fmt.Fprintf(&b, "- membership: %s\n", strings.Join(cs, "; "))
	}
	if p := r.Workload; p != nil {
		fmt.Fprintf(&b, "- workload (generated, seed %d): %d sessions arriving at %.2f/s (the policy report's generator)\n", p.Seed, p.Sessions, p.SessionRate)
	}
	if r.Trace != "" {
		fmt.Fprintf(&b, "- workload: trace %s\n", r.Trace)
	}
	_, err := out.Write(b.Bytes())
	return err
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

// WritePlot draws, for each consistency policy and replica count, the hit
// ratio, the p99 TTFT proxy and the split turns, as three horizontal bar
// charts side by side, in SVG (deterministic bytes).
func (r *ReplicaReport) WritePlot(out io.Writer) error {
	n := len(r.Results)
	names := make([]string, n)
	hit, p99, split := make(plotter.Values, n), make(plotter.Values, n), make(plotter.Values, n)
	for i, x := range r.Results {
		k := n - 1 - i // the first result at the top
		names[k] = fmt.Sprintf("%s R=%d", x.Consistency, x.Replicas)
		hit[k] = 100 * x.HitRatio
		p99[k] = x.TTFTp99.Seconds()
		split[k] = float64(x.SplitTurns)
	}
	a, err := barPanel(names, "prefix-cache hit ratio", "hit %", hit, color.RGBA{30, 90, 200, 255}, "%.1f")
	if err != nil {
		return err
	}
	b, err := barPanel(names, "p99 TTFT proxy", "seconds", p99, color.RGBA{200, 30, 30, 255}, "%.2f s")
	if err != nil {
		return err
	}
	c, err := barPanel(names, "split turns", "later turns", split, color.RGBA{90, 150, 60, 255}, "%.0f")
	if err != nil {
		return err
	}
	w, h := vg.Points(1020), vg.Points(60+22*float64(n))
	cv := newCanvas(w, h)
	dc := draw.New(cv)
	tiles := draw.Tiles{Rows: 1, Cols: 3, PadX: vg.Points(20), PadTop: vg.Points(6), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(10)}
	cs := plot.Align([][]*plot.Plot{{a, b, c}}, tiles, dc)
	a.Draw(cs[0][0])
	b.Draw(cs[0][1])
	c.Draw(cs[0][2])
	_, err = cv.WriteTo(out)
	return err
}
