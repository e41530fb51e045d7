package usage

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/gpu"
)

// TestPermute: permute puts each element where the order says, for random
// orders including the identity and single cycles.
func TestPermute(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for n := range 40 {
		s := make([]string, n)
		for i := range s {
			s[i] = fmt.Sprint(i)
		}
		order := make([]int32, n)
		for i := range order {
			order[i] = int32(i)
		}
		rng.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
		want := make([]string, n)
		for i, k := range order {
			want[i] = s[k]
		}
		permute(s, order)
		if !slices.Equal(s, want) {
			t.Fatalf("permute by %v = %v, want %v", order, s, want)
		}
	}
}

// TestBucketReportPodsAreIndependent: the hourly path puts each pod into
// the report once its last device is accounted, from a state that an
// earlier pod may have used. Over random fleets (pods on one to three
// devices in any order of the devices' keys, one or two containers,
// DRA claims on some, names that order differently joined and apart),
// each pod is what a report of its buckets alone makes of it, and the
// pods, containers, namespaces and nodes are complete and in order.
func TestBucketReportPodsAreIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const hours = 6
	end := start.Add(hours * time.Hour)
	name := func() string {
		const chars = "ab-."
		b := []byte{'p'}
		for range rng.IntN(3) {
			b = append(b, chars[rng.IntN(len(chars))])
		}
		return string(b)
	}
	pricing := Pricing{Catalogue: gpu.Default()}
	for trial := range 30 {
		var devices []Device
		for n := range 1 + rng.IntN(3) {
			for g := range 1 + rng.IntN(4) {
				devices = append(devices, Device{Node: fmt.Sprintf("n%d", n), GPU: fmt.Sprint(g), UUID: fmt.Sprintf("GPU-%d-%d", n, g), Model: "NVIDIA H100 80GB HBM3"})
			}
		}
		var common []Bucket // the devices' own buckets
		for h := range hours {
			for _, d := range devices {
				common = append(common, Bucket{Start: start.Add(time.Duration(h) * time.Hour), Length: time.Hour, Step: 30 * time.Second, Device: d,
					SampledSteps: 120, HeldSteps: 120, Samples: 480, Metrics: Metrics, ActivitySource: GREngineActive,
					VRAMUsedMiB: Percentiles{P50: Known(1000), P95: Known(2000), Max: Known(3000)}, PowerSum: 120 * 300, PowerSteps: 120, EnergyJoules: Known(3600 * 300)})
			}
		}
		// Each device-hour goes to one pod or none, so that no two pods
		// share a GPU (sharing is the one thing that ties pods together).
		type pod struct {
			ns, name string
			claim    bool
		}
		var pods []pod
		seen := map[podRef]bool{}
		for len(pods) < 3+rng.IntN(12) {
			p := pod{ns: name(), name: name(), claim: rng.IntN(3) == 0}
			if !seen[podRef{p.ns, p.name}] {
				seen[podRef{p.ns, p.name}] = true
				pods = append(pods, p)
			}
		}
		owned := map[podRef][]Bucket{}
		for h := range hours {
			for di, d := range devices {
				if rng.IntN(4) == 0 {
					continue
				}
				p := pods[(h/2*7+di*3+rng.IntN(2))%len(pods)]
				container := "main"
				if di%2 == 1 && rng.IntN(2) == 0 {
					container = "side"
				}
				at := start.Add(time.Duration(h) * time.Hour)
				held := float64(30 + rng.IntN(90))
				b := Bucket{Start: at, Length: time.Hour, Step: 30 * time.Second, Device: d, Owner: Owner{p.ns, p.name, container},
					HeldSteps: held, HeldShareSteps: held, ActivityKnownShareSteps: held, ActiveShareSteps: held * rng.Float64(),
					Activity: ActivityStats{Samples: held, Sum: held / 2, BelowIdle: held / 4, AtOrAboveBurst: held / 4, P95: rng.Float64()}, ActivityP50: Known(rng.Float64()), ActivityMax: Known(1),
					VRAMUsedMiB: Percentiles{P50: Known(float64(rng.IntN(9000))), P95: Known(9000), Max: Known(float64(9000 + rng.IntN(1000)))},
					DRAMSum:     held * rng.Float64(), DRAMSteps: held, PowerSum: held * 250, PowerSteps: held,
					EnergyJoules: Known(held * 30 * 250), FirstHeld: at.Add(time.Duration(120-held) * 30 * time.Second), FirstUse: at.Add(time.Duration(120-held) * 30 * time.Second)}
				if p.claim {
					b.DRA = DRAHold{ClaimNamespace: p.ns, ClaimName: "claim-" + p.name, Driver: "gpu.nvidia.com", Pool: d.Node, Device: "gpu-" + d.GPU}
				}
				owned[podRef{p.ns, p.name}] = append(owned[podRef{p.ns, p.name}], b)
			}
		}
		// The fleet's buckets interleaved at random, each pod's in the
		// order of its report alone: a pod's sums then add up in the
		// same order, to the last bit.
		all := slices.Clone(common)
		lists := slices.Collect(maps.Values(owned))
		for len(lists) > 0 {
			i := rng.IntN(len(lists))
			all = append(all, lists[i][0])
			if lists[i] = lists[i][1:]; len(lists[i]) == 0 {
				lists = slices.Delete(lists, i, i+1)
			}
		}
		r, err := AccountBuckets(BucketInput{Start: start, End: end, Buckets: all, Pricing: pricing})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Pods) != len(owned) {
			t.Fatalf("trial %d: %d pods in the report, want %d", trial, len(r.Pods), len(owned))
		}
		if !slices.IsSortedFunc(r.Pods, func(a, b PodUsage) int { return strings.Compare(a.Key(), b.Key()) }) {
			t.Errorf("trial %d: pods not in the order of their keys", trial)
		}
		var wantContainers []Owner
		nsPods, nodePods := map[string]int{}, map[string]int{}
		for _, p := range r.Pods {
			nsPods[p.Namespace]++
			set := map[string]bool{}
			nodes := map[string]bool{}
			for _, b := range owned[podRef{p.Namespace, p.Pod}] {
				set[b.Owner.Container] = true
				nodes[b.Device.Node] = true
			}
			for _, c := range slices.Sorted(maps.Keys(set)) {
				wantContainers = append(wantContainers, Owner{p.Namespace, p.Pod, c})
			}
			for n := range nodes {
				nodePods[n]++
			}
			// The pod alone: the devices' buckets and its own.
			alone, err := AccountBuckets(BucketInput{Start: start, End: end, Buckets: append(slices.Clone(common), owned[podRef{p.Namespace, p.Pod}]...), Pricing: pricing})
			if err != nil {
				t.Fatal(err)
			}
			if d := gocmp.Diff(alone.Pods[0], p); d != "" {
				t.Errorf("trial %d: pod %s in the fleet's report differs from its report alone (-alone +fleet):\n%s", trial, p.Key(), d)
			}
		}
		var gotContainers []Owner
		for _, c := range r.Containers {
			gotContainers = append(gotContainers, c.Owner)
		}
		if d := gocmp.Diff(wantContainers, gotContainers); d != "" {
			t.Errorf("trial %d: containers (-want +got):\n%s", trial, d)
		}
		for _, n := range r.Namespaces {
			if n.Pods != nsPods[n.Name] {
				t.Errorf("trial %d: namespace %s has %d pods, want %d", trial, n.Name, n.Pods, nsPods[n.Name])
			}
		}
		for _, n := range r.Nodes {
			if n.Pods != nodePods[n.Name] {
				t.Errorf("trial %d: node %s has %d pods, want %d", trial, n.Name, n.Pods, nodePods[n.Name])
			}
		}
		if len(r.Namespaces) != len(nsPods) {
			t.Errorf("trial %d: %d namespaces, want %d", trial, len(r.Namespaces), len(nsPods))
		}
		if !slices.IsSortedFunc(r.Namespaces, func(a, b GroupUsage) int { return cmp.Compare(a.Name, b.Name) }) {
			t.Errorf("trial %d: namespaces not in order", trial)
		}
	}
}
