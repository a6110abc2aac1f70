package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

var palette = map[string]color.RGBA{
	"coordinator": {200, 30, 30, 255}, "floor": {60, 60, 60, 255}, "mutex": {30, 90, 200, 255},
	"sharded": {30, 150, 60, 255}, "syncmap": {200, 130, 0, 255},
}

// plot draws hot-path and cold-path ns/op against table size (log x) for
// the coordinator and every baseline.
func plot(rs map[string]*result, path string) error {
	const w, h, pad = 900, 420, 60
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = 255
	}
	panels := []string{"hot", "cold"}
	pw := (w - pad) / len(panels)
	for pi, path := range panels {
		x0 := pad + pi*pw
		series := map[string][][2]float64{}
		maxY := 0.0
		for n, r := range rs {
			parts := strings.Split(n, "/")
			if len(parts) != 4 || parts[0] != "Growth" || parts[1] != path {
				continue
			}
			size, err := strconv.ParseFloat(strings.TrimPrefix(parts[2], "n="), 64)
			if err != nil {
				continue
			}
			series[parts[3]] = append(series[parts[3]], [2]float64{size, r.nsOp})
			maxY = max(maxY, r.nsOp)
		}
		if len(series) == 0 {
			continue
		}
		maxY *= 1.15
		px := func(size float64) int { return x0 + 20 + int((math.Log10(size)-3)/3*float64(pw-60)) }
		py := func(ns float64) int { return h - pad - int(ns/maxY*float64(h-2*pad)) }
		axis := color.RGBA{0, 0, 0, 255}
		line(img, x0+20, h-pad, x0+pw-40, h-pad, axis)
		line(img, x0+20, pad, x0+20, h-pad, axis)
		for e := 3; e <= 6; e++ {
			x := px(math.Pow(10, float64(e)))
			line(img, x, h-pad, x, h-pad+4, axis)
			text(img, x-10, h-pad+18, fmt.Sprintf("1e%d", e), axis)
		}
		for i := 0; i <= 4; i++ {
			v := maxY * float64(i) / 4
			y := py(v)
			line(img, x0+16, y, x0+20, y, axis)
			text(img, x0-22, y+4, fmt.Sprintf("%.0f", v), axis)
		}
		text(img, x0+pw/2-80, pad-20, path+" path ns/op vs live bindings", axis)
		names := make([]string, 0, len(series))
		for n := range series {
			names = append(names, n)
		}
		sort.Strings(names)
		for li, n := range names {
			pts := series[n]
			sort.Slice(pts, func(i, j int) bool { return pts[i][0] < pts[j][0] })
			c := palette[n]
			for i := range pts {
				x, y := px(pts[i][0]), py(pts[i][1])
				dot(img, x, y, c)
				if i > 0 {
					line(img, px(pts[i-1][0]), py(pts[i-1][1]), x, y, c)
				}
			}
			text(img, x0+pw-150, pad+15+14*li, n, c)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return png.Encode(f, img)
}

func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		img.SetRGBA(x0, y0, c)
		img.SetRGBA(x0, y0+1, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		if e2 := 2 * e; e2 >= dy {
			e += dy
			x0 += sx
		} else {
			e += dx
			y0 += sy
		}
	}
}

func dot(img *image.RGBA, x, y int, c color.RGBA) {
	for i := -3; i <= 3; i++ {
		for j := -3; j <= 3; j++ {
			img.SetRGBA(x+i, y+j, c)
		}
	}
}

func text(img *image.RGBA, x, y int, s string, c color.RGBA) {
	d := &font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}
