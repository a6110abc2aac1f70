package replay

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"math"
	"strings"
	"time"

	"github.com/placementlab/placement/impl/picker"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Report is a replay's outcome: the configuration, each policy's Result
// in the configuration's order, and the targets judged on them.
type Report struct {
	Config   Config
	Requests int
	Results  []Result
	Targets  []TargetCheck
	// Workload is the generator's parameters, or nil for a trace; Trace
	// names the trace file. The caller sets them (Run does not know).
	Workload *WorkloadParams
	Trace    string
	// Command is the command line that produced the report, if the
	// caller sets it.
	Command string
}

// TargetCheck is one target of the issue and whether the replay met it.
type TargetCheck struct {
	Name   string
	Met    bool
	Detail string
}

// baselines are the policies the targets compare placement soft with.
var baselines = []Policy{RoundRobin, LeastLoaded, ConsistentHash, StickyLeastLoaded, CacheAware}

// evaluate judges the targets on rs: placement soft's hit ratio within 2
// points of the best policy's, its p99 TTFT proxy at most every
// baseline's, its busiest worker at most 1.25x the mean, and round
// robin's turn reuse within half to one and a half times 1/N for N
// ranks. A target whose policies did not run is left out.
func evaluate(rs []Result) []TargetCheck {
	find := func(p Policy) *Result {
		for i := range rs {
			if rs[i].Policy == p {
				return &rs[i]
			}
		}
		return nil
	}
	var out []TargetCheck
	if soft := find(PlacementSoft); soft != nil {
		best := soft
		for i := range rs {
			if rs[i].HitRatio > best.HitRatio {
				best = &rs[i]
			}
		}
		gap := 100 * (best.HitRatio - soft.HitRatio)
		out = append(out, TargetCheck{
			Name: "placement-soft hit ratio within 2 points of the best policy",
			Met:  gap <= 2,
			Detail: fmt.Sprintf("soft %.1f%%, best %.1f%% (%s): %.1f points behind",
				100*soft.HitRatio, 100*best.HitRatio, best.Policy, gap),
		})
		var worse []string
		n := 0
		for _, p := range baselines {
			b := find(p)
			if b == nil {
				continue
			}
			n++
			if soft.TTFTp99 > b.TTFTp99 {
				worse = append(worse, fmt.Sprintf("%s %s", p, secs(b.TTFTp99)))
			}
		}
		if n > 0 {
			d := fmt.Sprintf("soft p99 %s; ", secs(soft.TTFTp99))
			if len(worse) == 0 {
				d += "no baseline is lower"
			} else {
				d += "lower: " + strings.Join(worse, ", ")
			}
			out = append(out, TargetCheck{Name: "placement-soft p99 TTFT proxy at least as good as every baseline", Met: len(worse) == 0, Detail: d})
		}
		out = append(out, TargetCheck{
			Name:   "placement-soft busiest worker <= 1.25x the mean",
			Met:    soft.Imbalance <= 1.25,
			Detail: fmt.Sprintf("busiest worker %.2fx its fair share of the dispatches (5-minute windows, weighted by dispatches)", soft.Imbalance),
		})
	}
	if rr := find(RoundRobin); rr != nil && rr.Targets > 0 {
		want := 1 / float64(rr.Targets)
		out = append(out, TargetCheck{
			Name: "round robin reuses about 1/N of later calls (simulation honesty)",
			Met:  rr.TurnReuse >= 0.5*want && rr.TurnReuse <= 1.5*want,
			Detail: fmt.Sprintf("turn reuse %.1f%% against 1/N = %.1f%% for N = %d ranks (accepted: 0.5/N to 1.5/N)",
				100*rr.TurnReuse, 100*want, rr.Targets),
		})
	}
	return out
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// table renders rows as a fixed-width markdown table.
func table(head []string, rows [][]string, right []bool) string {
	w := make([]int, len(head))
	for i, h := range head {
		w[i] = len(h)
	}
	for _, r := range rows {
		for i, c := range r {
			w[i] = max(w[i], len(c))
		}
	}
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for i, c := range cells {
			pad := strings.Repeat(" ", w[i]-len(c))
			if right[i] {
				fmt.Fprintf(&b, " %s%s |", pad, c)
			} else {
				fmt.Fprintf(&b, " %s%s |", c, pad)
			}
		}
		b.WriteString("\n")
	}
	line(head)
	b.WriteString("|")
	for i := range head {
		if right[i] {
			fmt.Fprintf(&b, "%s:|", strings.Repeat("-", w[i]+1))
		} else {
			fmt.Fprintf(&b, "%s|", strings.Repeat("-", w[i]+2))
		}
	}
	b.WriteString("\n")
	for _, r := range rows {
		line(r)
	}
	return b.String()
}

