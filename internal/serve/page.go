package serve

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/render/adviceout"
	"github.com/gpupack/gpupack/internal/render/planout"
	"github.com/gpupack/gpupack/plan"
	"github.com/gpupack/gpupack/reclaim"
	"github.com/gpupack/gpupack/sim"
	"github.com/gpupack/gpupack/usage"
)

var (
	//go:embed assets/index.html.tmpl
	indexTemplate string
	//go:embed assets/static
	assets embed.FS
	// staticFS serves assets/static at /static/.
	staticFS = must(fs.Sub(assets, "assets"))
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err) // embedded at build time: cannot fail at run time
	}
	return v
}

type page struct{ tmpl *template.Template }

func newPage() *page {
	funcs := template.FuncMap{
		"hours":   func(s usage.Seconds) string { return strconv.FormatFloat(s.Hours(), 'f', 1, 64) },
		"amountH": amountHours,
		"money":   money,
		"ratio":   ratio,
		"raw":     raw,
		"rawS":    func(s usage.Seconds) string { return strconv.FormatFloat(float64(s), 'g', -1, 64) },
		"dur":     duration,
		"durS":    func(s usage.Seconds) string { return duration(usage.Known(float64(s))) },
		"when":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 MST") },
		"whenP": func(t *time.Time) string {
			if t == nil {
				return "unknown"
			}
			return t.UTC().Format("2006-01-02 15:04 MST")
		},
		"activity": func(t usage.Totals) usage.Amount {
			if !t.ActiveGPUSeconds.Known() || t.AllocatedGPUSeconds == 0 {
				return usage.Unknown
			}
			return usage.Known(t.ActiveGPUSeconds.Value() / float64(t.AllocatedGPUSeconds))
		},
		"perActiveHour": perActiveHour,
		"causes": func(f diagnose.Finding) string {
			s := string(f.Cause)
			for _, c := range f.Also {
				s += ", " + string(c)
			}
			return s
		},
		"fileHref": func(name string) string { return filesPath + name },
		"risks": func(rs []plan.Risk) string {
			out := make([]string, len(rs))
			for i, r := range rs {
				out[i] = string(r)
			}
			return strings.Join(out, ", ")
		},
		// remedies are the remedies of the finding's fix i that have
		// something to apply (or say why not): advice shows nothing.
		"remedies": func(f diagnose.Finding, i int) []diagnose.Remedy {
			var out []diagnose.Remedy
			for _, r := range f.Remedies {
				if r.Fix == i && r.Kind != diagnose.Advice {
					out = append(out, r)
				}
			}
			return out
		},
		"lines": func(ss []string) string { return strings.Join(ss, "\n") },
		"after": planout.AfterText,
		"half":  func(v float64) float64 { return v / 2 },
		"pct":   func(r float64) float64 { return 100 * r },
		"coord": coord,
		"sub":   func(a, b float64) float64 { return a - b },
		"add":   func(a, b float64) float64 { return a + b },
		// poolCells and moneyLines are the pool table's cells and the
		// reserve, spot, scale and nodepool lines, as gpupack plan words
		// them.
		"poolCells":  planout.PoolCells,
		"moneyLines": planout.MoneyLines,
		// computingCurve says that the view's simulator curve is still
		// being computed.
		"computingCurve": func(v *app.View) bool { return v.IsComputing(app.ComputingCurve) },
	}
	// The advice on running pods and start-ups, as report and diagnose
	// --running word it.
	funcs["running"] = func(r *usage.Report) usage.Running { return r.Running() }
	funcs["counts"] = adviceout.Counts
	funcs["evidence"] = func(b usage.Bottleneck) string { return adviceout.Evidence(&b) }
	funcs["change"] = func(b usage.Bottleneck) string { return adviceout.Change(&b) }
	funcs["field"] = adviceout.Field
	funcs["startupFix"] = func(f usage.StartupFix) string { return adviceout.StartupFix(&f) }
	funcs["reclaimSummary"] = app.Summary
	funcs["reclaimGPUs"] = reclaim.Candidate.GPUs
	funcs["reclaimApproval"] = reclaimApproval
	funcs["lastActive"] = func(t *time.Time) string {
		if t == nil {
			return "not in the window"
		}
		return t.UTC().Format("2006-01-02 15:04 MST")
	}
	funcs["perDay"] = func(c *float64) string {
		if c == nil {
			return "cost unknown"
		}
		return strconv.FormatFloat(*c, 'f', 2, 64) + " a day"
	}
	funcs["moneyP"] = func(c *float64) string {
		if c == nil {
			return "unknown"
		}
		return strconv.FormatFloat(*c, 'f', 2, 64)
	}
	funcs["rawP"] = func(c *float64) string {
		if c == nil {
			return ""
		}
		return strconv.FormatFloat(*c, 'g', -1, 64)
	}
	// healthRead tells a view that read GPU health and found no XID
	// (empty) from one that did not read it (nil).
	funcs["healthRead"] = func(hs []planout.GPUHealth) bool { return hs != nil }
	return &page{tmpl: template.Must(template.New("index").Funcs(funcs).Parse(indexTemplate))}
}

