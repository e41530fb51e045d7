package usage

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gpupack/gpupack/gpu"
)

// randomWorld makes the DCGM series of a random cluster over a window of
// about 60 steps of 10 s (the last one partial): random nodes of random
// models (one the catalogue does not know, so unpriced), whole GPUs and MIG
// layouts that leave slices uninstantiated, pods arriving and leaving,
// several pods time-slicing a device, devices without activity metrics,
// missing samples and NaN. It returns the series and the number of
// physical GPUs.
func randomWorld(rng *rand.Rand, w Window) ([]Series, int) {
	cat := gpu.Default()
	models := []string{"H100-80GB", "A100-80GB", "L40S", ""}
	slots := w.Slots()
	stepMs := w.Step.Milliseconds()
	var out []Series
	gpus := 0
	for n := range 1 + rng.IntN(4) {
		node := fmt.Sprintf("node-%d", n)
		product := "Mystery GPU"
		var mig *gpu.MIGGeometry
		if name := models[rng.IntN(len(models))]; name != "" {
			m := cat.MustLookup(name)
			product, mig = m.Product, m.MIG
		}
		for g := range 1 + rng.IntN(4) {
			gpus++
			base := Device{Node: node, GPU: fmt.Sprint(g), UUID: fmt.Sprintf("GPU-%d-%d", n, g), Model: product}
			devices := []Device{base}
			if mig != nil && rng.IntN(2) == 0 {
				devices = devices[:0]
				free := mig.ComputeSlices
				for len(devices) == 0 || rng.IntN(4) > 0 {
					p := mig.Profiles[rng.IntN(len(mig.Profiles))]
					if p.Compute > free {
						break
					}
					free -= p.Compute
					d := base
					d.MIGProfile, d.MIGInstance = p.Name, fmt.Sprint(len(devices)+1)
					devices = append(devices, d)
				}
			}
			for _, d := range devices {
				// Up to three pods, each holding the device over [from, to).
				type holder struct {
					owner    Owner
					from, to int
				}
				var holders []holder
				for range rng.IntN(4) {
					from := rng.IntN(slots)
					holders = append(holders, holder{
						owner: Owner{Namespace: fmt.Sprintf("ns-%d", rng.IntN(3)), Pod: fmt.Sprintf("%s-pod-%d", node, rng.IntN(5)), Container: fmt.Sprintf("c%d", rng.IntN(2))},
						from:  from, to: from + 1 + rng.IntN(slots-from),
					})
				}
				metrics := []string{FBUsed}
				if rng.IntN(5) > 0 {
					metrics = append(metrics, ActivitySources[rng.IntN(len(ActivitySources))])
				}
				index := map[string]int{}
				for k := range slots {
					if rng.IntN(10) == 0 {
						continue // the scrape missed this step
					}
					owners := []Owner{{}}
					for _, h := range holders {
						if k >= h.from && k < h.to {
							if owners[0].IsZero() {
								owners = owners[:0]
							}
							owners = append(owners, h.owner)
						}
					}
					for _, m := range metrics {
						for _, o := range owners {
							v := rng.Float64()
							switch {
							case m == GPUUtil:
								v *= 100
							case m == FBUsed:
								v *= 40000
							}
							if rng.IntN(20) == 0 {
								v = math.NaN()
							}
							key := m + "|" + o.PodKey() + "|" + o.Container
							i, ok := index[key]
							if !ok {
								i = len(out)
								index[key] = i
								out = append(out, Series{Metric: m, Device: d, Owner: o})
							}
							out[i].Samples = append(out[i].Samples, Sample{TimeMs: w.Start.UnixMilli() + int64(k)*stepMs, Value: v})
						}
					}
				}
			}
		}
	}
	return out, gpus
}