// Table returns the per-policy results as a fixed-width markdown table.
func (r *Report) Table() string {
	head := []string{"policy", "hit %", "turn reuse %", "TTFT p50", "TTFT p99", "imbalance", "moves", "unpinned", "quarantines", "ambiguous", "refused", "prefilled Mtok", "end"}
	right := []bool{false, true, true, true, true, true, true, true, true, true, true, true, true}
	var rows [][]string
	for _, x := range r.Results {
		dash := func(v int, ok bool) string {
			if !ok {
				return "-"
			}
			return fmt.Sprint(v)
		}
		pl := x.Policy.placement()
		rows = append(rows, []string{
			x.Policy.String(),
			fmt.Sprintf("%.1f", 100*x.HitRatio),
			fmt.Sprintf("%.1f", 100*x.TurnReuse),
			secs(x.TTFTp50), secs(x.TTFTp99),
			fmt.Sprintf("%.2f", x.Imbalance),
			dash(x.Moves, x.Policy != RoundRobin && x.Policy != LeastLoaded && x.Policy != CacheAware && x.Policy != PlacementOff),
			dash(x.Unpinned, pl && x.Policy != PlacementOff),
			dash(x.Quarantines, pl && x.Policy != PlacementOff),
			fmt.Sprint(x.Ambiguous),
			fmt.Sprint(x.Refused),
			fmt.Sprintf("%.1f", float64(x.PrefillTokens)/1e6),
			fmt.Sprintf("%.0f s", x.End.Seconds()),
		})
	}
	return table(head, rows, right)
}

