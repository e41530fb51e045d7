package simulate

import (
	"encoding/csv"
	"fmt"
	"html"
	"io"
	"math"
	"strconv"

	"github.com/gpupack/gpupack/sim"
)

// writeCurveCSV writes one row per policy and arrived-demand percent, and,
// when the bounds were computed, one row for the hindsight packing at the
// end of the run (it has no curve: it knows every arrival in advance).
func writeCurveCSV(w io.Writer, results []sim.Result, bounds *sim.Bounds) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"policy", "seed", "arrived_ratio", "gpu_alloc_ratio"}); err != nil {
		return err
	}
	for _, r := range results {
		for _, p := range r.Curve {
			if err := cw.Write([]string{r.Policy, strconv.FormatUint(r.Seed, 10),
				strconv.FormatFloat(p.ArrivedRatio, 'f', 2, 64), strconv.FormatFloat(p.AllocRatio, 'f', 5, 64)}); err != nil {
				return err
			}
		}
	}
	end := 0.0
	if len(results) > 0 && len(results[0].Curve) > 0 {
		end = results[0].Curve[len(results[0].Curve)-1].ArrivedRatio
	}
	if h := hindsightOf(bounds); h != nil {
		if err := cw.Write([]string{h.Policy, strconv.FormatUint(h.Seed, 10),
			strconv.FormatFloat(end, 'f', 2, 64), strconv.FormatFloat(h.GPUAllocRatio, 'f', 5, 64)}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

var palette = []string{"#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}

// hindsightOf is the bounds' hindsight packing, nil when there is none.
func hindsightOf(b *sim.Bounds) *sim.HindsightPacking {
	if b == nil {
		return nil
	}
	return b.Hindsight
}

// capOf is the bounds' place-if-fits cap, nil when there is none.
func capOf(b *sim.Bounds) *float64 {
	if b == nil || b.PlaceIfFitsCap == nil {
		return nil
	}
	return &b.PlaceIfFitsCap.Ratio
}

// writeCurveSVG draws allocation against arrived demand, one line per
// policy and, when the bounds were computed, the hindsight packing as a
// dashed level and the place-if-fits cap as a dotted one: the whole run on
// the left, and on the right a zoom on the end of the run, where the
// policies part ways.
func writeCurveSVG(w io.Writer, results []sim.Result, bounds *sim.Bounds) error {
	const width, height = 1040, 460
	maxX, lowY := 1.0, 1.0
	for _, r := range results {
		for _, p := range r.Curve {
			maxX = max(maxX, p.ArrivedRatio)
			if p.ArrivedRatio >= zoomFrom {
				lowY = min(lowY, p.AllocRatio)
			}
		}
	}
	zoomLow := math.Max(0, math.Floor(lowY*20)/20-0.05)
	var b []byte
	add := func(format string, args ...any) { b = fmt.Appendf(b, format, args...) }
	add(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	add(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	add(`<text x="70" y="18" font-size="14">GPU allocation ratio against arrived GPU demand</text>` + "\n")
	panel(add, results, bounds, rect{70, 30, 360, 370}, [2]float64{0, maxX}, [2]float64{0, 1}, 0.2, 0.1)
	add(`<text x="520" y="18" font-size="14">zoom: from %.0f%% arrived</text>`+"\n", zoomFrom*100)
	yStep := 0.05
	if 1-zoomLow <= 0.2 {
		yStep = 0.02
	}
	panel(add, results, bounds, rect{520, 30, 340, 370}, [2]float64{zoomFrom, maxX}, [2]float64{zoomLow, 1}, 0.1, yStep)
	for i, r := range results {
		ly := 50 + 20*i
		add(`<line x1="880" y1="%d" x2="905" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", ly, ly, palette[i%len(palette)])
		add(`<text x="911" y="%d">%s %.1f%%</text>`+"\n", ly+4, html.EscapeString(r.Policy), 100*r.GPUAllocRatio)
	}
	ly := 50 + 20*len(results)
	if h := hindsightOf(bounds); h != nil {
		add(`<line x1="880" y1="%d" x2="905" y2="%d" stroke="black" stroke-width="2" stroke-dasharray="5,3"/>`+"\n", ly, ly)
		add(`<text x="911" y="%d">hindsight packing %.1f%%</text>`+"\n", ly+4, 100*h.GPUAllocRatio)
		ly += 20
	}
	if c := capOf(bounds); c != nil {
		add(`<line x1="880" y1="%d" x2="905" y2="%d" stroke="black" stroke-width="1" stroke-dasharray="1,3"/>`+"\n", ly, ly)
		add(`<text x="911" y="%d">place-if-fits cap %.1f%%</text>`+"\n", ly+4, 100**c)
	}
	add(`<text x="465" y="%d" text-anchor="middle">arrived GPU demand (share of capacity)</text>`+"\n", height-15)
	add(`<text transform="translate(18,215) rotate(-90)" text-anchor="middle">GPU allocated (share of capacity)</text>` + "\n")
	add("</svg>\n")
	_, err := w.Write(b)
	return err
}

// zoomFrom is where the zoomed panel starts, in arrived demand.
const zoomFrom = 0.8

type rect struct{ left, top, width, height float64 }

// panel draws one plot of the curves inside r over the given ranges, with a
// grid every xStep of arrived demand and every yStep of allocation.
func panel(add func(string, ...any), results []sim.Result, bounds *sim.Bounds, r rect, xr, yr [2]float64, xStep, yStep float64) {
	x := func(v float64) float64 { return r.left + (v-xr[0])/(xr[1]-xr[0])*r.width }
	y := func(v float64) float64 { return r.top + (yr[1]-v)/(yr[1]-yr[0])*r.height }
	for i := 0; ; i++ {
		v := math.Ceil(yr[0]/yStep-1e-9)*yStep + float64(i)*yStep
		if v > yr[1]+1e-9 {
			break
		}
		add(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x(xr[0]), y(v), x(xr[1]), y(v))
		add(`<text x="%.1f" y="%.1f" text-anchor="end">%.0f%%</text>`+"\n", r.left-6, y(v)+4, v*100)
	}
	for i := 0; ; i++ {
		v := math.Ceil(xr[0]/xStep-1e-9)*xStep + float64(i)*xStep
		if v > xr[1]+1e-9 {
			break
		}
		add(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", x(v), r.top, x(v), y(yr[0]))
		add(`<text x="%.1f" y="%.1f" text-anchor="middle">%.0f%%</text>`+"\n", x(v), y(yr[0])+16, v*100)
	}
	add(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", r.left, y(yr[0]), x(xr[1]), y(yr[0]))
	add(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", r.left, r.top, r.left, y(yr[0]))
	for i, res := range results {
		add(`<polyline fill="none" stroke="%s" stroke-width="2" points="`, palette[i%len(palette)])
		for _, p := range res.Curve {
			if p.ArrivedRatio >= xr[0]-1e-9 {
				add("%.1f,%.1f ", x(p.ArrivedRatio), y(max(p.AllocRatio, yr[0])))
			}
		}
		add(`"/>` + "\n")
	}
	if h := hindsightOf(bounds); h != nil && h.GPUAllocRatio >= yr[0] {
		add(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black" stroke-width="2" stroke-dasharray="5,3"/>`+"\n",
			x(xr[0]), y(h.GPUAllocRatio), x(xr[1]), y(h.GPUAllocRatio))
	}
	if c := capOf(bounds); c != nil && *c >= yr[0] {
		add(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black" stroke-width="1" stroke-dasharray="1,3"/>`+"\n",
			x(xr[0]), y(*c), x(xr[1]), y(*c))
	}
}