// TestTotalsAddUp checks, for random clusters, that the report's totals add
// up at every level: allocated = active + idle + activity unknown for every
// device, container, pod, namespace, node and the cluster; capacity =
// allocated + unallocated + unsampled for every device, node and the
// cluster; each physical GPU's devices (the uninstantiated slices included)
// offer one GPU over the window; and every level sums to the cluster.
func TestTotalsAddUp(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 11))
		w := Window{Start: t0, End: t0.Add(600*time.Second + time.Duration(rng.IntN(10))*time.Second), Step: 10 * time.Second}
		series, gpus := randomWorld(rng, w)
		r, err := Account(Input{Window: w, Series: series, Pricing: Pricing{Catalogue: gpu.Default()}})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		windowSeconds := w.End.Sub(w.Start).Seconds()
		eps := 1e-9 * windowSeconds * float64(gpus)
		near := func(a, b float64) bool { return math.Abs(a-b) <= eps }
		fail := func(format string, args ...any) {
			t.Helper()
			t.Errorf("seed %d: "+format, append([]any{seed}, args...)...)
		}
		activity := func(level string, tt Totals) {
			t.Helper()
			alloc, unknown := float64(tt.AllocatedGPUSeconds), float64(tt.ActivityUnknownGPUSeconds)
			if !tt.ActiveGPUSeconds.Known() || !tt.IdleAllocatedGPUSeconds.Known() {
				if !near(unknown, alloc) {
					fail("%s: activity unknown, yet %v of %v allocated GPU-seconds are said to have activity", level, alloc-unknown, alloc)
				}
				return
			}
			if sum := tt.ActiveGPUSeconds.Value() + tt.IdleAllocatedGPUSeconds.Value() + unknown; !near(sum, alloc) {
				fail("%s: active %v + idle %v + unknown %v = %v, allocated %v", level, tt.ActiveGPUSeconds.Value(), tt.IdleAllocatedGPUSeconds.Value(), unknown, sum, alloc)
			}
			if tt.ActiveGPUSeconds.Value() < -eps || tt.IdleAllocatedGPUSeconds.Value() < -eps || unknown < -eps {
				fail("%s: negative figure in %+v", level, tt)
			}
		}
		capacity := func(level string, tt Totals, c Capacity) {
			t.Helper()
			sum := float64(tt.AllocatedGPUSeconds + c.UnallocatedGPUSeconds + c.UnsampledGPUSeconds)
			if !near(sum, float64(c.CapacityGPUSeconds)) {
				fail("%s: allocated %v + unallocated %v + unsampled %v = %v, capacity %v", level, tt.AllocatedGPUSeconds, c.UnallocatedGPUSeconds, c.UnsampledGPUSeconds, sum, c.CapacityGPUSeconds)
			}
		}
		type sums struct{ alloc, active, capacity, unalloc float64 }
		var devices, nodes, pods, namespaces, containers sums
		perGPU := map[string]float64{}
		for _, d := range r.Devices {
			level := "device " + d.Key()
			if d.Uninstantiated {
				level += " (uninstantiated)"
				if d.AllocatedGPUSeconds != 0 {
					fail("%s: allocated %v", level, d.AllocatedGPUSeconds)
				}
			}
			activity(level, d.Totals)
			capacity(level, d.Totals, d.Capacity)
			if !near(float64(d.CapacityGPUSeconds), d.Share*windowSeconds) {
				fail("%s: capacity %v, want share %v x %v s", level, d.CapacityGPUSeconds, d.Share, windowSeconds)
			}
			perGPU[d.Node+"/"+d.GPU] += float64(d.CapacityGPUSeconds)
			devices.alloc += float64(d.AllocatedGPUSeconds)
			devices.active += d.ActiveGPUSeconds.Value()
			devices.capacity += float64(d.CapacityGPUSeconds)
			devices.unalloc += float64(d.UnallocatedGPUSeconds)
		}
		if len(perGPU) != gpus {
			fail("%d physical GPUs in the report, %d in the cluster", len(perGPU), gpus)
		}
		for g, c := range perGPU {
			if !near(c, windowSeconds) {
				fail("GPU %s: its devices offer %v GPU-seconds, want one GPU over %v s", g, c, windowSeconds)
			}
		}
		for _, n := range r.Nodes {
			activity("node "+n.Name, n.Totals)
			capacity("node "+n.Name, n.Totals, n.Capacity)
			nodes.alloc += float64(n.AllocatedGPUSeconds)
			nodes.active += n.ActiveGPUSeconds.Value()
			nodes.capacity += float64(n.CapacityGPUSeconds)
			nodes.unalloc += float64(n.UnallocatedGPUSeconds)
		}
		for _, p := range r.Pods {
			activity("pod "+p.Key(), p.Totals)
			pods.alloc += float64(p.AllocatedGPUSeconds)
			pods.active += p.ActiveGPUSeconds.Value()
		}
		for _, ns := range r.Namespaces {
			activity("namespace "+ns.Name, ns.Totals)
			namespaces.alloc += float64(ns.AllocatedGPUSeconds)
			namespaces.active += ns.ActiveGPUSeconds.Value()
		}
		for _, c := range r.Containers {
			activity("container "+c.PodKey()+"/"+c.Container, c.Totals)
			containers.alloc += float64(c.AllocatedGPUSeconds)
			containers.active += c.ActiveGPUSeconds.Value()
		}
		c := r.Cluster
		activity("cluster", c.Totals)
		capacity("cluster", c.Totals, c.Capacity)
		if !near(float64(c.CapacityGPUSeconds), float64(gpus)*windowSeconds) {
			fail("cluster capacity %v, want %d GPUs x %v s", c.CapacityGPUSeconds, gpus, windowSeconds)
		}
		for level, s := range map[string]sums{"devices": devices, "nodes": nodes, "pods": pods, "namespaces": namespaces, "containers": containers} {
			if !near(s.alloc, float64(c.AllocatedGPUSeconds)) || !near(s.active, c.ActiveGPUSeconds.Value()) {
				fail("%s sum to allocated %v active %v, the cluster has %v and %v", level, s.alloc, s.active, c.AllocatedGPUSeconds, c.ActiveGPUSeconds.Value())
			}
			if (level == "devices" || level == "nodes") && (!near(s.capacity, float64(c.CapacityGPUSeconds)) || !near(s.unalloc, float64(c.UnallocatedGPUSeconds))) {
				fail("%s sum to capacity %v unallocated %v, the cluster has %v and %v", level, s.capacity, s.unalloc, c.CapacityGPUSeconds, c.UnallocatedGPUSeconds)
			}
		}
	}
}