// WriteMarkdown writes the report: the table, the targets met or missed,
// the definitions, and the parameters and seed.
func (r *Report) WriteMarkdown(out io.Writer, plotFile string) error {
	var b bytes.Buffer
	c := &r.Config
	fmt.Fprintf(&b, "# Replay: routing policies on one agentic workload\n\n")
	if r.Command != "" {
		fmt.Fprintf(&b, "Produced by `%s` (deterministic: the same seed gives the same bytes).\n\n", r.Command)
	}
	fmt.Fprintf(&b, "%d requests, %s loop, %d workers x %d ranks, seed %d. Every policy starts from empty caches with the same requests, the same ambiguous dispatches and the same membership changes.\n\n",
		r.Requests, c.Loop, c.Workers, c.Ranks, c.Seed)
	b.WriteString(r.Table())
	b.WriteString("\n")
	if plotFile != "" {
		fmt.Fprintf(&b, "![hit ratio and p99 TTFT proxy per policy](%s)\n\n", plotFile)
	}
	b.WriteString("## Targets\n\n")
	if len(r.Targets) == 0 {
		b.WriteString("None evaluated (placement-soft and round-robin were not run).\n")
	}
	for _, t := range r.Targets {
		v := "MET"
		if !t.Met {
			v = "MISSED"
		}
		fmt.Fprintf(&b, "- **%s**: %s. %s.\n", v, t.Name, t.Detail)
	}
	b.WriteString(`
## The model

A discrete-event simulation on simulated time (one event queue per policy; the affinity layer on a manual clock). Each worker has data-parallel ranks; each rank prefills one request at a time, in arrival order, in a fixed base plus its uncached tokens over the prefill rate, then decodes it batched (output tokens x the time per token) without holding the queue. A rank's prefix cache is an LRU over blocks: a request reuses the leading blocks of its prompt the rank still holds when its prefill starts; its prompt's blocks join the cache when its prefill ends (the first block most recent) and its output's blocks when its decode ends, just behind the prompt's. Clients run closed loop (a call is sent its think or tool time after the calls it waits for were answered) or open loop (at their timestamps). Ambiguous dispatches (lost outcomes) hit the same requests under every policy; the worker ran half of them, and the client sends the request again after its timeout. A restart clears the worker's caches and loses what it ran; a failure stops dispatches to it until it recovers with its cache.

## Placement's scheduler

The placement rows run the real affinity layer (impl/affinity: Start, Eligible, Dispatch, Complete, Done; Join, Fail, Leave) with impl/resolver settling quarantines. Its scheduler's own choices, documented with the sweep behind them in the replay package's doc: the router keeps a prefix index of what it sent where (impl/picker's PrefixOverlap, as cache-aware's) and an estimate of each rank's prefill backlog (the estimated uncached tokens of its accepted requests not yet at their first token); a session being placed (new, or again after its binding idled out or its worker went) goes, among the ranks not overloaded, to those within the cost slack of the cheapest estimated time to first token (backlog plus the request's own uncached tokens), then to the rank holding its longest prefix unless that rank is busy, then to the least loaded (LeastInFlight + LeastBound); a sibling group is placed on its parent session's binding when that is not overloaded; in soft mode a bound request's binding moves when its rank is costlier than the cheapest by more than the cost slack; bindings idle out after the idle TTL (see Parameters). Mode off keeps the load-only part (the control without affinity). The defaults were tuned on seeds 1-4 of the default run, where placement-soft meets every target; of seeds 5 and 6, held out, seed 5 meets every target too and seed 6 misses two by small margins (p99 2.93 s against cache-aware's 2.79 s; imbalance 1.28): the package doc gives the numbers. The baselines are impl/picker's (least in flight, consistent hashing with bounded loads, PrefixOverlap for cache-aware) or a few lines here (round robin, sticky least-loaded).

## Columns

- hit %: token-weighted prefix-cache hit ratio: cached prompt tokens over prompt tokens of the answered dispatches.
- turn reuse %: of the calls whose conversation had an earlier answered call, the share whose rank still held all of that call's prompt blocks. Round robin's falls below 1/N when the caches cannot hold every session on every rank (each rank sees them all).
- TTFT p50/p99: the time-to-first-token proxy, queueing plus prefill: from the client's send (waits after refusals and restarts included; the client's own timeout on an ambiguous dispatch excluded) to the end of the prefill.
- imbalance: the busiest worker's load over the mean: in each 5-minute window, the largest ratio of a worker's dispatches to its fair share of the window's dispatches (each dispatch counts 1/(workers up) to every worker up), averaged over the windows weighted by their dispatches. Churn and the workload's ramp up and down do not count as imbalance; a worker that joins and takes every new session does.
- moves: placement: bindings moved (affinity Stats.Moves); consistent hashing and sticky least-loaded: sessions sent to another rank than their last; "-": the policy keeps no binding.
- unpinned: placement requests routed unpinned (quarantined, moves exhausted, ...), mode off's own excluded; quarantines: placement quarantines opened by ambiguous placing dispatches.
- ambiguous: dispatches whose outcome was lost (the same requests for every policy, though a policy's retries may differ); refused: dispatches refused before reaching a worker and sent again (hard mode's quarantines, no worker); prefilled Mtok: uncached tokens prefilled, in millions; end: simulated time of the last answer.
`)
	b.WriteString("\n## Parameters\n\n")
	fmt.Fprintf(&b, "- workers %d x %d data-parallel ranks; blocks of %d tokens; %d blocks (%d tokens) of LRU prefix cache per rank\n",
		c.Workers, c.Ranks, c.BlockTokens, c.CacheBlocks, c.CacheBlocks*c.BlockTokens)
	fmt.Fprintf(&b, "- prefill %s + uncached tokens at %.0f tokens/s, one at a time per rank; decode %s per output token, batched\n",
		c.PrefillBase, c.PrefillRate, c.DecodeTokenTime)
	fmt.Fprintf(&b, "- %s loop; ambiguous dispatches %.2f%% (the worker ran %.0f%% of them), client timeout %s, retry delay %s\n",
		c.Loop, 100*c.AmbiguousProb, 100*c.AmbiguousRan, c.ClientTimeout, c.RetryDelay)
	idle := "the core's default"
	if c.IdleTTL > 0 {
		idle = c.IdleTTL.String()
	}
	fmt.Fprintf(&b, "- placement: idle TTL %s, quarantine TTL %s, simulated resolver (impl/resolver Pass) every %s; cost slack %s; placing a session, soft mode drops ranks above %.2fx the mean waiting requests + %d\n",
		idle, c.QuarantineTTL, c.ResolverInterval, c.CostSlack, c.OverloadFactor, c.OverloadSlack)
	fmt.Fprintf(&b, "- consistent hashing (impl/picker ConsistentHash): bounded loads, factor %.2f, %d virtual nodes per rank\n", c.BoundedLoadFactor, picker.DefaultVirtualNodes)
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
		fmt.Fprintf(&b, "- workload (generated, seed %d): %d sessions arriving at %.2f/s; %d-token shared system prompt; user turns 1+Poisson (mean %.2f) of 1+Poisson (mean %.1f) calls; appended tokens lognormal mean %.0f (sigma %.1f); output lognormal mean %.0f (sigma %.1f); tool time lognormal mean %s in [%s, %s]; gaps between user turns lognormal median %s sigma %.1f, at most %s; fan-out probability %.2f per call, %.1f subagents of %.1f calls on average, forking the parent's context\n",
			p.Seed, p.Sessions, p.SessionRate, p.SystemTokens, p.UserTurnsMean, p.CallsPerTurnMean, p.AppendMean, p.AppendSigma,
			p.OutputMean, p.OutputSigma, p.ToolTimeMean, p.ToolTimeMin, p.ToolTimeMax, p.TurnGapMedian, p.TurnGapSigma, p.TurnGapMax,
			p.FanoutProb, p.FanoutMean, p.SubagentCallsMean)
	}
	if r.Trace != "" {
		fmt.Fprintf(&b, "- workload: trace %s\n", r.Trace)
	}
	_, err := out.Write(b.Bytes())
	return err
}

