package main

import (
	"image"
	"image/color"
	"image/png"
	"os"
)

// palette colours the lines in procs' order, then the Go heap.
var palette = []color.RGBA{{0x1f, 0x77, 0xb4, 0xff}, {0xd6, 0x27, 0x28, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0x94, 0x67, 0xbd, 0xff}}

// plot draws every process's RSS (and the seckill Go heap, last colour)
// against time on one scale, from 0 to the highest reading, with a grid
// line at every tenth of the run and of the scale: a flat soak is flat
// lines. Drawn by hand (image/png) so the tool needs no plotting module;
// soak.csv has the numbers.
func plot(path string, procs []proc, ss []sample) error {
	const w, h, pad = 960, 480, 20
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = 0xff
	}
	grid := color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	for k := 0; k <= 10; k++ {
		x := pad + k*(w-2*pad)/10
		y := pad + k*(h-2*pad)/10
		for t := pad; t <= h-pad; t++ {
			img.Set(x, t, grid)
		}
		for t := pad; t <= w-pad; t++ {
			img.Set(t, y, grid)
		}
	}
	var top int64 = 1
	series := make([][]int64, len(procs)+1)
	for _, s := range ss {
		for i := range procs {
			series[i] = append(series[i], s.rss[i])
			top = max(top, s.rss[i])
		}
		series[len(procs)] = append(series[len(procs)], s.heap)
		top = max(top, s.heap)
	}
	end := ss[len(ss)-1].at
	at := func(j int, v int64) (int, int) {
		x := pad + int(float64(w-2*pad)*float64(ss[j].at)/float64(end))
		y := h - pad - int(float64(h-2*pad)*float64(v)/float64(top))
		return x, y
	}
	for i, vs := range series {
		c := palette[min(i, len(palette)-1)]
		for j := 1; j < len(vs); j++ {
			x0, y0 := at(j-1, vs[j-1])
			x1, y1 := at(j, vs[j])
			line(img, x0, y0, x1, y1, c)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// line draws a two-pixel-thick segment (Bresenham).
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := 1, 1
	if x0 > x1 {
		sx = -1
	}
	if y0 > y1 {
		sy = -1
	}
	e := dx + dy
	for {
		img.Set(x0, y0, c)
		img.Set(x0, y0+1, c)
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

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
