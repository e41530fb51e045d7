package live

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/usage"
)

// hourOf makes an hour whose report has one pod holding alloc GPU-seconds
// and one node with unalloc free ones.
func hourOf(start time.Time, pod string, alloc, unalloc float64) *hour {
	r := &usage.Report{Start: start, End: start.Add(time.Hour), Currency: "EUR",
		Pods:  []usage.PodUsage{{Namespace: "ns", Pod: pod, Totals: usage.Totals{AllocatedGPUSeconds: usage.Seconds(alloc), ActiveGPUSeconds: usage.Known(alloc / 2), IdleAllocatedGPUSeconds: usage.Known(alloc / 2)}}},
		Nodes: []usage.NodeUsage{{GroupUsage: usage.GroupUsage{Name: "n"}, Capacity: usage.Capacity{UnallocatedGPUSeconds: usage.Seconds(unalloc)}}}}
	return &hour{start: start, end: start.Add(time.Hour), totals: hourTotals{c: fromReport(r)}}
}

// TestStoreCountersGrowAndStayBounded slides a 2-hour window over 100
// hours: the counters only grow, count every hour once, and the store
// keeps no more than the window's hours and the pods still named. The
// series served are one per namespace and workload, however many pods
// churn through a workload, and its counter keeps growing while its
// forgotten pods' values leave the store.
func TestStoreCountersGrowAndStayBounded(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	s := newStore(time.Hour, 2*time.Hour, false)
	workloads := map[podKey]string{{"ns", "steady"}: "web"}
	var last float64
	for k := 0; k < 100; k++ {
		start := t0.Add(time.Duration(k) * time.Hour)
		from := start.Add(-time.Hour) // the window is [start-1h, start+1h)
		s.slide(from, from.Add(-forgetAfter))
		// Each hour a pod of its own (churn), and "steady" every hour.
		s.hours[start] = hourOf(start, "steady", 3600, 100)
		churn := "churn-" + start.Format("15h02")
		s.hours[start].totals.c.add(hourOf(start, churn, 60, 0).totals.c)
		workloads[podKey{"ns", churn}] = "batch"
		// A partial hour that reads less the second time must not lower
		// the counter.
		s.partial = hourOf(start.Add(time.Hour), "steady", 1800, 0)
		s.counters(workloads)
		s.partial = hourOf(start.Add(time.Hour), "steady", 900, 0)
		c := s.counters(workloads)
		got := c.pods[podKey{"ns", "steady"}].allocated
		if got < last {
			t.Fatalf("hour %d: steady's counter went down from %v to %v", k, last, got)
		}
		last = got
		if want := float64(k+1)*3600 + 1800; got != want {
			t.Fatalf("hour %d: steady's counter %v, want %v (every complete hour once, plus the most the partial hour read)", k, got, want)
		}
		if n := len(s.hours); n > 2 {
			t.Fatalf("hour %d: %d hours kept, want at most the window's 2", k, n)
		}
		// Pods of hours that left the window more than forgetAfter ago are
		// forgotten: a bounded number of series.
		if n := len(c.pods); n > 6 {
			t.Fatalf("hour %d: %d pods counted; churn is not forgotten", k, n)
		}
		if n := len(c.groups); n != 2 {
			t.Fatalf("hour %d: %d series served, want one per workload (web, batch): %v", k, n, c.groups)
		}
		if got, want := c.groups[groupKey{"ns", "web", ""}].allocated, float64(k+1)*3600+1800; got != want {
			t.Fatalf("hour %d: web's counter %v, want steady's %v", k, got, want)
		}
		if got, want := c.groups[groupKey{"ns", "batch", ""}].allocated, float64(k+1)*60; got != want {
			t.Fatalf("hour %d: batch's counter %v, want every churning pod's 60 s once, %v", k, got, want)
		}
	}
	if got, want := s.counters(workloads).nodes["n"].unallocated, 100.0*100; got != want {
		t.Errorf("node counter %v, want %v", got, want)
	}
}

