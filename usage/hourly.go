package usage

import (
	"maps"
	"slices"
	"time"
)

// hourMs is an hour in milliseconds.
const hourMs = int64(time.Hour / time.Millisecond)

// hourLevels are a GPU model's allocated, activity-known and active
// GPU-seconds in each hour of the window (the bucket path first keeps them
// in share-steps, see BucketAccount).
type hourLevels struct{ alloc, known, active []float64 }

func newHourLevels(hours int) *hourLevels {
	return &hourLevels{alloc: make([]float64, hours), known: make([]float64, hours), active: make([]float64, hours)}
}

func (l *hourLevels) add(h int, allocated, known, active float64) {
	l.alloc[h] += allocated
	l.known[h] += known
	l.active[h] += active
}

// addScaled adds the levels of o times scale.
func (l *hourLevels) addScaled(o *hourLevels, scale float64) {
	for h := range o.alloc {
		l.add(h, o.alloc[h]*scale, o.known[h]*scale, o.active[h]*scale)
	}
}

// modelLevels are the hour levels per GPU model name.
type modelLevels map[string]*hourLevels

func (m modelLevels) of(model string, hours int) *hourLevels {
	l := m[model]
	if l == nil {
		l = newHourLevels(hours)
		m[model] = l
	}
	return l
}

// levelModel is the name a device's levels are kept under: the
// catalogue's name of its model where the catalogue knows it (the name
// plan's pools carry), else the name DCGM gave.
func levelModel(p Pricing, d Device) string {
	if m := p.model(d); m != nil {
		return m.Name
	}
	if d.Model == "" {
		return "unknown"
	}
	return d.Model
}

// hoursOf is the number of hours the window [start, end) spans, a last
// partial hour included.
func hoursOf(start, end time.Time) int { return windowHours(end.Sub(start)) }

// modelHours gives the levels in GPUs, models sorted by name: each hour's
// GPU-seconds over the hour's seconds (the last hour of the window may be
// shorter).
func (m modelLevels) modelHours(start, end time.Time) []ModelHours {
	var out []ModelHours
	for _, name := range slices.Sorted(maps.Keys(m)) {
		l := m[name]
		mh := ModelHours{Model: name}
		for h := range l.alloc {
			hourStart := start.Add(time.Duration(h) * time.Hour)
			hourEnd := hourStart.Add(time.Hour)
			if hourEnd.After(end) {
				hourEnd = end
			}
			sec := hourEnd.Sub(hourStart).Seconds()
			alloc, known, active := l.alloc[h]/sec, l.known[h]/sec, l.active[h]/sec
			mh.AllocatedGPUs = append(mh.AllocatedGPUs, round4(alloc))
			mh.ActiveGPUs = append(mh.ActiveGPUs, round4(active))
			mh.IdleGPUs = append(mh.IdleGPUs, round4(known-active))
			mh.ActivityUnknownGPUs = append(mh.ActivityUnknownGPUs, round4(alloc-known))
		}
		out = append(out, mh)
	}
	return out
}

// podHours are a pod's activity-known and active GPU-seconds in each hour
// from its first hour with any.
type podHours struct {
	first         int
	known, active []float64
}

func (p *podHours) add(h int, known, active float64) {
	switch {
	case len(p.known) == 0:
		p.first = h
	case h < p.first:
		grow := p.first - h
		p.known = append(make([]float64, grow, grow+len(p.known)), p.known...)
		p.active = append(make([]float64, grow, grow+len(p.active)), p.active...)
		p.first = h
	}
	i := h - p.first
	for i >= len(p.known) {
		p.known = append(p.known, 0)
		p.active = append(p.active, 0)
	}
	p.known[i] += known
	p.active[i] += active
}

// activity is the pod's mean activity in each of its hours, from the first
// with a known activity to the last, 4 decimals, 0 in an hour without any;
// nil if none had one.
func (p *podHours) activity() (hourly []float64, first int) {
	lo, hi := -1, -1
	for i, k := range p.known {
		if k > 0 {
			if lo < 0 {
				lo = i
			}
			hi = i
		}
	}
	if lo < 0 {
		return nil, 0
	}
	hourly = make([]float64, 0, hi-lo+1)
	for i := lo; i <= hi; i++ {
		a := 0.0
		if p.known[i] > 0 {
			a = round4(min(max(p.active[i]/p.known[i], 0), 1))
		}
		hourly = append(hourly, a)
	}
	return hourly, p.first + lo
}