// pageData is what the template shows: the view and the charts drawn from it.
type pageData struct {
	V        *app.View
	Waiting  string // why there is no view yet
	Currency string
	Cluster  *usage.ClusterUsage
	Charts   []*chart
	Startup  *chart
	Curve    *chart
	// Changes is the apply controller's status; nil when none runs.
	Changes *app.ChangeStatus
	// Reclaims is the reclaim controller's status; nil when none runs.
	Reclaims *app.ReclaimStatus
}

func (p *page) serve(w http.ResponseWriter, o Options) {
	prov := o.Provider
	d := pageData{V: prov.View()}
	if o.Changes != nil {
		d.Changes = o.Changes()
	}
	if o.Reclaims != nil {
		d.Reclaims = o.Reclaims()
	}
	if d.V == nil {
		d.Waiting = notReady(prov)
	} else {
		if r := d.V.Report; r != nil {
			d.Currency = r.Currency
			d.Cluster = &r.Cluster
			d.Startup = startupChart(r)
		}
		d.Charts = hourCharts(d.V.Hours, d.Currency)
		d.Curve = curveChart(d.V.Curve, d.V.Bounds)
	}
	var b bytes.Buffer
	if err := p.tmpl.Execute(&b, d); err != nil {
		writeError(w, http.StatusInternalServerError, "rendering the dashboard: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

// hourCharts draws GPU-hours allocated, active and the capacity per hour,
// and the idle cost per hour; none without hours.
func hourCharts(hours []app.Hour, currency string) []*chart {
	if len(hours) == 0 {
		return nil
	}
	gpuH := newChart("chart-hours", "Fleet GPU-hours per hour: allocated vs active", "hour (UTC)", "GPU-hours")
	cost := newChart("chart-idle-cost", "Idle cost per hour (allocated, not active)", "hour (UTC)", currency)
	top, costTop := 0.0, 0.0
	for _, h := range hours {
		for _, a := range []usage.Amount{h.CapacityGPUSeconds, h.AllocatedGPUSeconds, h.ActiveGPUSeconds} {
			if a.Known() {
				top = max(top, a.Value()/3600)
			}
		}
		if h.IdleCost.Known() {
			costTop = max(costTop, h.IdleCost.Value())
		}
	}
	n := float64(len(hours))
	slot := (gpuH.Right - gpuH.Left) / n
	x := axis{lo: -0.5, hi: n - 0.5, from: gpuH.Left, to: gpuH.Right}
	y := gpuH.yAxis(top, func(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) })
	cy := cost.yAxis(costTop, func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) })
	gpuH.XTicks = hourTicks(hours, x)
	cost.XTicks = gpuH.XTicks
	line := func(name string, get func(app.Hour) usage.Amount) []xy {
		pts := make([]xy, len(hours))
		for i, h := range hours {
			a := get(h)
			pts[i] = xy{X: float64(i), Y: a.Value() / 3600, Known: a.Known(),
				Title: fmt.Sprintf("%s %s: %s GPU-hours", h.Start.UTC().Format("Jan 2 15:04"), name, amountHours(a))}
		}
		return pts
	}
	gpuH.addLine("capacity", "s-capacity", line("capacity", func(h app.Hour) usage.Amount { return h.CapacityGPUSeconds }), x, y)
	gpuH.addLine("allocated", "s-allocated", line("allocated", func(h app.Hour) usage.Amount { return h.AllocatedGPUSeconds }), x, y)
	gpuH.addLine("active", "s-active", line("active", func(h app.Hour) usage.Amount { return h.ActiveGPUSeconds }), x, y)
	pts := make([]xy, len(hours))
	for i, h := range hours {
		pts[i] = xy{X: float64(i), Y: h.IdleCost.Value(), Known: h.IdleCost.Known(),
			Title: fmt.Sprintf("%s idle cost: %s %s", h.Start.UTC().Format("Jan 2 15:04"), money(h.IdleCost), currency)}
	}
	cost.addBars("idle cost", "s-idle", pts, x, cy, slot)
	return []*chart{gpuH, cost}
}

