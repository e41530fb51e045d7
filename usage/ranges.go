package usage

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// MetricRange is the range that a DCGM metric's values lie in on a working
// GPU and exporter: the ratios (GR engine, SM and DRAM activity) 0..1, GPU
// utilisation 0..100 percent, framebuffer, power and the energy counter 0
// and up. A value outside it comes from a broken or forged exporter. The
// accounting clamps activity to 0..1 (so that no pod is more than fully
// active) and takes the other figures as they were reported; either way
// the report names every such value in its warnings (OutOfRangeWarnings).
func MetricRange(metric string) (lo, hi float64) {
	switch metric {
	case GREngineActive, SMActive, DRAMActive:
		return 0, 1
	case GPUUtil:
		return 0, 100
	}
	return 0, math.Inf(1)
}

// metricLo and metricHi are MetricRange by metric index.
var metricLo, metricHi = func() (lo, hi [nMetrics]float64) {
	for m, i := range metricIndex {
		lo[i], hi[i] = MetricRange(m)
	}
	return lo, hi
}()

// MetricValue is one value of a metric.
type MetricValue struct {
	Metric string  `json:"metric"`
	Value  float64 `json:"value"`
}

// rangeFinding is a metric of one device whose values left its range: the
// value furthest beyond it, the hour it was seen in, and the hours (by
// their start in Unix milliseconds) with such a value.
type rangeFinding struct {
	worst, beyond float64
	worstHour     time.Time
	hours         map[int64]bool
}

// outOfRange are a device's findings by metric.
type outOfRange map[string]*rangeFinding

// add notes a value v of metric outside its range, in the hour that
// starts at hour; a value inside it is ignored.
func (o *outOfRange) add(metric string, v float64, hour time.Time) {
	lo, hi := MetricRange(metric)
	beyond := max(lo-v, v-hi)
	if !(beyond > 0) {
		return
	}
	if *o == nil {
		*o = outOfRange{}
	}
	f := (*o)[metric]
	if f == nil {
		f = &rangeFinding{hours: map[int64]bool{}}
		(*o)[metric] = f
	}
	if beyond > f.beyond || (beyond == f.beyond && hour.Before(f.worstHour)) {
		f.worst, f.beyond, f.worstHour = v, beyond, hour
	}
	f.hours[hour.UnixMilli()] = true
}

// clone is a deep copy of o.
func (o outOfRange) clone() outOfRange {
	if o == nil {
		return nil
	}
	c := make(outOfRange, len(o))
	for m, f := range o {
		cf := *f
		cf.hours = make(map[int64]bool, len(f.hours))
		for h := range f.hours {
			cf.hours[h] = true
		}
		c[m] = &cf
	}
	return c
}

// OutOfRangeWarnings is the most devices' out-of-range metrics that a
// report names one by one; the rest are counted in one more warning.
const OutOfRangeWarnings = 20

// rangeWarnings collects the out-of-range findings of the devices as
// they are accounted, and writes them as warnings.
type rangeWarnings struct {
	lines []string
	more  int
}

// device adds the warnings of d's findings, by metric.
func (w *rangeWarnings) device(d Device, o outOfRange) {
	for _, m := range slices.Sorted(func(yield func(string) bool) {
		for m := range o {
			if !yield(m) {
				return
			}
		}
	}) {
		if len(w.lines) >= OutOfRangeWarnings {
			w.more++
			continue
		}
		f := o[m]
		lo, hi := MetricRange(m)
		what := fmt.Sprintf("%g..%g", lo, hi)
		if math.IsInf(hi, 1) {
			what = fmt.Sprintf("%g and up", lo)
		}
		treated := "taken as reported"
		if slices.Contains(ActivitySources, m) {
			treated = "clamped to its range as activity"
		}
		w.lines = append(w.lines, fmt.Sprintf("%s of %s was %g in the hour from %s, outside its range %s (in %d hour(s) of the window; %s): a broken exporter, or series of another job that --prometheus-selector should leave out",
			m, describeDevice(d), f.worst, f.worstHour.UTC().Format(time.RFC3339), what, len(f.hours), treated))
	}
}

// finish is the warnings: one per device and metric, and one that counts
// those left out.
func (w *rangeWarnings) finish() []string {
	if w.more > 0 {
		w.lines = append(w.lines, fmt.Sprintf("%d more devices' metrics were outside their range (the first %d are named above)", w.more, OutOfRangeWarnings))
	}
	return w.lines
}

// describeDevice names a device for a warning: its UUID, node, index and
// MIG instance.
func describeDevice(d Device) string {
	var b strings.Builder
	fmt.Fprintf(&b, "GPU %s on node %s (gpu %s", cmp.Or(d.UUID, "without UUID"), cmp.Or(d.Node, "unknown"), cmp.Or(d.GPU, "?"))
	if d.MIGInstance != "" {
		fmt.Fprintf(&b, ", MIG %s instance %s", d.MIGProfile, d.MIGInstance)
	}
	b.WriteString(")")
	return b.String()
}
