package main

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// sample is one (round, workload, contender) measurement.
type sample struct {
	round     int
	workload  string
	contender string
	ns        float64 // ns/op, or B/binding for a memory workload
	allocs    int64
	bytes     int64
}

// ratiosTo returns, for each workload and contender, the contender's ratio
// to base's figure in the same round, one per round in which both ran (and
// base's figure is positive), in round order.
func ratiosTo(samples []sample, base string) map[string]map[string][]float64 {
	type key struct {
		round    int
		workload string
	}
	baseOf := map[key]float64{}
	for _, s := range samples {
		if s.contender == base {
			baseOf[key{s.round, s.workload}] = s.ns
		}
	}
	sorted := append([]sample(nil), samples...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].round < sorted[j].round })
	out := map[string]map[string][]float64{}
	for _, s := range sorted {
		b, ok := baseOf[key{s.round, s.workload}]
		if !ok || b <= 0 {
			continue
		}
		if out[s.workload] == nil {
			out[s.workload] = map[string][]float64{}
		}
		out[s.workload][s.contender] = append(out[s.workload][s.contender], s.ns/b)
	}
	return out
}

// quantile returns the q-quantile of xs (0 ≤ q ≤ 1) by linear interpolation
// between order statistics; NaN for no values.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}

// median is quantile 0.5.
func median(xs []float64) float64 { return quantile(xs, 0.5) }

// summary is a contender's figures for one workload over the rounds.
type summary struct {
	contender        string
	medianNs         float64
	medRatio         float64
	minRatio, maxRat float64
	p25, p75         float64
	allocs, bytes    int64 // the median round's
	rounds           int
}

// summarize returns the summaries of one workload, in contenders' order.
func summarize(samples []sample, workload, base string, contenders []string) []summary {
	rs := ratiosTo(samples, base)[workload]
	var out []summary
	for _, c := range contenders {
		var ns []float64
		var allocs, bytes []float64
		for _, s := range samples {
			if s.workload == workload && s.contender == c {
				ns = append(ns, s.ns)
				allocs = append(allocs, float64(s.allocs))
				bytes = append(bytes, float64(s.bytes))
			}
		}
		if len(ns) == 0 {
			continue
		}
		r := rs[c]
		out = append(out, summary{
			contender: c, medianNs: median(ns),
			medRatio: median(r), minRatio: quantile(r, 0), maxRat: quantile(r, 1),
			p25: quantile(r, 0.25), p75: quantile(r, 0.75),
			allocs: int64(math.Round(median(allocs))), bytes: int64(math.Round(median(bytes))),
			rounds: len(ns),
		})
	}
	return out
}

// fig formats a figure with three significant digits.
func fig(x float64) string {
	switch {
	case math.IsNaN(x):
		return "–"
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.2f", x)
	}
}

// table renders one workload's summaries as Markdown rows (no header);
// unit is "ns/op" or "B/binding".
func table(workload, unit string, ss []summary) string {
	var b strings.Builder
	for _, s := range ss {
		fmt.Fprintf(&b, "| %s | %s | %s %s | %s | %s–%s | %s–%s | %d | %d |\n",
			workload, s.contender, fig(s.medianNs), unit, fig(s.medRatio),
			fig(s.minRatio), fig(s.maxRat), fig(s.p25), fig(s.p75), s.allocs, s.bytes)
	}
	return b.String()
}

// tableHeader is the header of table's rows.
const tableHeader = "| workload | contender | median | ×placement (median) | min–max | p25–p75 | allocs/op | B/op |\n|---|---|---:|---:|---:|---:|---:|---:|\n"

// target is one of the targets against the bare xsync map.
type target struct {
	name     string
	limit    float64
	ratios   []float64 // one per round
	absolute bool      // a figure, not a ratio
}

// status renders a target's row: median, spread (min–max) and met or not.
func (t target) row() string {
	m := median(t.ratios)
	st := "met"
	if math.IsNaN(m) || m > t.limit {
		st = "**not met**"
	}
	unit := "×"
	if t.absolute {
		unit = " B"
	}
	return fmt.Sprintf("| %s | %s%s | %s–%s%s | %s |\n", t.name, fig(m), unit,
		fig(quantile(t.ratios, 0)), fig(quantile(t.ratios, 1)), unit, st)
}

// inverse returns 1/x for each x.
func inverse(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = 1 / x
	}
	return out
}

// bestRatios returns, per round, base's figure divided by the smallest
// figure of any other contender in that round (so ≤ 1 means base was the
// best).
func bestRatios(samples []sample, workload, base string) []float64 {
	best := map[int]float64{}
	mine := map[int]float64{}
	for _, s := range samples {
		if s.workload != workload {
			continue
		}
		if s.contender == base {
			mine[s.round] = s.ns
		} else if b, ok := best[s.round]; !ok || s.ns < b {
			best[s.round] = s.ns
		}
	}
	var rounds []int
	for r := range mine {
		if _, ok := best[r]; ok {
			rounds = append(rounds, r)
		}
	}
	sort.Ints(rounds)
	out := make([]float64, 0, len(rounds))
	for _, r := range rounds {
		out = append(out, mine[r]/best[r])
	}
	return out
}

// parseRaw reads peerbench's raw output: a pair's k-th line is its round k.
func parseRaw(text string) []sample {
	seen := map[string]int{}
	var out []sample
	for _, line := range strings.Split(text, "\n") {
		f := strings.Split(line, "\t")
		if len(f) < 3 || !strings.HasPrefix(f[0], "BenchmarkPeers/") {
			continue
		}
		name := strings.TrimPrefix(f[0], "BenchmarkPeers/")
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i]
		}
		slash := strings.LastIndexByte(name, '/')
		if slash < 0 {
			continue
		}
		s := sample{round: seen[name], workload: name[:slash], contender: name[slash+1:]}
		seen[name]++
		for _, m := range f[2:] {
			var v float64
			var unit string
			if _, err := fmt.Sscanf(m, "%g %s", &v, &unit); err != nil {
				continue
			}
			switch unit {
			case "ns/op", "B/binding":
				s.ns = v
			case "B/op":
				s.bytes = int64(v)
			case "allocs/op":
				s.allocs = int64(v)
			}
		}
		out = append(out, s)
	}
	return out
}