// bucketsOf makes the buckets of [start, start+length) at 30 s steps: two
// GPUs, each sampled and held by a pod of its own that changes every hour,
// with figures that differ by hour and GPU.
func bucketsOf(start time.Time, length time.Duration) []usage.Bucket {
	const step = 30 * time.Second
	steps := float64(length / step)
	var out []usage.Bucket
	for g := range 2 {
		d := usage.Device{Node: "n", GPU: fmt.Sprint(g), UUID: fmt.Sprintf("GPU-%d", g), Model: "NVIDIA H100 80GB HBM3"}
		level := float64(start.Hour()%5+g) / 5
		vram := usage.Percentiles{P50: usage.Known(1000 * level), P95: usage.Known(2000 * level), Max: usage.Known(3000 * level)}
		out = append(out,
			usage.Bucket{Start: start, Length: length, Step: step, Device: d, SampledSteps: steps, HeldSteps: steps, VRAMUsedMiB: vram,
				PowerSum: steps * 300 * level, PowerSteps: steps, EnergyJoules: usage.Known(steps * 30 * 300 * level), Samples: 3 * steps, ActivitySource: usage.GREngineActive},
			usage.Bucket{Start: start, Length: length, Step: step, Device: d, Owner: usage.Owner{Namespace: "ns", Pod: fmt.Sprintf("pod-%d-%d", g, start.Hour()), Container: "main"},
				HeldSteps: steps, HeldShareSteps: steps, ActivityKnownShareSteps: steps, ActiveShareSteps: steps * level,
				Activity: usage.ActivityStats{Samples: steps, Sum: steps * level, P95: level}, ActivityP50: usage.Known(level), ActivityMax: usage.Known(level),
				VRAMUsedMiB: vram, FirstHeld: start, FirstUse: start})
	}
	return out
}

// TestStoreAccountMatchesFull slides a 3-hour window over 8 hours, with two
// refreshes in each: the store's account of the window (its complete hours
// accounted once, the partial hour added to a copy) reports exactly what
// usage.AccountBuckets reports over every bucket of the window, and the
// complete hours are accounted again only when an hour completes.
func TestStoreAccountMatchesFull(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	pricing := usage.Pricing{Catalogue: gpu.Default()}
	s := newStore(time.Hour, 3*time.Hour, false)
	s.loadedTo = t0
	var last *usage.BucketAccount
	for k := 3; k <= 10; k++ {
		cur := t0.Add(time.Duration(k) * time.Hour)
		from := cur.Add(-3 * time.Hour)
		for refresh, partial := range []time.Duration{10 * time.Minute, 40 * time.Minute} {
			end := cur.Add(partial)
			s.slide(from, from.Add(-forgetAfter))
			for ; s.loadedTo.Before(cur); s.loadedTo = s.loadedTo.Add(time.Hour) {
				s.hours[s.loadedTo] = &hour{start: s.loadedTo, end: s.loadedTo.Add(time.Hour), buckets: bucketsOf(s.loadedTo, time.Hour)}
			}
			s.partial = &hour{start: cur, end: end, buckets: bucketsOf(cur, partial)}

			a, err := s.account(from, end)
			if err != nil {
				t.Fatalf("hour %d, refresh %d: %v", k, refresh, err)
			}
			got, err := a.Report(pricing, nil, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			var all []usage.Bucket
			for _, h := range s.sorted() {
				all = append(all, h.buckets...)
			}
			want, err := usage.AccountBuckets(usage.BucketInput{Start: from, End: end, Buckets: all, Pricing: pricing})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, cmpopts.EquateNaNs()); diff != "" {
				t.Fatalf("hour %d, refresh %d: the store's account differs from AccountBuckets over the window (-full +store):\n%s", k, refresh, diff)
			}
			if rebuilt := s.complete != last; rebuilt != (refresh == 0) {
				t.Errorf("hour %d, refresh %d: complete hours accounted again %v, want only at the hour's first refresh", k, refresh, rebuilt)
			}
			last = s.complete
		}
	}
}
