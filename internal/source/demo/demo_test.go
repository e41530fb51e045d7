package demo

import (
	"math"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/usage"
)

// TestWorldIsConsistent checks that the snapshot and the scenario describe
// one cluster: every bound GPU pod of the snapshot is scripted on the same
// node, GPU and MIG slice within what it holds, every scripted pod is bound
// in the snapshot, and exactly the pending pods have creation times.
func TestWorldIsConsistent(t *testing.T) {
	c := gpu.Default()
	snap, err := cluster.ParseFile(Cluster(), ClusterName, c)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := Scenario(c)
	if err != nil {
		t.Fatal(err)
	}
	scripted := map[string]bool{}
	pods := map[string]*cluster.Pod{}
	for i := range snap.Pods {
		pods[snap.Pods[i].Key()] = snap.Pods[i]
	}
	for _, p := range sc.Pods {
		key := p.Namespace + "/" + p.Name
		scripted[key] = true
		sp := pods[key]
		if sp == nil || !sp.Bound() {
			t.Errorf("%s: scripted in %s but not bound in %s", key, ScenarioName, ClusterName)
			continue
		}
		if len(sp.Devices) != 1 {
			t.Errorf("%s holds %d devices in %s; the scenario scripts one", key, len(sp.Devices), ClusterName)
			continue
		}
		d := sp.Devices[0]
		slice := -1
		if p.Slice != nil {
			slice = *p.Slice
		}
		if sp.NodeName != p.Node || d.GPU != p.GPU || d.Slice != slice {
			t.Errorf("%s: %s has it on %s GPU %d slice %d, %s on %s GPU %d slice %d", key, ClusterName, sp.NodeName, d.GPU, d.Slice, ScenarioName, p.Node, p.GPU, slice)
		}
		if d.Memory > 0 && p.MemoryMiB > float64(d.Memory) {
			t.Errorf("%s uses %v MiB of VRAM in %s, more than the %d MiB it holds in %s", key, p.MemoryMiB, ScenarioName, d.Memory, ClusterName)
		}
	}
	var pending []string
	for _, p := range snap.Pods {
		if !p.Bound() {
			pending = append(pending, p.Key())
		} else if p.GPU.Kind != cluster.NoGPU && !scripted[p.Key()] {
			t.Errorf("%s is bound to GPUs in %s but has no usage in %s", p.Key(), ClusterName, ScenarioName)
		}
	}
	created, err := Created()
	if err != nil {
		t.Fatal(err)
	}
	var withTimes []string
	for k, at := range created {
		withTimes = append(withTimes, k)
		if !at.Before(End()) {
			t.Errorf("%s created at %s, not before the demo's end %s", k, at, End())
		}
	}
	sort.Strings(pending)
	sort.Strings(withTimes)
	if d := cmp.Diff(pending, withTimes); d != "" {
		t.Errorf("pending pods of %s vs those with creation times (-pending +times):\n%s", ClusterName, d)
	}
}

// TestMeasured checks that the usage facts are the week's accounting of
// every scripted pod, one hour of activity each, and name only pods of the
// snapshot.
func TestMeasured(t *testing.T) {
	m, err := Measure()
	if err != nil {
		t.Fatal(err)
	}
	if got := len(m.Hours); got != int(Window.Hours()) {
		t.Fatalf("%d hours accounted, want %d", got, int(Window.Hours()))
	}
	u := m.Facts
	snap, err := cluster.ParseFile(Cluster(), ClusterName, gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	if un := u.Unmatched(snap); len(un) > 0 {
		t.Errorf("usage names pods that are not in %s: %v", ClusterName, un)
	}
	sc, err := Scenario(gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range sc.Pods {
		key := p.Namespace + "/" + p.Name
		f, ok := u.Pods[key]
		if !ok || !f.Measured || len(f.HourlyActivity) == 0 || f.FirstHour+len(f.HourlyActivity) > len(m.Hours) {
			t.Errorf("%s: facts %+v, want it measured with activity within the %d hours", key, f, len(m.Hours))
			continue
		}
		// Each hour's activity is what that hour, accounted on its own,
		// gives the pod: active over activity-known GPU-seconds.
		for h, hr := range m.Hours {
			want := 0.0
			if pu, ok := hr.Pod(p.Namespace, p.Name); ok && pu.ActiveGPUSeconds.Known() && pu.AllocatedGPUSeconds > pu.ActivityUnknownGPUSeconds {
				want = pu.ActiveGPUSeconds.Value() / float64(pu.AllocatedGPUSeconds-pu.ActivityUnknownGPUSeconds)
			}
			got := 0.0
			if i := h - f.FirstHour; i >= 0 && i < len(f.HourlyActivity) {
				got = f.HourlyActivity[i]
			}
			if math.Abs(got-want) > 1e-4 {
				t.Errorf("%s: hour %d activity %v in the week's facts, %v in the hour's own accounting", key, h, got, want)
			}
		}
	}
	if u.Window != Window {
		t.Errorf("usage window %s, want %s", u.Window, Window)
	}
}

func BenchmarkMeasure(b *testing.B) {
	c := gpu.Default()
	for b.Loop() {
		week, err := Week(c)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Hours(c, week, week0Pricing(c)); err != nil {
			b.Fatal(err)
		}
	}
}

func week0Pricing(c *gpu.Catalogue) usage.Pricing { return usage.Pricing{Catalogue: c} }