// newCanvas makes the plot's canvas: SVG (a test may render PNG to look).
var newCanvas = func(w, h vg.Length) vg.CanvasWriterTo { return vgsvg.New(w, h) }

// WritePlot draws the hit ratio and the p99 TTFT proxy of each policy, as
// two horizontal bar charts side by side, in SVG (deterministic bytes).
func (r *Report) WritePlot(out io.Writer) error {
	n := len(r.Results)
	names := make([]string, n)
	hit, p99 := make(plotter.Values, n), make(plotter.Values, n)
	// The first policy at the top.
	for i, x := range r.Results {
		k := n - 1 - i
		names[k] = x.Policy.String()
		hit[k] = 100 * x.HitRatio
		p99[k] = x.TTFTp99.Seconds()
	}
	a, err := barPanel(names, "token-weighted prefix-cache hit ratio", "hit %", hit, color.RGBA{30, 90, 200, 255}, "%.1f")
	if err != nil {
		return err
	}
	b, err := barPanel(names, "p99 TTFT proxy (queueing + prefill)", "seconds", p99, color.RGBA{200, 30, 30, 255}, "%.2f s")
	if err != nil {
		return err
	}
	w, h := vg.Points(760), vg.Points(60+22*float64(n))
	cv := newCanvas(w, h)
	dc := draw.New(cv)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Points(20), PadTop: vg.Points(6), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(10)}
	cs := plot.Align([][]*plot.Plot{{a, b}}, tiles, dc)
	a.Draw(cs[0][0])
	b.Draw(cs[0][1])
	_, err = cv.WriteTo(out)
	return err
}

// barPanel is one horizontal bar chart of a plot: a bar per name, the
// first name at the top when vs is in reverse order, each labelled.
func barPanel(names []string, title, xlabel string, vs plotter.Values, c color.RGBA, format string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.X.Min = 0
	bars, err := plotter.NewBarChart(vs, vg.Points(14))
	if err != nil {
		return nil, err
	}
	bars.Horizontal = true
	bars.Color = c
	bars.LineStyle.Width = 0
	mx := 0.0
	for _, v := range vs {
		mx = math.Max(mx, v)
	}
	var xy plotter.XYLabels
	for i, v := range vs {
		xy.XYs = append(xy.XYs, plotter.XY{X: v + 0.01*mx, Y: float64(i)})
		xy.Labels = append(xy.Labels, fmt.Sprintf(format, v))
	}
	labels, err := plotter.NewLabels(xy)
	if err != nil {
		return nil, err
	}
	for i := range labels.TextStyle {
		labels.TextStyle[i].YAlign = draw.YCenter
		labels.TextStyle[i].Font.Size = vg.Points(9)
	}
	p.Add(plotter.NewGrid(), bars, labels)
	p.NominalY(names...)
	p.X.Max = math.Max(mx*1.15, 1e-3)
	return p, nil
}
