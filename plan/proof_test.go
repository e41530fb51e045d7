package plan

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
	"github.com/gpupack/gpupack/usage"
)

// randomCluster makes a snapshot of a few nodes (exclusive, time-sliced,
// MIG), pods bound within what each node has, a few pending, and usage
// for most pods within what they hold.
func randomCluster(t *testing.T, rng *rand.Rand) (*cluster.Snapshot, *usage.Facts) {
	t.Helper()
	c := gpu.Default()
	models := []string{"H100-80GB", "A100-80GB", "L4"}
	pools := []string{"", "a", "b"}
	var nodes []*cluster.Node
	var pods []*cluster.Pod
	u := &usage.Facts{Window: 7 * 24 * time.Hour, Pods: map[string]usage.PodFacts{}}
	owners := []string{"web", "api", "nb", "feat", "train", "infer"}
	patterns := []usage.PatternName{usage.Busy, usage.FlatLow, usage.Bursty, usage.IdleHeld, usage.MemoryBound}
	podN := 0
	addPod := func(nodeName string, r cluster.Request, holds gpu.MiB) {
		podN++
		owner := owners[rng.IntN(len(owners))]
		labels := map[string]string{"app": owner}
		if owner == "infer" {
			labels["app.kubernetes.io/component"] = "inference"
			if rng.IntN(2) == 0 {
				labels["environment"] = "production"
			}
		}
		p := &cluster.Pod{Namespace: fmt.Sprintf("ns%d", rng.IntN(3)), Name: fmt.Sprintf("%s-%d", owner, podN), CPU: 1000, GPU: r, NodeName: nodeName, Labels: labels,
			Isolation: cluster.Isolation(rng.IntN(3))}
		pods = append(pods, p)
		if rng.IntN(5) == 0 || holds == 0 {
			return
		}
		vram := gpu.MiB(1 + rng.Int64N(int64(holds)))
		if rng.IntN(3) == 0 {
			vram = gpu.MiB(1 + rng.Int64N(int64(max(1, holds/8))))
		}
		u.Pods[p.Key()] = usage.PodFacts{Measured: true, ActiveRatio: rng.Float64(), Pattern: patterns[rng.IntN(len(patterns))],
			VRAMUsedP95: vram, IdleHeldRatio: rng.Float64(), IdleHeldMeasured: true}
	}
	for i := range 2 + rng.IntN(5) {
		m := c.MustLookup(models[rng.IntN(len(models))])
		n := &cluster.Node{Name: fmt.Sprintf("n%d", i), CPU: 256000, Memory: gpu.GiB(2048), Labels: map[string]string{}}
		if pool := pools[rng.IntN(len(pools))]; pool != "" {
			n.Labels["gpupack.io/pool"] = pool
		}
		count := []int{1, 2, 4, 8}[rng.IntN(4)]
		sharing := cluster.Exclusive
		switch k := rng.IntN(6); {
		case k == 0:
			sharing = cluster.TimeSliced
		case k == 1 && m.MIG != nil:
			sharing = cluster.MIG
		}
		replicas, renamed := 2+rng.IntN(3), rng.IntN(2) == 0
		for g := range count {
			cg := cluster.GPU{Index: g, Model: m, Memory: m.Usable, Sharing: sharing}
			switch sharing {
			case cluster.TimeSliced:
				cg.Replicas, cg.SharedResource = replicas, renamed
			case cluster.MIG:
				cg.Layout, _ = m.MIG.Fit([]string{m.MIG.Profiles[3].Name, m.MIG.Profiles[3].Name})
			}
			n.GPUs = append(n.GPUs, cg)
		}
		nodes = append(nodes, n)
		// Bind pods within what the node has.
		switch sharing {
		case cluster.Exclusive:
			for free := count; free > 0 && rng.IntN(5) > 0; {
				k := min(free, []int{1, 1, 1, 2, 4, 8}[rng.IntN(6)])
				addPod(n.Name, cluster.Request{Kind: cluster.WholeGPUs, Count: k}, m.Usable*gpu.MiB(k))
				free -= k
			}
		case cluster.TimeSliced:
			for range count * replicas {
				if rng.IntN(3) == 0 {
					continue
				}
				addPod(n.Name, cluster.Request{Kind: cluster.WholeGPUs, Count: 1, SharedResource: n.GPUs[0].SharedResource}, m.Usable/gpu.MiB(n.GPUs[0].Replicas))
			}
		case cluster.MIG:
			for range 2 * count {
				if rng.IntN(3) > 0 {
					p := m.MIG.Profiles[3]
					addPod(n.Name, cluster.Request{Kind: cluster.MIGSlice, Profile: p.Name}, p.Memory)
				}
			}
		}
	}
	for range rng.IntN(3) {
		addPod("", cluster.Request{Kind: cluster.WholeGPUs, Count: 1}, 0)
	}
	s, err := cluster.NewSnapshot(c, nodes, pods)
	if err != nil {
		t.Fatal(err)
	}
	if err := placement.CheckBound(s); err != nil {
		t.Fatalf("the generator over-committed a node: %v", err)
	}
	return s, u
}