// TestHourlyLevelsAddUp checks the GPUs per model and hour on random
// worlds over a few hours: every hour, allocated = active + idle +
// activity-unknown; summed over models and hours (times the hour's
// seconds) they give the cluster's GPU-seconds; every pod's hourly activity
// is a ratio within the window.
func TestHourlyLevelsAddUp(t *testing.T) {
	withLevels := 0
	for seed := range uint64(60) {
		rng := rand.New(rand.NewPCG(seed, 13))
		w := Window{Start: t0, End: t0.Add(3*time.Hour + time.Duration(rng.IntN(50))*time.Minute), Step: time.Minute}
		series, gpus := randomWorld(rng, w)
		r, err := Account(Input{Window: w, Series: series, Pricing: Pricing{Catalogue: gpu.Default()}})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		hours := int(math.Ceil(w.End.Sub(w.Start).Hours()))
		// Each hourly figure carries 4 decimals.
		eps := 3e-4 * float64(gpus)
		var alloc, active, unknown float64
		if len(r.Hourly) > 0 && r.Cluster.AllocatedGPUSeconds > 0 {
			withLevels++
		}
		for _, m := range r.Hourly {
			if len(m.AllocatedGPUs) != hours {
				t.Fatalf("seed %d: %s has %d hours, the window %d", seed, m.Model, len(m.AllocatedGPUs), hours)
			}
			for h := range hours {
				if sum := m.ActiveGPUs[h] + m.IdleGPUs[h] + m.ActivityUnknownGPUs[h]; math.Abs(sum-m.AllocatedGPUs[h]) > 3e-4 {
					t.Errorf("seed %d: %s hour %d: active %v + idle %v + unknown %v = %v, allocated %v", seed, m.Model, h, m.ActiveGPUs[h], m.IdleGPUs[h], m.ActivityUnknownGPUs[h], sum, m.AllocatedGPUs[h])
				}
				if m.AllocatedGPUs[h] > float64(gpus)+eps || m.IdleGPUs[h] < -3e-4 {
					t.Errorf("seed %d: %s hour %d: %v allocated, %v idle, of %d GPUs", seed, m.Model, h, m.AllocatedGPUs[h], m.IdleGPUs[h], gpus)
				}
				sec := min(w.End.Sub(w.Start.Add(time.Duration(h)*time.Hour)), time.Hour).Seconds()
				alloc += m.AllocatedGPUs[h] * sec
				active += m.ActiveGPUs[h] * sec
				unknown += m.ActivityUnknownGPUs[h] * sec
			}
		}
		near := func(what string, got, want float64) {
			if math.Abs(got-want) > eps*3600*float64(hours) {
				t.Errorf("seed %d: hourly %s GPU-seconds add up to %v, the cluster's are %v", seed, what, got, want)
			}
		}
		near("allocated", alloc, float64(r.Cluster.AllocatedGPUSeconds))
		near("activity-unknown", unknown, float64(r.Cluster.ActivityUnknownGPUSeconds))
		if r.Cluster.ActiveGPUSeconds.Known() {
			near("active", active, r.Cluster.ActiveGPUSeconds.Value())
		}
		for _, p := range r.Pods {
			if p.FirstHour < 0 || p.FirstHour+len(p.HourlyActivity) > hours {
				t.Errorf("seed %d: pod %s: hourly activity from hour %d for %d hours, the window has %d", seed, p.Key(), p.FirstHour, len(p.HourlyActivity), hours)
			}
			for _, a := range p.HourlyActivity {
				if a < 0 || a > 1 {
					t.Errorf("seed %d: pod %s: hourly activity %v", seed, p.Key(), a)
				}
			}
			if (p.HourlyActivity == nil) != (float64(p.ActivityUnknownGPUSeconds) == float64(p.AllocatedGPUSeconds)) {
				t.Errorf("seed %d: pod %s: hourly activity %v, yet %v of %v GPU-seconds had no activity", seed, p.Key(), p.HourlyActivity, p.ActivityUnknownGPUSeconds, p.AllocatedGPUSeconds)
			}
		}
	}
	if withLevels < 30 {
		t.Errorf("only %d of 60 worlds had hourly levels; the test checks too little", withLevels)
	}
}
