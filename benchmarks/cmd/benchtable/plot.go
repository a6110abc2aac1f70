package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// style is a contender's line in every plot: a variant (another
// configuration of a default contender) is its sibling's colour, dashed.
type style struct {
	color  color.RGBA
	dashed bool
}

var styles = map[string]style{
	"coordinator":        {color.RGBA{200, 30, 30, 255}, false},
	"coordinator-manual": {color.RGBA{200, 30, 30, 255}, true},
	"floor":              {color.RGBA{60, 60, 60, 255}, false},
	"mutex":              {color.RGBA{30, 90, 200, 255}, false},
	"mutex-now":          {color.RGBA{30, 90, 200, 255}, true},
	"sharded":            {color.RGBA{30, 150, 60, 255}, false},
	"syncmap":            {color.RGBA{200, 130, 0, 255}, false},
}

// series is one contender's points.
type series struct {
	name string
	pts  plotter.XYs
}

// collect gathers, for benchmarks named prefix/<param>/<contender>, each
// contender's (x, ns/op) points, x parsed from <param> after key=. The
// series come in contender order, points by x.
func collect(rs map[string]*result, prefix, key string) []series {
	by := map[string]plotter.XYs{}
	for n, r := range rs {
		rest, ok := strings.CutPrefix(n, prefix+"/")
		if !ok || r.nsOp <= 0 {
			continue
		}
		param, who, ok := strings.Cut(rest, "/")
		if !ok || strings.Contains(who, "/") {
			continue
		}
		v, ok := strings.CutPrefix(param, key+"=")
		if !ok {
			continue
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			continue
		}
		by[who] = append(by[who], plotter.XY{X: x, Y: r.nsOp})
	}
	var out []series
	for _, who := range contenderNames(by) {
		pts := by[who]
		sort.Slice(pts, func(i, j int) bool { return pts[i].X < pts[j].X })
		out = append(out, series{who, pts})
	}
	return out
}

