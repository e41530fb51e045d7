package diagnose

import (
	"fmt"
	"testing"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
	"github.com/gpupack/gpupack/usage"
)

// benchCluster builds nodes x 8 GPUs of four kinds (H100, A100, time-sliced
// L4, MIG H100), most GPUs held by one-GPU pods with usage facts, and
// pending pods of ten request shapes with ten CPU sizes.
func benchCluster(b *testing.B, nodes, pending int) (*cluster.Snapshot, *Usage) {
	c := gpu.Default()
	facts := &Usage{Window: 3600e9, Pods: map[string]PodFacts{}}
	var ns []*cluster.Node
	var pods []*cluster.Pod
	kinds := []struct {
		model   string
		sharing cluster.Sharing
		extra   func(*cluster.GPU)
	}{
		{"H100-80GB", cluster.Exclusive, nil},
		{"A100-80GB", cluster.Exclusive, nil},
		{"L4", cluster.TimeSliced, func(g *cluster.GPU) { g.Replicas = 4 }},
		{"H100-80GB", cluster.MIG, func(g *cluster.GPU) {
			g.Layout, _ = g.Model.MIG.Fit([]string{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"})
		}},
	}
	for i := 0; i < nodes; i++ {
		k := kinds[i%len(kinds)]
		m := c.MustLookup(k.model)
		n := &cluster.Node{Name: fmt.Sprintf("gpu-%d", i), CPU: 96000, Memory: gpu.GiB(1024),
			Labels: map[string]string{"nvidia.com/gpu.product": m.Name, "pool": []string{"train", "infer"}[i%2]}}
		if i%10 == 0 {
			n.Taints = []cluster.Taint{{Key: "team", Value: "vision", Effect: cluster.NoSchedule}}
		}
		for g := 0; g < 8; g++ {
			gp := cluster.GPU{Index: g, Model: m, Memory: m.Usable, Sharing: k.sharing}
			if k.extra != nil {
				k.extra(&gp)
			}
			n.GPUs = append(n.GPUs, gp)
		}
		ns = append(ns, n)
		held := 8 - i%3 // a third of the nodes full, the rest with a GPU or two free
		for g := 0; g < held; g++ {
			p := &cluster.Pod{Namespace: "ml", Name: fmt.Sprintf("run-%d-%d", i, g), CPU: 4000, NodeName: n.Name}
			switch k.sharing {
			case cluster.MIG:
				p.GPU = cluster.Request{Kind: cluster.MIGSlice, Profile: n.GPUs[0].Layout[g%4].Profile}
				if g >= 4 {
					continue
				}
				p.Devices = []cluster.Device{{GPU: 0, Slice: g}}
			default:
				p.GPU = cluster.Request{Kind: cluster.WholeGPUs, Count: 1}
				p.Devices = []cluster.Device{{GPU: g, Slice: -1}}
			}
			pods = append(pods, p)
			facts.Pods[p.Key()] = PodFacts{Measured: true, ActiveRatio: float64(g) / 10, Pattern: []Pattern{usage.IdleHeld, usage.Bursty, usage.FlatLow, usage.Busy}[g%4], VRAMUsedP95: gpu.GiB(float64(4 * g))}
		}
	}
	shapes := []func(p *cluster.Pod){
		func(p *cluster.Pod) { p.GPU = cluster.Request{Kind: cluster.WholeGPUs, Count: 1} },
		// Whole GPUs of the exclusive models: a time-sliced L4 node would
		// give 4 or 16 replicas of its GPUs, as the device plugin does.
		func(p *cluster.Pod) {
			p.GPU = cluster.Request{Kind: cluster.WholeGPUs, Count: 4}
			p.GPUModels = []string{"H100-80GB", "A100-80GB"}
		},
		func(p *cluster.Pod) {
			p.GPU = cluster.Request{Kind: cluster.WholeGPUs, Count: 16}
			p.GPUModels = []string{"H100-80GB", "A100-80GB"}
		},
		func(p *cluster.Pod) {
			p.GPU = cluster.Request{Kind: cluster.WholeGPUs, Count: 1}
			p.GPUModels = []string{"A100-40GB"}
		},
		func(p *cluster.Pod) {
			p.GPU = cluster.Request{Kind: cluster.WholeGPUs, Count: 1, Memory: gpu.GiB(60)}
			p.NodeSelector = map[string]string{"nvidia.com/gpu.product": "L4"}
		},
		func(p *cluster.Pod) { p.GPU = cluster.Request{Kind: cluster.MIGSlice, Profile: "3g.40gb"} },
		func(p *cluster.Pod) { p.GPU = cluster.Request{Kind: cluster.MIGSlice, Profile: "4g.40gb"} },
		func(p *cluster.Pod) { p.GPU = cluster.Request{Kind: cluster.Fraction, Milli: 250} },
		func(p *cluster.Pod) {
			p.GPU = cluster.Request{Kind: cluster.WholeGPUs, Count: 2}
			p.NodeSelector = map[string]string{"pool": "batch"}
		},
		func(p *cluster.Pod) { p.GPU = cluster.Request{Kind: cluster.GPUMemory, Memory: gpu.GiB(200)} },
	}
	for i := 0; i < pending; i++ {
		p := &cluster.Pod{Namespace: "ml", Name: fmt.Sprintf("wait-%d", i), CPU: gpu.CPUMilli(1000 * (1 + i/len(shapes)%10))}
		shapes[i%len(shapes)](p)
		pods = append(pods, p)
	}
	s, err := cluster.NewSnapshot(c, ns, pods)
	if err != nil {
		b.Fatal(err)
	}
	return s, facts
}

// BenchmarkDiagnose5000x8 diagnoses 2,000 pending pods on 5,000 nodes of
// 8 GPUs (target: under 2 s and 1 GiB).
func BenchmarkDiagnose5000x8(b *testing.B) {
	s, u := benchCluster(b, 5000, 2000)
	benchDiagnose(b, s, u, func(rep *Report) {
		causes := map[Cause]int{}
		for _, f := range rep.Findings {
			causes[f.Cause]++
		}
		if len(causes) < 4 {
			b.Fatalf("the benchmark exercises only %v", causes)
		}
	})
}

// benchDiagnose checks a first diagnosis of s with exercised, then
// measures Diagnose.
func benchDiagnose(b *testing.B, s *cluster.Snapshot, u *Usage, exercised func(*Report)) {
	rep, err := Diagnose(s, u)
	if err != nil {
		b.Fatal(err)
	}
	exercised(rep)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rep, err := Diagnose(s, u)
		if err != nil {
			b.Fatal(err)
		}
		if len(rep.Findings) != len(s.Pending()) {
			b.Fatalf("%d findings", len(rep.Findings))
		}
	}
}

// spreadCluster is benchCluster with the rules of replicated services:
// every node has a zone (ten of them) and a hostname, every bound pod an
// app label of twenty, a tenth of them required anti-affinity to their
// own app by hostname. The pending pods are replicas of a hundred
// workloads (benchCluster's shapes and CPU sizes), each with a zone spread
// constraint over its app (maxSkew 1 to 3); half of the workloads have
// anti-affinity to their app by hostname and a fifth affinity to another
// app by hostname.
func spreadCluster(b *testing.B, nodes, pending int) (*cluster.Snapshot, *Usage) {
	s, u := benchCluster(b, nodes, pending)
	for i, n := range s.Nodes {
		n.Labels["topology.kubernetes.io/zone"] = fmt.Sprintf("zone-%d", i%10)
		n.Labels["kubernetes.io/hostname"] = n.Name
	}
	app := func(i int) *cluster.LabelSelector {
		return &cluster.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("svc-%d", i%20)}}
	}
	bound, waiting := 0, 0
	for _, p := range s.Pods {
		if p.Bound() {
			p.Labels = map[string]string{"app": fmt.Sprintf("svc-%d", bound%20)}
			if bound%10 == 1 {
				p.PodAntiAffinity = []cluster.PodAffinityTerm{{TopologyKey: "kubernetes.io/hostname", LabelSelector: app(bound)}}
			}
			bound++
			continue
		}
		w := waiting % 100 // the workload, as benchCluster's shape and CPU size
		waiting++
		p.Labels = map[string]string{"app": fmt.Sprintf("svc-%d", w%20)}
		p.SpreadConstraints = []cluster.SpreadConstraint{{MaxSkew: int32(1 + w%3), TopologyKey: "topology.kubernetes.io/zone",
			WhenUnsatisfiable: cluster.DoNotSchedule, LabelSelector: app(w)}}
		if w%2 == 0 {
			p.PodAntiAffinity = []cluster.PodAffinityTerm{{TopologyKey: "kubernetes.io/hostname", LabelSelector: app(w)}}
		}
		if w%5 == 0 {
			p.PodAffinity = []cluster.PodAffinityTerm{{TopologyKey: "kubernetes.io/hostname", LabelSelector: app(w + 7)}}
		}
	}
	return s, u
}