// tickHours are the spacings, in hours, that hourTicks chooses from.
var tickHours = []int{1, 2, 3, 6, 12, 24, 48, 96, 168, 336, 672}

// hourTicks marks the boundaries of the hours (x: hour i at i) at the
// smallest spacing of tickHours that gives at most eight marks: midnights
// labelled with the date ("Mon Jan 5") from a spacing of a day, whole
// hours ("06:00", the date added at midnight and on the first mark) below
// it, so that the ticks read forward in time and say which day is which.
func hourTicks(hours []app.Hour, x axis) []tick {
	step := tickHours[len(tickHours)-1]
	for _, s := range tickHours {
		if len(hours)/s <= 8 {
			step = s
			break
		}
	}
	var out []tick
	for i, h := range hours {
		t := h.Start.UTC()
		if t.Minute() != 0 || t.Second() != 0 {
			continue
		}
		var label string
		switch {
		case step >= 24:
			if t.Hour() != 0 || (t.Unix()/86400)%int64(step/24) != 0 {
				continue
			}
			label = t.Format("Mon Jan 2")
		case t.Hour()%step != 0:
			continue
		case t.Hour() == 0 || len(out) == 0:
			label = t.Format("Jan 2 15:04")
		default:
			label = t.Format("15:04")
		}
		out = append(out, tick{Pos: x.at(float64(i) - 0.5), Label: label})
	}
	return out
}

