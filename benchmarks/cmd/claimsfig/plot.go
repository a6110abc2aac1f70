package main

import (
	"image/color"
	"io"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

var colors = []color.RGBA{{200, 30, 30, 255}, {30, 90, 200, 255}, {60, 60, 60, 255}, {30, 150, 60, 255}}

// newCanvas makes a plot's canvas: SVG.
var newCanvas = func(w, h vg.Length) vg.CanvasWriterTo { return vgsvg.New(w, h) }

// cdf returns the points of ds's empirical distribution (x in ms, y the
// share of values at most x), at most about 400 of them.
func cdf(ds []time.Duration) plotter.XYs {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	step := max(1, len(ds)/400)
	var pts plotter.XYs
	for i := 0; i < len(ds); i += step {
		pts = append(pts, plotter.XY{X: max(float64(ds[i])/1e6, 1e-3), Y: float64(i+1) / float64(len(ds))})
	}
	pts = append(pts, plotter.XY{X: max(float64(ds[len(ds)-1])/1e6, 1e-3), Y: 1})
	return pts
}

// withLegend draws row side by side in w and leg in a strip legendWidth
// wide at their right.
func withLegend(row []*plot.Plot, leg plot.Legend, w, legendWidth, h vg.Length, out io.Writer) error {
	w += legendWidth
	cv := newCanvas(w, h)
	dc := draw.New(cv)
	plots := draw.Crop(dc, 0, -legendWidth, 0, 0)
	tiles := draw.Tiles{Rows: 1, Cols: len(row), PadX: vg.Points(20),
		PadTop: vg.Points(6), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(4)}
	cs := plot.Align([][]*plot.Plot{row}, tiles, plots)
	for j, p := range row {
		p.Draw(cs[0][j])
	}
	leg.Top, leg.Left = true, true
	leg.YOffs = -vg.Points(24)
	leg.Draw(draw.Crop(dc, w-legendWidth+vg.Points(8), 0, 0, 0))
	_, err := cv.WriteTo(out)
	return err
}

// line adds a line of pts to p with the i-th colour, dashed if asked, and
// an entry to leg (if not nil).
func line(p *plot.Plot, leg *plot.Legend, name string, pts plotter.XYs, i int, dashed, points bool) error {
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Color = colors[i%len(colors)]
	l.Width = vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	}
	p.Add(l)
	if !points {
		if leg != nil {
			leg.Add(name, l)
		}
		return nil
	}
	s, err := plotter.NewScatter(pts)
	if err != nil {
		return err
	}
	s.Color = l.Color
	s.Shape = draw.CircleGlyph{}
	s.Radius = vg.Points(2.5)
	p.Add(s)
	if leg != nil {
		leg.Add(name, l, s)
	}
	return nil
}

// plotFirstTurn draws each series' first-turn latency distribution:
// Start solid, the whole turn dashed, on a log time axis.
func plotFirstTurn(r *results, w io.Writer) error {
	p := plot.New()
	p.Title.Text = "first-turn latency (one member)"
	p.X.Label.Text = "ms (log)"
	p.Y.Label.Text = "share of turns within"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0, 1
	p.Add(plotter.NewGrid())
	leg := plot.NewLegend()
	for i, l := range r.first {
		if err := line(p, &leg, l.name+": Start", cdf(l.start), i, false, false); err != nil {
			return err
		}
		if err := line(p, &leg, l.name+": whole turn", cdf(l.whole), i, true, false); err != nil {
			return err
		}
	}
	return withLegend([]*plot.Plot{p}, leg, vg.Points(520), vg.Points(300), vg.Points(360), w)
}

// plotCluster draws claims per second against replicas, and each
// restart's agreement times.
func plotCluster(r *results, w io.Writer) error {
	a := plot.New()
	a.Title.Text = "claims per second (one member)"
	a.X.Label.Text = "replicas"
	a.Y.Label.Text = "claims/s"
	a.Y.Min = 0
	a.Add(plotter.NewGrid())
	// The memstore ceiling is in the report's table only: far above, it
	// would flatten the etcd line.
	var etcd plotter.XYs
	for _, x := range r.rates {
		if x.store == "etcd" {
			etcd = append(etcd, plotter.XY{X: float64(x.replicas), Y: x.perSecond()})
		}
	}
	if err := line(a, nil, "etcd", etcd, 0, false, true); err != nil {
		return err
	}
	a.Y.Max = 0
	for _, pt := range etcd {
		a.Y.Max = max(a.Y.Max, pt.Y*1.2)
	}
	a.X.Min, a.X.Max = 0.5, float64(r.opts.replicas)+0.5
	ticks := plot.ConstantTicks(nil)
	for n := 1; n <= r.opts.replicas; n++ {
		ticks = append(ticks, plot.Tick{Value: float64(n), Label: strconv.Itoa(n)})
	}
	a.X.Tick.Marker = ticks
	a.Y.Tick.Marker = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		ts := plot.DefaultTicks{}.Ticks(lo, hi)
		for i := range ts {
			if ts[i].Label != "" {
				ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
			}
		}
		return ts
	})

	b := plot.New()
	b.Title.Text = "every replica agrees again (three members)"
	b.X.Label.Text = "restart (L: leader stopped, F: follower)"
	b.Y.Label.Text = "ms (log)"
	b.Y.Scale = plot.LogScale{}
	b.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	b.Add(plotter.NewGrid())
	leg := plot.NewLegend()
	var stop, restart, took plotter.XYs
	rt := plot.ConstantTicks(nil)
	for i, x := range r.agree {
		X := float64(i + 1)
		stop = append(stop, plotter.XY{X: X, Y: logMs(x.afterStop)})
		restart = append(restart, plotter.XY{X: X, Y: logMs(x.afterRestart)})
		took = append(took, plotter.XY{X: X, Y: logMs(x.restartTook)})
		role := "F"
		if x.leader {
			role = "L"
		}
		rt = append(rt, plot.Tick{Value: X, Label: strconv.Itoa(i+1) + role})
	}
	for i, s := range []struct {
		name string
		pts  plotter.XYs
	}{{"agreed after the stop", stop}, {"agreed after the restart", restart}, {"the restart itself", took}} {
		if err := line(b, &leg, s.name, s.pts, i, i == 2, true); err != nil {
			return err
		}
	}
	b.X.Min, b.X.Max = 0.5, float64(len(r.agree))+0.5
	b.X.Tick.Marker = rt

	return withLegend([]*plot.Plot{a, b}, leg, vg.Points(720), vg.Points(170), vg.Points(340), w)
}

// logMs is d in milliseconds for a log axis (at least 0.01).
func logMs(d time.Duration) float64 { return max(float64(d)/1e6, 0.01) }
