package simulate

import (
	"encoding/csv"
	"fmt"
	"html"
	"io"
	"strconv"

	"github.com/gpupack/gpupack/sim"
)

// writeCurveCSV writes one row per policy and arrived-demand percent.
func writeCurveCSV(w io.Writer, results []sim.Result) error {
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
	cw.Flush()
	return cw.Error()
}

var palette = []string{"#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}

// writeCurveSVG draws allocation against arrived demand, one line per
// policy, with axes, grid and a legend.
func writeCurveSVG(w io.Writer, results []sim.Result) error {
	const width, height = 760, 460
	const left, right, top, bottom = 70, 180, 30, 60
	pw, ph := float64(width-left-right), float64(height-top-bottom)
	maxX := 1.0
	for _, r := range results {
		for _, p := range r.Curve {
			maxX = max(maxX, p.ArrivedRatio)
		}
	}
	x := func(v float64) float64 { return float64(left) + v/maxX*pw }
	y := func(v float64) float64 { return float64(top) + (1-v)*ph }
	var b []byte
	add := func(format string, args ...any) { b = fmt.Appendf(b, format, args...) }
	add(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	add(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	add(`<text x="%d" y="18" font-size="14">GPU allocation ratio against arrived GPU demand</text>`+"\n", left)
	for i := 0; i <= 10; i++ {
		v := float64(i) / 10
		add(`<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, y(v), x(maxX), y(v))
		add(`<text x="%d" y="%.1f" text-anchor="end">%d%%</text>`+"\n", left-6, y(v)+4, i*10)
	}
	for v := 0.0; v <= maxX+1e-9; v += 0.1 {
		add(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", x(v), top, x(v), y(0))
		add(`<text x="%.1f" y="%.1f" text-anchor="middle">%.0f%%</text>`+"\n", x(v), y(0)+16, v*100)
	}
	add(`<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, y(0), x(maxX), y(0))
	add(`<line x1="%d" y1="%d" x2="%d" y2="%.1f" stroke="black"/>`+"\n", left, top, left, y(0))
	add(`<text x="%.1f" y="%d" text-anchor="middle">arrived GPU demand (share of capacity)</text>`+"\n", x(maxX/2), height-15)
	add(`<text transform="translate(18,%.1f) rotate(-90)" text-anchor="middle">GPU allocated (share of capacity)</text>`+"\n", y(0.5))
	for i, r := range results {
		color := palette[i%len(palette)]
		add(`<polyline fill="none" stroke="%s" stroke-width="2" points="`, color)
		for _, p := range r.Curve {
			add("%.1f,%.1f ", x(p.ArrivedRatio), y(p.AllocRatio))
		}
		add(`"/>` + "\n")
		ly := top + 20 + 20*i
		add(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", width-right+15, ly, width-right+40, ly, color)
		add(`<text x="%d" y="%d">%s %.1f%%</text>`+"\n", width-right+46, ly+4, html.EscapeString(r.Policy), 100*r.GPUAllocRatio)
	}
	add("</svg>\n")
	_, err := w.Write(b)
	return err
}
