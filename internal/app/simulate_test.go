package app

import (
	"context"
	"io"
	"syscall"
	"testing"
)

// BenchmarkSimulateDefault is `gpupack simulate` with no flags (gpupack and
// fgd on openb default, seed 1, trace loading included), and with
// --bounds. CPU-s/op is the process's CPU time per run (the wall time on a
// shared machine waits for the cores); MiB-peak-rss is the process's peak,
// meaningful in its own process (run each sub-benchmark alone).
func BenchmarkSimulateDefault(b *testing.B) {
	for name, bounds := range map[string]bool{"defaults": false, "bounds": true} {
		b.Run(name, func(b *testing.B) {
			s := DefaultSimulation()
			s.Bounds = bounds
			b.ReportAllocs()
			before := rusage(b)
			for b.Loop() {
				if _, _, err := Simulate(context.Background(), s, io.Discard, nil); err != nil {
					b.Fatal(err)
				}
			}
			after := rusage(b)
			cpu := func(ru syscall.Rusage) float64 {
				return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
			}
			b.ReportMetric((cpu(after)-cpu(before))/float64(b.N), "CPU-s/op")
			b.ReportMetric(float64(after.Maxrss)/1024, "MiB-peak-rss")
		})
	}
}

func rusage(b *testing.B) syscall.Rusage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru
}
