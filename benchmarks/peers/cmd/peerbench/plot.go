package main

import (
	"strings"

	"github.com/placementlab/placement/benchmarks/peers"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// plotRatios draws each contender's median ratio to placement (log y),
// grouped by workload, one marker per contender (the spread is in the
// table), to path.
func plotRatios(samples []sample, ws []peers.Workload, names []string, path string) error {
	p := plot.New()
	p.Title.Text = "peers: median ratio to placement over interleaved rounds (below 1: faster or smaller than placement)"
	p.Y.Label.Text = "× placement (log)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	var labels []string
	for _, w := range ws {
		labels = append(labels, strings.ReplaceAll(w.Name, "/", " "))
	}
	rs := ratiosTo(samples, peers.Baseline)
	for i, c := range names {
		var xys plotter.XYs
		for j, wl := range ws {
			m := median(rs[wl.Name][c])
			if !(m > 0) {
				continue
			}
			xys = append(xys, plotter.XY{X: float64(j) + 0.1*(float64(i)-float64(len(names)-1)/2), Y: m})
		}
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return err
		}
		sc.GlyphStyle.Color = plotutil.Color(i)
		sc.GlyphStyle.Shape = plotutil.Shape(i)
		sc.GlyphStyle.Radius = vg.Points(4)
		p.Add(sc)
		p.Legend.Add(c, sc)
	}
	p.Add(plotter.NewGrid())
	p.Y.Max *= 8 // room above the points for the legend
	p.Y.Min /= 1.5
	p.Legend.Top = true
	p.Legend.Left = true
	p.NominalX(labels...)
	return p.Save(32*vg.Centimeter, 14*vg.Centimeter, path)
}