// startupChart draws each workload's start-up as stacked horizontal bars,
// the p50 of each phase over its pods that started in the window, one
// series per phase (usage.Phases, in order); workloads with no known phase
// are left out.
func startupChart(r *usage.Report) *chart {
	var rows []usage.StartupGroup
	longest := 0.0
	for _, g := range r.Startup.Workloads {
		total, known := 0.0, false
		for _, ph := range g.Phases {
			if a := ph.Seconds.P50; a.Known() {
				total += a.Value()
				known = true
			}
		}
		if known {
			rows = append(rows, g)
			longest = max(longest, total)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	const rowH = 22
	c := &chart{ID: "chart-startup", Title: "Start-up phases per workload (p50 of its pods)", XLabel: "seconds", Width: 720, Left: 240, Top: 8, Right: 704}
	c.Bottom = c.Top + float64(len(rows))*rowH
	c.Height = c.Bottom + 44
	top := niceMax(longest)
	x := axis{lo: 0, hi: top, from: c.Left, to: c.Right}
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		c.XTicks = append(c.XTicks, tick{Pos: x.at(v), Label: strconv.FormatFloat(v, 'g', 4, 64)})
	}
	for i, g := range rows {
		c.YTicks = append(c.YTicks, tick{Pos: c.Top + float64(i)*rowH + rowH/2, Label: g.Key})
	}
	offset := make([]float64, len(rows))
	for k, name := range usage.Phases {
		s := series{Name: name, Class: fmt.Sprintf("s-phase%d", k), Bars: true}
		for i, g := range rows {
			a := g.Phases[k].Seconds.P50
			if !a.Known() {
				continue
			}
			s.Points = append(s.Points, mark{X: x.at(offset[i]), Y: c.Top + float64(i)*rowH + 3, W: x.at(offset[i]+a.Value()) - x.at(offset[i]), H: rowH - 6,
				Title: fmt.Sprintf("%s %s: %s (p50 of %d pods)", g.Key, name, duration(a), g.Phases[k].Pods)})
			offset[i] += a.Value()
		}
		c.Series = append(c.Series, s)
	}
	return c
}

// curveChart draws the simulator's allocation against arrived demand, one
// line per policy, and where the view has them the place-if-fits cap and
// the hindsight packing as levels. Below the band where they end the
// policies allocate all that arrives and their lines coincide, so the chart
// shows only the band (zoom): from the lowest level that any of them ends
// at, less a margin, to the highest, and from the demand at which every
// policy has reached that low (their allocation never falls as demand
// grows) to the last.
func curveChart(runs []app.CurveRun, bounds *sim.Bounds) *chart {
	if len(runs) == 0 {
		return nil
	}
	c := newChart("chart-curve", "Simulator: GPU allocation against arrived GPU demand, zoomed to where the policies differ", "arrived GPU demand (share of capacity)", "GPU allocated (share of capacity)")
	var levels []float64
	if bounds != nil {
		if h := bounds.Hindsight; h != nil {
			levels = append(levels, h.GPUAllocRatio)
		}
		if cp := bounds.PlaceIfFitsCap; cp != nil {
			levels = append(levels, cp.Ratio)
		}
	}
	band := curveBand(runs, levels)
	x := axis{lo: band.xLo, hi: band.xHi, from: c.Left, to: c.Right}
	y := axis{lo: band.yLo, hi: band.yHi, from: c.Bottom, to: c.Top}
	xs, xStep := niceTicks(band.xLo, band.xHi)
	for _, v := range xs {
		c.XTicks = append(c.XTicks, tick{Pos: x.at(v), Label: percentTick(v, xStep)})
	}
	ys, yStep := niceTicks(band.yLo, band.yHi)
	for _, v := range ys {
		c.YTicks = append(c.YTicks, tick{Pos: y.at(v), Label: percentTick(v, yStep)})
	}
	for i, r := range runs {
		var pts []xy
		for _, p := range r.Points {
			if p.ArrivedRatio < band.xLo {
				continue
			}
			pts = append(pts, xy{X: p.ArrivedRatio, Y: p.AllocRatio, Known: true,
				Title: fmt.Sprintf("%s: %s allocated at %s arrived", r.Policy, percent(p.AllocRatio), percent(p.ArrivedRatio))})
		}
		c.addLine(r.Policy, fmt.Sprintf("s-policy%d", i%6), pts, x, y)
	}
	level := func(name, class string, v float64, what string) {
		title := fmt.Sprintf("%s: %s (%s)", name, percent(v), what)
		c.addLine(name, class, []xy{{X: band.xLo, Y: v, Known: true, Title: title}, {X: band.xHi, Y: v, Known: true, Title: title}}, x, y)
	}
	if bounds != nil {
		if h := bounds.Hindsight; h != nil {
			level("hindsight packing", "s-offline", h.GPUAllocRatio, "the same arrivals packed with hindsight by a search: a lower estimate of the offline optimum, which a policy may beat")
		}
		if cp := bounds.PlaceIfFitsCap; cp != nil {
			level("place-if-fits cap", "s-bound", cp.Ratio, "the most any policy that places each pod that fits can allocate, while CPU and memory stop no share")
		}
	}
	return c
}

// band is the part of a chart's data space that it shows.
type band struct{ xLo, xHi, yLo, yHi float64 }

// curveBand is the band curveChart shows: y from the lowest end of the
// runs and levels to the highest, widened by a quarter of that span (at
// least a point) on each side and rounded out to niceTicks' step, and x
// from the first arrived demand at which every run has reached the
// band's low to the largest arrived demand.
func curveBand(runs []app.CurveRun, levels []float64) band {
	lo, hi, xHi := math.Inf(1), math.Inf(-1), 0.0
	for _, r := range runs {
		if n := len(r.Points); n > 0 {
			lo, hi = min(lo, r.Points[n-1].AllocRatio), max(hi, r.Points[n-1].AllocRatio)
		}
		for _, p := range r.Points {
			hi, xHi = max(hi, p.AllocRatio), max(xHi, p.ArrivedRatio)
		}
	}
	for _, l := range levels {
		lo, hi = min(lo, l), max(hi, l)
	}
	if math.IsInf(lo, 0) {
		return band{xLo: 0, xHi: max(xHi, 1), yLo: 0, yHi: 1}
	}
	pad := max((hi-lo)/4, 0.01)
	step := tickStep(hi - lo + 2*pad)
	b := band{yLo: max(0, math.Floor((lo-pad)/step)*step), yHi: math.Ceil((hi+pad)/step) * step, xHi: xHi}
	for _, r := range runs {
		reached := xHi
		for _, p := range r.Points {
			if p.AllocRatio >= b.yLo {
				reached = p.ArrivedRatio
				break
			}
		}
		b.xLo = max(b.xLo, reached)
	}
	if b.xLo >= b.xHi {
		b.xLo = 0
	}
	return b
}

// tickStep is the step of 1, 2 or 5 times a power of ten that cuts span
// into at most six parts.
func tickStep(span float64) float64 {
	if span <= 0 || math.IsNaN(span) || math.IsInf(span, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(span/6)))
	for _, m := range []float64{1, 2, 5, 10} {
		if span/(m*p) <= 6+1e-9 {
			return m * p
		}
	}
	return 10 * p
}

