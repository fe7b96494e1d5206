package dashboard

import (
	"fmt"
	"strconv"
)

// Charts are SVG drawn on the server: no chart script. Each series has a
// fill and a pattern (stripes, dots), so the parts read without colour, and
// every chart comes with its numbers as a table, for screen readers and for
// anyone who wants the figures.

// chart is a bar chart, stacked when it has several series.
type chart struct {
	ID, Title, Desc string
	Width, Height   int
	Series          []series
	Bars            []chartBar
	Ticks           []tick
	XLabels         []xLabel
	PlotTop         int // y of the plot's top, px
	PlotBottom      int // y of the x axis
	PlotLeft        int
	Caption         string // the unit of the first column of the table, e.g. "Day"
}

// series is one kind of part of the bars.
type series struct {
	Name string
	Fill string // a colour, or one of the chart's patterns
}

// seriesStyles are the fills of a chart's first, second and third series:
// solid, stripes, dots, so that they differ without colour.
func seriesStyles(chartID string) []string {
	return []string{"#2454c6", "url(#" + chartID + "-stripes)", "url(#" + chartID + "-dots)"}
}

// seriesOf names a chart's series in order, with their fills.
func seriesOf(chartID string, names ...string) []series {
	styles := seriesStyles(chartID)
	out := make([]series, len(names))
	for i, n := range names {
		out[i] = series{Name: n, Fill: styles[i%len(styles)]}
	}
	return out
}

type chartBar struct {
	Label string // the x label, in the table
	X, W  int
	Parts []barPart
	Total int
}

type barPart struct {
	Series string
	Fill   string
	Value  int
	Y, H   int
	Title  string // shown on hover: "2026-11-21: 3 completed"
}

type tick struct {
	Y     int
	Label string
}

type xLabel struct {
	X    int
	Text string
}

// newChart lays out a chart of bars with one value per series each;
// labelEvery chooses which bars get an x label.
func newChart(id, title, desc, caption string, ss []series, labels []string, values [][]int, labelEvery int) chart {
	const width, height, left, right, top, bottom = 720, 220, 40, 10, 10, 190
	c := chart{ID: id, Title: title, Desc: desc, Width: width, Height: height, Series: ss, PlotTop: top, PlotBottom: bottom, PlotLeft: left, Caption: caption}
	max := 0
	for _, vs := range values {
		sum := 0
		for _, v := range vs {
			sum += v
		}
		max = maxInt(max, sum)
	}
	scale := niceMax(max)
	plotH := bottom - top
	step := (width - left - right) / maxInt(1, len(labels))
	for i := range 5 {
		v := scale * i / 4
		c.Ticks = append(c.Ticks, tick{Y: bottom - plotH*i/4, Label: strconv.Itoa(v)})
	}
	for i, lab := range labels {
		b := chartBar{Label: lab, X: left + i*step + step/8, W: maxInt(1, step*3/4)}
		y := bottom
		for j, v := range values[i] {
			b.Total += v
			h := 0
			if scale > 0 {
				h = v * plotH / scale
			}
			if v > 0 && h == 0 {
				h = 1
			}
			y -= h
			b.Parts = append(b.Parts, barPart{Series: ss[j].Name, Fill: ss[j].Fill, Value: v, Y: y, H: h,
				Title: fmt.Sprintf("%s: %d %s", lab, v, ss[j].Name)})
		}
		c.Bars = append(c.Bars, b)
		if labelEvery > 0 && (i%labelEvery == 0 || i == len(labels)-1) {
			c.XLabels = append(c.XLabels, xLabel{X: b.X + b.W/2, Text: lab})
		}
	}
	return c
}

// niceMax rounds the largest value up to a round figure divisible by 4,
// the axis's top.
func niceMax(v int) int {
	if v <= 4 {
		return 4
	}
	for p := 1; p <= 1_000_000_000; p *= 10 {
		for _, m := range []int{1, 2, 5} {
			if top := m * p * 4; top >= v {
				return top
			}
		}
	}
	return v
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// meter is one horizontal bar of 0..100 (a signal, a score).
type meter struct {
	Label string
	Value int
	W     int // px of 200
}

func newMeter(label string, v int) meter { return meter{Label: label, Value: v, W: v * 2} }
