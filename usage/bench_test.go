package usage

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/gpupack/gpupack/gpu"
)

// BenchmarkAccount1000GPUsDay accounts 1,000 GPUs over 24 h at 30 s steps
// with five metrics (2,880 samples per series, 14.4 million in all).
func BenchmarkAccount1000GPUsDay(b *testing.B) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	w := Window{Start: start, End: start.Add(24 * time.Hour), Step: 30 * time.Second}
	slots := w.Slots()
	metrics := []string{GREngineActive, FBUsed, DRAMActive, PowerUsage, SMActive}
	var series []Series
	for g := 0; g < 1000; g++ {
		d := Device{Node: fmt.Sprintf("node-%03d", g/8), GPU: fmt.Sprint(g % 8), UUID: fmt.Sprintf("GPU-%04d", g), Model: "NVIDIA H100 80GB HBM3"}
		o := Owner{Namespace: fmt.Sprintf("ns-%d", g%20), Pod: fmt.Sprintf("pod-%d", g), Container: "main"}
		for mi, m := range metrics {
			s := Series{Metric: m, Device: d, Owner: o, Samples: make([]Sample, slots)}
			for k := range s.Samples {
				s.Samples[k] = Sample{TimeMs: start.UnixMilli() + int64(k)*30000, Value: 0.5 + 0.4*math.Sin(float64(k*(mi+1)+g))}
			}
			series = append(series, s)
		}
	}
	in := Input{Window: w, Series: series, Pricing: Pricing{Catalogue: gpu.Default()}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Account(in); err != nil {
			b.Fatal(err)
		}
	}
}
