package usage

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestQueueWaits(t *testing.T) {
	w := func(ns, shape, cause string, s float64) PodWait {
		return PodWait{Namespace: ns, Shape: shape, Cause: cause, Seconds: Known(s)}
	}
	unknown := PodWait{Namespace: "ml", Shape: "1 GPU", Cause: "insufficient"}
	pending := []PodWait{
		w("ml", "1 GPU", "insufficient", 10), w("ml", "1 GPU", "insufficient", 40),
		w("ml", "MIG 1g.10gb", "no-mig-profile", 30), w("web", "1 GPU", "insufficient", 20),
		unknown,
	}
	scheduled := []PodWait{w("web", "", "", 5), {Namespace: "web"}}
	got := QueueWaits(pending, true, scheduled)
	p := func(p50, p95, max float64) Percentiles { return Percentiles{Known(p50), Known(p95), Known(max)} }
	st := func(pods, unknown int, pc Percentiles) WaitStats {
		return WaitStats{Pods: pods, UnknownWait: unknown, Seconds: pc}
	}
	// Known pending waits 10, 20, 30, 40: nearest rank p50 is the 2nd
	// (ceil(0.5*4)), p95 the 4th (ceil(0.95*4)); the unknown one is
	// counted apart, not as 0.
	want := QueueWait{
		Pending: &WaitFace{
			All: st(5, 1, p(20, 40, 40)),
			ByNamespace: []WaitGroup{
				{"ml", st(4, 1, p(30, 40, 40))},
				{"web", st(1, 0, p(20, 20, 20))},
			},
			ByShape: []WaitGroup{
				{"1 GPU", st(4, 1, p(20, 40, 40))},
				{"MIG 1g.10gb", st(1, 0, p(30, 30, 30))},
			},
			ByCause: []WaitGroup{
				{"insufficient", st(4, 1, p(20, 40, 40))},
				{"no-mig-profile", st(1, 0, p(30, 30, 30))},
			},
		},
		Scheduled: WaitFace{
			All:         st(2, 1, p(5, 5, 5)),
			ByNamespace: []WaitGroup{{"web", st(2, 1, p(5, 5, 5))}},
			ByShape:     []WaitGroup{{UnknownGroup, st(2, 1, p(5, 5, 5))}},
		},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("QueueWaits (-want +got):\n%s", d)
	}
	if got := QueueWaits([]PodWait{unknown}, true, nil).Pending.All; got.Seconds.P50.Known() || got.UnknownWait != 1 {
		t.Errorf("only unknown waits: %+v, want unknown percentiles and 1 unknown wait", got)
	}
}

func TestQueueWaitsFoldsGroups(t *testing.T) {
	var waits []PodWait
	for i := range MaxWaitGroups + 5 {
		// Namespace ns00 has the most pods, so it keeps its name.
		for range max(1, 3-i) {
			waits = append(waits, PodWait{Namespace: fmt.Sprintf("ns%02d", i), Seconds: Known(float64(i))})
		}
	}
	got := QueueWaits(waits, true, nil).Pending.ByNamespace
	if len(got) != MaxWaitGroups {
		t.Fatalf("%d namespace groups, want the cap %d", len(got), MaxWaitGroups)
	}
	if got[0].Key != "ns00" || got[0].Pods != 3 {
		t.Errorf("first group %+v, want ns00 with 3 pods", got[0])
	}
	last := got[len(got)-1]
	// ns00..ns18 keep their names; ns19..ns24 (6 pods, waits 19..24) fold.
	want := WaitGroup{OtherGroup, WaitStats{Pods: 6, Seconds: Percentiles{Known(21), Known(24), Known(24)}}}
	if d := cmp.Diff(want, last); d != "" {
		t.Errorf("folded group (-want +got):\n%s", d)
	}
}

func TestScheduledWaits(t *testing.T) {
	at := func(h int) *time.Time { v := time.Date(2026, 1, 1, h, 0, 0, 0, time.UTC); return &v }
	r := &Report{Start: *at(10), End: *at(12), Pods: []PodUsage{
		{Namespace: "a", Pod: "before", Startup: Startup{Created: at(8), Scheduled: at(9), Phases: phaseTimes(t, PhaseTime{Phase: PhaseScheduling, Seconds: Known(3600)})}},
		{Namespace: "a", Pod: "in", Startup: Startup{Created: at(9), Scheduled: at(11), Phases: phaseTimes(t, PhaseTime{Phase: PhaseScheduling, Seconds: Known(7200)})}},
		{Namespace: "a", Pod: "untimed"},
	}}
	got := ScheduledWaits(r, map[string]string{"a/in": "1 GPU"})
	want := []PodWait{{Namespace: "a", Shape: "1 GPU", Seconds: Known(7200)}, {Namespace: "a"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ScheduledWaits (-want +got):\n%s", d)
	}
}

func TestQueueWaitsPendingUnknown(t *testing.T) {
	if got := QueueWaits(nil, false, nil); got.Pending != nil {
		t.Errorf("pending not known: Pending = %+v, want nil (absent, not 0 pods)", got.Pending)
	}
	if got := QueueWaits(nil, true, nil); got.Pending == nil || got.Pending.All.Pods != 0 {
		t.Errorf("none pending: Pending = %+v, want 0 pods", got.Pending)
	}
}