// contenderNames lists m's keys: the known contenders in their order, then
// any others sorted.
func contenderNames[V any](m map[string]V) []string {
	var out, rest []string
	for _, c := range contenderOrder {
		if _, ok := m[c]; ok {
			out = append(out, c)
		}
	}
	for c := range m {
		if _, ok := styles[c]; !ok {
			rest = append(rest, c)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

// addLines adds one line with points per series, in the contender's style,
// and an entry to leg for each contender not already in seen.
func addLines(p *plot.Plot, ss []series, leg *plot.Legend, seen map[string]bool) error {
	for i, s := range ss {
		l, pts, err := plotter.NewLinePoints(s.pts)
		if err != nil {
			return err
		}
		st, ok := styles[s.name]
		if !ok {
			st = style{color: plotColor(i)}
		}
		l.Color, pts.Color = st.color, st.color
		l.Width = vg.Points(1.5)
		if st.dashed {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		pts.Shape = draw.CircleGlyph{}
		pts.Radius = vg.Points(2.5)
		p.Add(l, pts)
		if !seen[s.name] {
			seen[s.name] = true
			leg.Add(s.name, l, pts)
		}
	}
	return nil
}

func plotColor(i int) color.RGBA {
	c := []color.RGBA{{120, 0, 160, 255}, {0, 150, 150, 255}, {150, 100, 50, 255}}
	return c[i%len(c)]
}

// logTicks labels 1, 2 and 5 times each power of ten in [min, max] (and
// marks the other integers times a power of ten), so an axis spanning less
// than a decade still has labels.
type logTicks struct{}

func (logTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(min)); math.Pow(10, e) <= max; e++ {
		base := math.Pow(10, e)
		for m := 1; m < 10; m++ {
			v := float64(m) * base
			if v < min*0.999 || v > max*1.001 {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// sizeTicks labels the table sizes as powers of ten.
type sizeTicks struct{}

func (sizeTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Ceil(math.Log10(min) - 1e-9); math.Pow(10, e) <= max*1.001; e++ {
		ts = append(ts, plot.Tick{Value: math.Pow(10, e), Label: fmt.Sprintf("1e%.0f", e)})
	}
	return ts
}

// growthPanels are the growth plot's panels: Growth/<path>/n=…/<contender>.
var growthPanels = []struct{ path, title string }{
	{"hot", "hot path, one goroutine"},
	{"hot-parallel", "hot path, parallel, distinct keys"},
	{"cold", "cold path"},
}

// plotGrowth draws ns/op against live bindings (log x, log y), one panel
// per growth path, one line per contender. It reports whether there was
// anything to draw.
func plotGrowth(rs map[string]*result, file string) (bool, error) {
	var row []*plot.Plot
	leg, seen := plot.NewLegend(), map[string]bool{}
	for _, g := range growthPanels {
		ss := collect(rs, "Growth/"+g.path, "n")
		if len(ss) == 0 {
			continue
		}
		p := plot.New()
		p.Title.Text = g.title
		p.X.Label.Text = "live bindings"
		p.Y.Label.Text = "ns/op"
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		p.X.Tick.Marker, p.Y.Tick.Marker = sizeTicks{}, logTicks{}
		p.Add(plotter.NewGrid())
		if err := addLines(p, ss, &leg, seen); err != nil {
			return false, err
		}
		row = append(row, p)
	}
	if len(row) == 0 {
		return false, nil
	}
	return true, save(row, leg, vg.Points(300*float64(len(row)))+legendWidth, vg.Points(300), file)
}

// plotScaling draws the scaling benchmark: each contender's throughput
// (million hit-and-release pairs per second, all goroutines together)
// against GOMAXPROCS, and the same as a ratio to its own procs=1 figure,
// with the ideal (linear) line.
func plotScaling(rs map[string]*result, file string) (bool, error) {
	ss := collect(rs, "Scaling", "procs")
	if len(ss) == 0 {
		return false, nil
	}
	abs := plot.New()
	abs.Title.Text = "hot path throughput, parallel, distinct keys"
	abs.X.Label.Text = "GOMAXPROCS"
	abs.Y.Label.Text = "million hit+release per second"
	rel := plot.New()
	rel.Title.Text = "throughput relative to the same contender at 1 proc"
	rel.X.Label.Text = "GOMAXPROCS"
	rel.Y.Label.Text = "× its own single-proc throughput"
	var tput, ratio []series
	maxProcs := 1.0
	for _, s := range ss {
		var one float64
		for _, pt := range s.pts {
			if pt.X == 1 {
				one = pt.Y
			}
		}
		t := series{name: s.name}
		r := series{name: s.name}
		for _, pt := range s.pts {
			t.pts = append(t.pts, plotter.XY{X: pt.X, Y: 1e3 / pt.Y})
			if one > 0 {
				r.pts = append(r.pts, plotter.XY{X: pt.X, Y: one / pt.Y})
			}
			maxProcs = max(maxProcs, pt.X)
		}
		tput = append(tput, t)
		if len(r.pts) > 0 {
			ratio = append(ratio, r)
		}
	}
	ideal, err := plotter.NewLine(plotter.XYs{{X: 1, Y: 1}, {X: maxProcs, Y: maxProcs}})
	if err != nil {
		return false, err
	}
	ideal.Color = color.RGBA{160, 160, 160, 255}
	ideal.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
	rel.Add(ideal)
	leg, seen := plot.NewLegend(), map[string]bool{}
	var procTicks plot.ConstantTicks
	for _, s := range ss {
		for _, pt := range s.pts {
			if len(procTicks) == 0 || procTicks[len(procTicks)-1].Value < pt.X {
				procTicks = append(procTicks, plot.Tick{Value: pt.X, Label: strconv.FormatFloat(pt.X, 'f', -1, 64)})
			}
		}
	}
	for _, p := range []*plot.Plot{abs, rel} {
		p.Add(plotter.NewGrid())
		p.X.Tick.Marker = procTicks
		p.X.Min, p.Y.Min = 1, 0
	}
	if err := addLines(abs, tput, &leg, seen); err != nil {
		return false, err
	}
	if err := addLines(rel, ratio, &leg, seen); err != nil {
		return false, err
	}
	leg.Add("linear scaling", ideal)
	return true, save([]*plot.Plot{abs, rel}, leg, vg.Points(640)+legendWidth, vg.Points(320), file)
}

// legendWidth is the strip at the right of a figure that holds its legend.
const legendWidth = vg.Length(140)

// save draws a row of plots, aligned, with one legend for them all to
// their right, into a PNG.
func save(row []*plot.Plot, leg plot.Legend, w, h vg.Length, file string) error {
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
	dc := draw.New(img)
	plots := draw.Crop(dc, 0, -legendWidth, 0, 0)
	tiles := draw.Tiles{Rows: 1, Cols: len(row), PadX: vg.Points(16),
		PadTop: vg.Points(6), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(4)}
	canvases := plot.Align([][]*plot.Plot{row}, tiles, plots)
	for j, p := range row {
		p.Draw(canvases[0][j])
	}
	leg.Top, leg.Left = true, true
	leg.YOffs = -vg.Points(24)
	leg.Draw(draw.Crop(dc, w-legendWidth+vg.Points(8), 0, 0, 0))
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
