package live

import (
	"testing"
	"time"

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
// keeps no more than the window's hours and the pods still named.
func TestStoreCountersGrowAndStayBounded(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	s := newStore(time.Hour, 2*time.Hour)
	var last float64
	for k := 0; k < 100; k++ {
		start := t0.Add(time.Duration(k) * time.Hour)
		from := start.Add(-time.Hour) // the window is [start-1h, start+1h)
		s.slide(from, from.Add(-forgetAfter))
		// Each hour a pod of its own (churn), and "steady" every hour.
		s.hours[start] = hourOf(start, "steady", 3600, 100)
		s.hours[start].totals.c.add(hourOf(start, "churn-"+start.Format("15h02"), 60, 0).totals.c)
		// A partial hour that reads less the second time must not lower
		// the counter.
		s.partial = hourOf(start.Add(time.Hour), "steady", 1800, 0)
		s.counters()
		s.partial = hourOf(start.Add(time.Hour), "steady", 900, 0)
		c := s.counters()
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
	}
	if got, want := s.counters().nodes["n"].unallocated, 100.0*100; got != want {
		t.Errorf("node counter %v, want %v", got, want)
	}
}