// offered lists the resources a node offers after the plan, read from the
// plan's own emitted configs and labels (changed nodes) or from the
// snapshot (unchanged nodes): "nvidia.com/gpu", "nvidia.com/mig-<profile>",
// or "nvidia.com/gpu.shared" with the sharing method ("time-slicing",
// "mps") that offers it.
func offered(pl *Plan, n *cluster.Node) map[string]Method {
	out := map[string]Method{}
	for _, nc := range pl.Nodes {
		if nc.Node != n.Name {
			continue
		}
		c, ok := pl.DevicePlugin[nc.Labels[DevicePluginConfigLabel]]
		switch {
		case !ok:
		case c.Sharing != nil && c.Sharing.TimeSlicing != nil && c.Sharing.TimeSlicing.RenameByDefault:
			out["nvidia.com/gpu.shared"] = TimeSlicing
		case c.Sharing != nil && c.Sharing.MPS != nil && c.Sharing.MPS.RenameByDefault:
			out["nvidia.com/gpu.shared"] = MPS
		case c.Sharing != nil:
			out["nvidia.com/gpu"] = Whole // replicas under the plain name
		case c.Flags != nil && c.Flags.MIGStrategy == "mixed":
			for k := range n.GPUs {
				if k >= len(nc.Layouts) || nc.Layouts[k] == "" {
					out["nvidia.com/gpu"] = Whole
					continue
				}
				for _, sl := range strings.Split(nc.Layouts[k], ",") {
					out["nvidia.com/mig-"+strings.Split(sl, "@")[0]] = MIG
				}
			}
		default:
			out["nvidia.com/gpu"] = Whole
		}
		return out
	}
	for _, g := range n.GPUs {
		switch {
		case g.Sharing == cluster.MIG:
			for _, sl := range g.Layout {
				out["nvidia.com/mig-"+sl.Profile] = MIG
			}
		case g.SharedResource:
			out["nvidia.com/gpu.shared"] = Method(g.Sharing.String())
		default:
			out["nvidia.com/gpu"] = Whole
		}
	}
	return out
}

// resourceOf names what a pod asks for after the plan: the decision's
// request where the webhook rewrites it, else its own.
func resourceOf(p *cluster.Pod, d *Decision) string {
	if d != nil && d.Action != Keep && d.Action != Unplaceable && p.GPU.String() == d.Before {
		return d.After.Resource
	}
	switch {
	case p.GPU.Kind == cluster.MIGSlice:
		return "nvidia.com/mig-" + p.GPU.Profile
	case p.GPU.SharedResource:
		return "nvidia.com/gpu.shared"
	}
	return "nvidia.com/gpu"
}

// TestProofPlacesOnlyWhereConfigsOffer: for random snapshots and usage,
// the proof puts every pod on a node whose configs, as the plan emits
// them, offer the resource it then asks for (a share of the method it was
// sized for), claims only nodes that end empty, prices exactly those, and
// sizes nothing beyond the GPUs a pod holds.
func TestProofPlacesOnlyWhereConfigsOffer(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		s, u := randomCluster(t, rng)
		pl, err := Make(context.Background(), s, u, DefaultOptions())
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		decisionOf := map[string]*Decision{}
		for _, d := range pl.Decisions {
			for _, p := range d.w.Pods {
				decisionOf[p.Key()] = d
			}
		}
		occupied := map[string]bool{}
		for _, p := range s.Pods {
			nodeName, moved := pl.Proof.placed[p.Key()]
			if !moved {
				if p.Bound() && !slices.ContainsFunc(pl.Nodes, func(nc NodeChange) bool { return nc.Node == p.NodeName }) {
					occupied[p.NodeName] = true // stays on an unchanged node
				}
				continue
			}
			occupied[nodeName] = true
			n, _ := s.Node(nodeName)
			d := decisionOf[p.Key()]
			want := resourceOf(p, d)
			has := offered(pl, n)
			method, ok := has[want]
			if !ok {
				t.Errorf("seed %d: pod %s (%s, decision %s %s) placed on %s, whose configs offer %v, not %s", seed, p.Key(), p.GPU, d.Action, d.Method, nodeName, has, want)
				continue
			}
			if d != nil && want == "nvidia.com/gpu.shared" && (d.Method == TimeSlicing || d.Method == MPS) && p.GPU.String() == d.Before && d.Action != Keep && method != d.Method {
				t.Errorf("seed %d: pod %s sized for %s placed on %s, which shares by %s", seed, p.Key(), d.Method, nodeName, method)
			}
		}
		var saving float64
		for _, name := range pl.Proof.NodesFreed {
			if occupied[name] {
				t.Errorf("seed %d: node %s is counted as freed but the proof places pods on it", seed, name)
			}
			n, _ := s.Node(name)
			for _, g := range n.GPUs {
				saving += g.Model.PricePerHour * HoursPerMonth
			}
		}
		if math.Abs(saving-pl.Proof.MonthlySaving) > 0.01 {
			t.Errorf("seed %d: saving %.2f, but the freed nodes cost %.2f a month", seed, pl.Proof.MonthlySaving, saving)
		}
		for _, d := range pl.Decisions {
			if d.pool == nil || d.pool.conflict || d.Action == Unplaceable {
				continue
			}
			perPod := max(1, d.w.Request.Count)
			if hw := d.pool.model.Usable * gpu.MiB(perPod); d.VRAMNeed > hw {
				t.Errorf("seed %d: %s sized at %s VRAM on %d x %s", seed, d.Workload, d.VRAMNeed, perPod, d.pool.model.Name)
			}
			if d.ComputeNeed > float64(perPod)+1e-9 {
				t.Errorf("seed %d: %s sized at %.2f GPU of compute on %d GPUs", seed, d.Workload, d.ComputeNeed, perPod)
			}
		}
	}
}
