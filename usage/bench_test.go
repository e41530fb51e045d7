package usage

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/util/mempolicy"
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

// BenchmarkBucketAccount1000GPUs30Days accounts the hourly buckets of
// 1,000 GPUs over 30 days (720 hours; each hour a device bucket and two
// owner buckets, as where an owner changes or two pods time-slice): the
// part of the hourly path that gpupack does, fed one bucket at a time as
// promsource.StreamBuckets does. Its heap after Report (the report and
// the spent account) and the process's peak RSS bound gpupack's memory
// for a month's report, whatever Prometheus takes.
func BenchmarkBucketAccount1000GPUs30Days(b *testing.B) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const gpus, hours = 1000, 720
	end := start.Add(hours * time.Hour)
	b.ReportAllocs()
	for b.Loop() {
		a, err := NewBucketAccount(start, end)
		if err != nil {
			b.Fatal(err)
		}
		a.Memory = mempolicy.OneShot // as report's
		var bk Bucket
		for h := range hours {
			for g := range gpus {
				d := Device{Node: fmt.Sprintf("node-%03d", g/8), GPU: fmt.Sprint(g % 8), UUID: fmt.Sprintf("GPU-%04d", g), Model: "NVIDIA H100 80GB HBM3"}
				bk = Bucket{Start: start.Add(time.Duration(h) * time.Hour), Length: time.Hour, Step: 30 * time.Second, Device: d,
					SampledSteps: 120, HeldSteps: 120, VRAMUsedMiB: Percentiles{P50: Known(1000), P95: Known(2000), Max: Known(3000)},
					PowerSum: 120 * 300, PowerSteps: 120, EnergyJoules: Known(3600 * 300), Samples: 960, Metrics: Metrics, ActivitySource: GREngineActive}
				if err := a.Add(&bk); err != nil {
					b.Fatal(err)
				}
				for o := range 2 {
					ob := Bucket{Start: bk.Start, Length: time.Hour, Step: 30 * time.Second, Device: d,
						Owner:     Owner{Namespace: fmt.Sprintf("ns-%d", g%20), Pod: fmt.Sprintf("pod-%d-%d-%d", g, h/8, o), Container: "main"},
						HeldSteps: 60, HeldShareSteps: 60, ActivityKnownShareSteps: 60, ActiveShareSteps: 30,
						Activity: ActivityStats{Samples: 60, Sum: 30, BelowIdle: 10, AtOrAboveBurst: 30, P95: 0.9}, ActivityP50: Known(0.5), ActivityMax: Known(1),
						VRAMUsedMiB: bk.VRAMUsedMiB, EnergyJoules: Known(1800 * 300), FirstHeld: bk.Start, FirstUse: bk.Start}
					if err := a.Add(&ob); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		r, err := a.Report(Pricing{Catalogue: gpu.Default()}, nil, nil, 0)
		if err != nil {
			b.Fatal(err)
		}
		// The process's peak: the sums, the report and the garbage
		// between GCs, all it took (the buckets are built one at a
		// time). Meaningful with -benchtime 1x in its own process.
		peak := func(unit string) {
			var ru syscall.Rusage
			if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
				b.ReportMetric(float64(ru.Maxrss)/1024, unit)
			}
		}
		peak("MiB-peak-rss-report")
		// Then the report's JSON, as report --format json writes it: the
		// command's whole peak.
		done := mempolicy.OneShot.Writing(len(r.Pods))
		if err := r.WriteJSON(io.Discard); err != nil {
			b.Fatal(err)
		}
		done()
		peak("MiB-peak-rss")
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "MiB-heap-after")
		runtime.KeepAlive(r)
		runtime.KeepAlive(a)
	}
}

