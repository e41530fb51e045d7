package usage

import (
	"math/rand/v2"
	"testing"
)

// TestMeanActivityRange checks, for random activity samples, that the mean
// of every classified pod lies within its pattern's range, so that a usage
// file written from a measurement never contradicts itself.
func TestMeanActivityRange(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[PatternName]int{}
	for range 20000 {
		n := 1 + r.IntN(60)
		samples := make([]float64, n)
		level, spread := r.Float64(), r.Float64()
		for i := range samples {
			switch r.IntN(3) {
			case 0:
				samples[i] = 0
			case 1:
				samples[i] = min(1, level+spread*r.Float64())
			default:
				samples[i] = level * r.Float64() * 0.1
			}
		}
		var dram Amount
		if r.IntN(4) == 0 {
			dram = Known(r.Float64())
		}
		p := classify(activityStats(samples), dram, Percentiles{})
		lo, hi, ok := MeanActivityRange(p.Name)
		if !ok {
			t.Fatalf("no range for %s", p.Name)
		}
		if m := p.MeanActivity.Value(); m < lo-1e-4 || m > hi+1e-4 {
			t.Fatalf("%s with mean %v outside its range %v..%v (samples %v)", p.Name, m, lo, hi, samples)
		}
		seen[p.Name]++
	}
	for _, name := range []PatternName{IdleHeld, Busy, MemoryBound, Bursty, FlatLow, Moderate} {
		if seen[name] == 0 {
			t.Errorf("no random pod was %s; the test does not cover it", name)
		}
	}
	if _, _, ok := MeanActivityRange(UnknownPattern); ok {
		t.Errorf("unknown has a range")
	}
}
