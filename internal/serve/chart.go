package serve

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// chart is an SVG chart drawn on the server: axes, ticks and series in
// pixel coordinates, which the page template writes out as SVG elements.
// Every string in it (titles, names, tooltips) is escaped by html/template
// when written.
type chart struct {
	ID, Title, YLabel, XLabel string
	Width, Height             float64
	// Plot is the area inside the axes.
	Left, Top, Right, Bottom float64
	XTicks, YTicks           []tick
	Series                   []series
}

type tick struct {
	Pos   float64 // pixel
	Label string
}

// series is one named line or set of bars; Segments are the polylines
// (a gap where a value is unknown), Points the marks with their tooltips.
type series struct {
	Name     string
	Class    string // CSS class: its colour and style
	Bars     bool
	Segments []string
	Points   []mark
}

// mark is one data point: a circle at X,Y, or for bars a rectangle from
// X,Y of size W,H.
type mark struct {
	X, Y, W, H float64
	Title      string
}

// xy is a data point before it is placed; Known false leaves a gap.
type xy struct {
	X, Y  float64
	Known bool
	Title string
}

// axis maps data values to pixels.
type axis struct{ lo, hi, from, to float64 }

func (a axis) at(v float64) float64 {
	if a.hi == a.lo {
		return a.from
	}
	return a.from + (v-a.lo)/(a.hi-a.lo)*(a.to-a.from)
}

// newChart makes a chart of the standard size with room for the labels.
func newChart(id, title, xLabel, yLabel string) *chart {
	return &chart{ID: id, Title: title, XLabel: xLabel, YLabel: yLabel, Width: 720, Height: 280, Left: 64, Top: 16, Right: 704, Bottom: 236}
}

// niceMax rounds v up to 1, 2 or 5 times a power of ten, so that ticks
// fall on round numbers.
func niceMax(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p+1e-12 {
			return m * p
		}
	}
	return 10 * p
}

// yAxis sets the y ticks for 0..top and returns the axis.
func (c *chart) yAxis(top float64, format func(float64) string) axis {
	top = niceMax(top)
	a := axis{lo: 0, hi: top, from: c.Bottom, to: c.Top}
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		c.YTicks = append(c.YTicks, tick{Pos: a.at(v), Label: format(v)})
	}
	return a
}

// addLine adds a line series through the known points of pts.
func (c *chart) addLine(name, class string, pts []xy, x, y axis) {
	s := series{Name: name, Class: class}
	var seg []string
	flush := func() {
		if len(seg) > 0 {
			s.Segments = append(s.Segments, strings.Join(seg, " "))
			seg = nil
		}
	}
	for _, p := range pts {
		if !p.Known {
			flush()
			continue
		}
		px, py := x.at(p.X), y.at(p.Y)
		seg = append(seg, coord(px)+","+coord(py))
		s.Points = append(s.Points, mark{X: px, Y: py, Title: p.Title})
	}
	flush()
	c.Series = append(c.Series, s)
}

// addBars adds a bar series, one bar per known point, centred on X and
// slot pixels wide at most.
func (c *chart) addBars(name, class string, pts []xy, x, y axis, slot float64) {
	s := series{Name: name, Class: class, Bars: true}
	w := math.Max(1, slot*0.7)
	for _, p := range pts {
		if !p.Known {
			continue
		}
		top := y.at(p.Y)
		s.Points = append(s.Points, mark{X: x.at(p.X) - w/2, Y: top, W: w, H: y.at(0) - top, Title: p.Title})
	}
	c.Series = append(c.Series, s)
}

func coord(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// percent formats a ratio 0..1 as a percentage to a tenth of a point.
func percent(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }

// percentTick formats a ratio 0..1 as a percentage with as many decimals
// as a tick step of step needs (none for whole points).
func percentTick(v, step float64) string {
	decimals := max(0, int(math.Ceil(-math.Log10(100*step)-1e-9)))
	return strconv.FormatFloat(100*v, 'f', decimals, 64) + "%"
}