// niceTicks are the multiples of step = tickStep(hi-lo) from lo to hi,
// and step.
func niceTicks(lo, hi float64) ([]float64, float64) {
	step := tickStep(hi - lo)
	var out []float64
	for k := math.Ceil(lo/step - 1e-9); k*step <= hi+1e-9; k++ {
		out = append(out, k*step+0) // +0 makes -0 (k = -0) a plain 0
	}
	return out, step
}

// reclaimApproval says who approved a candidate as Reclaim decides it,
// or what to do.
func reclaimApproval(c reclaim.Candidate, approvals map[string]string) string {
	if by, ok := app.ApprovalOf(c, approvals); ok {
		return "approved by " + by
	}
	return "awaiting approval: add the key " + c.ID + " to the approvals ConfigMap"
}

func amountHours(a usage.Amount) string {
	if !a.Known() {
		return "unknown"
	}
	return strconv.FormatFloat(a.Value()/3600, 'f', 1, 64)
}

func money(a usage.Amount) string { return a.Fixed(1, 2, "") }

// perActiveHour is the cost per active GPU-hour, or "no active hour" where
// activity was measured and was none: the figure has no value then, which
// "unknown" would misstate.
func perActiveHour(t usage.Totals) string {
	if t.NoActiveHour() {
		return "no active hour"
	}
	return money(t.CostPerActiveGPUHour)
}

func ratio(a usage.Amount) string { return a.Fixed(100, 1, "%") }

// raw is an Amount for sorting: its value, or empty when unknown (sorted
// last).
func raw(a usage.Amount) string {
	if !a.Known() {
		return ""
	}
	return strconv.FormatFloat(a.Value(), 'g', -1, 64)
}

// duration words seconds as 45s, 3m20s or 2h05m.
func duration(a usage.Amount) string {
	if !a.Known() {
		return "unknown"
	}
	d := time.Duration(a.Value() * float64(time.Second)).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}