// refreshWorld makes the buckets that serve holds for a window of hours
// complete hours of gpus GPUs (each hour a device bucket and two owner
// buckets, pods changing every 8 hours, as in
// BenchmarkBucketAccount1000GPUs30Days) and a partial hour of 30 minutes
// after them, at 30 s steps.
func refreshWorld(gpus, hours int) (start, cur, end time.Time, complete, partial []Bucket) {
	start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cur = start.Add(time.Duration(hours) * time.Hour)
	end = cur.Add(30 * time.Minute)
	devices := make([]Device, gpus)
	for g := range devices {
		devices[g] = Device{Node: fmt.Sprintf("node-%03d", g/8), GPU: fmt.Sprint(g % 8), UUID: fmt.Sprintf("GPU-%04d", g), Model: "NVIDIA H100 80GB HBM3"}
	}
	add := func(out []Bucket, h int, from time.Time, length time.Duration) []Bucket {
		steps := float64(length / (30 * time.Second))
		vram := Percentiles{P50: Known(1000), P95: Known(2000), Max: Known(3000)}
		for g, d := range devices {
			out = append(out, Bucket{Start: from, Length: length, Step: 30 * time.Second, Device: d,
				SampledSteps: steps, HeldSteps: steps, VRAMUsedMiB: vram,
				PowerSum: steps * 300, PowerSteps: steps, EnergyJoules: Known(steps * 30 * 300), Samples: 8 * steps, Metrics: Metrics, ActivitySource: GREngineActive})
			for o := range 2 {
				half := steps / 2
				out = append(out, Bucket{Start: from, Length: length, Step: 30 * time.Second, Device: d,
					Owner:     Owner{Namespace: fmt.Sprintf("ns-%d", g%20), Pod: fmt.Sprintf("pod-%d-%d-%d", g, h/8, o), Container: "main"},
					HeldSteps: half, HeldShareSteps: half, ActivityKnownShareSteps: half, ActiveShareSteps: half / 2,
					Activity: ActivityStats{Samples: half, Sum: half / 2, BelowIdle: half / 6, AtOrAboveBurst: half / 2, P95: 0.9}, ActivityP50: Known(0.5), ActivityMax: Known(1),
					VRAMUsedMiB: vram, EnergyJoules: Known(half * 30 * 300), FirstHeld: from, FirstUse: from})
			}
		}
		return out
	}
	complete = make([]Bucket, 0, 3*gpus*hours)
	for h := range hours {
		complete = add(complete, h, start.Add(time.Duration(h)*time.Hour), time.Hour)
	}
	partial = add(nil, hours, cur, end.Sub(cur))
	return start, cur, end, complete, partial
}

// BenchmarkRefreshAccount is the accounting of one serve refresh at 1,000
// GPUs over a 7-day window (168 complete hours and a partial one): full
// accounts every bucket of the window again (a refresh without the
// complete hours' account); incremental clones the complete hours'
// account, adds the partial hour and reports (serve at each refresh);
// reportOnly is the report alone, which every refresh makes (its pods'
// work: 42,000 pods in the window); completeHours builds the complete
// hours' account (serve once per hour, when an hour completes).
func BenchmarkRefreshAccount(b *testing.B) {
	start, cur, end, complete, partial := refreshWorld(1000, 168)
	pricing := Pricing{Catalogue: gpu.Default()}
	accountComplete := func(b *testing.B) *BucketAccount {
		a, err := NewBucketAccount(start, cur)
		if err != nil {
			b.Fatal(err)
		}
		addAll(b, a, complete)
		return a
	}
	b.Run("full", func(b *testing.B) {
		all := append(append([]Bucket(nil), complete...), partial...)
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			if _, err := AccountBuckets(BucketInput{Start: start, End: end, Buckets: all, Pricing: pricing}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("incremental", func(b *testing.B) {
		a := accountComplete(b)
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			c := mustClone(b, a, end)
			addAll(b, c, partial)
			if _, err := c.Report(pricing, nil, nil, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reportOnly", func(b *testing.B) {
		// Report spends its account: each is a copy, made outside the
		// time, the allocations and the CPU counted.
		a := accountComplete(b)
		b.ReportAllocs()
		var cpu time.Duration
		for b.Loop() {
			b.StopTimer()
			c := mustClone(b, a, end)
			addAll(b, c, partial)
			b.StartTimer()
			before := cpuTime(b)
			if _, err := c.Report(pricing, nil, nil, 0); err != nil {
				b.Fatal(err)
			}
			cpu += cpuTime(b) - before
		}
		b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	})
	b.Run("completeHours", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			accountComplete(b)
		}
	})
}

// reportCPU starts counting the CPU time of the process, user and system
// (the garbage collector's included); the function it returns reports it
// per iteration as cpu-s/op: serve's cost on a machine, which other work on
// a shared one inflates less than it does the wall clock.
func reportCPU(b *testing.B) func() {
	before := cpuTime(b)
	return func() { b.ReportMetric((cpuTime(b)-before).Seconds()/float64(b.N), "cpu-s/op") }
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