// BenchmarkDiagnose5000x8Spread diagnoses 2,000 pending pods with zone
// spread constraints and pod (anti-)affinity on 5,000 nodes of 8 GPUs
// whose bound pods have anti-affinity too (target: under 2 s).
func BenchmarkDiagnose5000x8Spread(b *testing.B) {
	s, u := spreadCluster(b, 5000, 2000)
	benchDiagnose(b, s, u, func(rep *Report) {
		codes := map[placement.Code]int{}
		for _, f := range rep.Findings {
			for _, g := range f.Fit {
				for _, r := range g.Reasons {
					codes[r.Code] += g.NodeCount
				}
			}
		}
		for _, c := range []placement.Code{placement.SpreadSkew, placement.PodAffinityMismatch, placement.PodAntiAffinityMismatch, placement.ExistingAntiAffinity} {
			if codes[c] == 0 {
				b.Fatalf("the benchmark exercises no %s: %v", c, codes)
			}
		}
	})
}

// BenchmarkDiagnoseDRA diagnoses 200 pending pods with ResourceClaims on
// 1,000 nodes of 8 GPUs offered through DRA (every node its own pool, so
// no two nodes share a class), most GPUs held: claims that any H100
// serves, that a selector matches to none, that ask for 16 on one node,
// and of a class no node offers.
func BenchmarkDiagnoseDRA(b *testing.B) {
	c := gpu.Default()
	m := c.MustLookup("H100-80GB")
	var ns []*cluster.Node
	var pods []*cluster.Pod
	var all []string
	for i := range 1000 {
		n := &cluster.Node{Name: fmt.Sprintf("dra-%d", i), CPU: 96000, Memory: gpu.GiB(1024)}
		for g := range 8 {
			dev := fmt.Sprintf("gpu-%d", g)
			n.GPUs = append(n.GPUs, cluster.GPU{Index: g, Model: m, Memory: m.Usable, Sharing: cluster.Exclusive,
				DRA: &cluster.DRADevice{Driver: "gpu.nvidia.com", Pool: n.Name, Device: dev, Classes: []string{"gpu.nvidia.com"}, Product: "NVIDIA H100 80GB HBM3"}})
			all = append(all, cluster.DeviceID("gpu.nvidia.com", n.Name, dev))
			if g < 8-i%3 {
				pods = append(pods, &cluster.Pod{Namespace: "ml", Name: fmt.Sprintf("run-%d-%d", i, g), CPU: 4000, NodeName: n.Name,
					GPU: cluster.Request{Kind: cluster.WholeGPUs, Count: 1}, Devices: []cluster.Device{{GPU: g, Slice: -1}}})
			}
		}
		ns = append(ns, n)
	}
	shapes := []cluster.ClaimRequest{
		{Name: "gpu", DeviceClass: "gpu.nvidia.com", Count: 1, Evaluated: true, Accepts: all},
		{Name: "gpu", DeviceClass: "gpu.nvidia.com", Count: 1, Evaluated: true, Selectors: []string{"device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'"}},
		{Name: "gpu", DeviceClass: "gpu.nvidia.com", Count: 16, Evaluated: true, Accepts: all},
		{Name: "gpu", DeviceClass: "tpu.example.com", Count: 1, Evaluated: true},
	}
	for i := range 200 {
		name := fmt.Sprintf("wait-%d", i)
		pods = append(pods, &cluster.Pod{Namespace: "ml", Name: name, CPU: 1000, GPU: cluster.Request{Kind: cluster.WholeGPUs, Count: 1},
			Claims: []cluster.Claim{{Name: name, PodClaim: "gpu", Requests: []cluster.ClaimRequest{shapes[i%len(shapes)]}}}})
	}
	s, err := cluster.NewSnapshot(c, ns, pods)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		rep, err := Diagnose(s, nil)
		if err != nil {
			b.Fatal(err)
		}
		if len(rep.Findings) != 200 {
			b.Fatalf("%d findings", len(rep.Findings))
		}
	}
}
