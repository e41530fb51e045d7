package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpupack/gpupack/api/gpuoperator"
	"github.com/gpupack/gpupack/api/nvidiadra"
	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
)

// DRAPlan is what the plan applies to pools whose GPUs are offered through
// Dynamic Resource Allocation by NVIDIA's DRA driver (package
// api/nvidiadra names its words): the MIG profiles that need a
// DeviceClass beside the driver's two, one shared ResourceClaim per
// time-sliced or MPS workload (its pods share one GPU by referencing it,
// with the driver's sharing config), and one ResourceClaimTemplate per MIG
// workload (each pod gets a MIG device of its profile). It is intent, not
// Kubernetes objects: the edge builds those from it.
type DRAPlan struct {
	// MIGProfiles are the profiles of the claim templates, sorted and
	// without repeats; each gets a DeviceClass serving its device plugin
	// resource (nvidia.com/mig-<profile>), so that requests rewritten to a
	// MIG profile are served by DRA too.
	MIGProfiles    []string           `json:"migProfiles,omitempty"`
	Claims         []SharedClaim      `json:"sharedClaims,omitempty"`
	ClaimTemplates []MIGClaimTemplate `json:"migClaimTemplates,omitempty"`
}

// SharedClaim is a ResourceClaim for one whole GPU that every pod of one
// workload references, so that they share that GPU by time-slicing or as
// MPS clients.
type SharedClaim struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Method is TimeSlicing (at the driver's default interval) or MPS.
	Method Method `json:"method"`
	// MPS limits each client when Method is MPS; nil otherwise.
	MPS *MPSLimits `json:"mps,omitempty"`
	// MemoryRequest is the device memory capacity the claim asks for its
	// pods together, where the pool's devices allow multiple allocations
	// and offer memory as a consumable capacity; zero when it asks none
	// (the claim takes a whole device).
	MemoryRequest cluster.Quantity `json:"memoryRequest,omitempty"`
}

// MPSLimits are what each MPS client of a shared GPU may use.
type MPSLimits struct {
	// ThreadPercent is its share of the GPU's threads, 1..100: a cap,
	// not a reservation.
	ThreadPercent int `json:"threadPercent"`
	// PinnedMemory is the device memory it may pin.
	PinnedMemory gpu.MiB `json:"pinnedMemoryMiB"`
}

// MIGClaimTemplate is a ResourceClaimTemplate whose claims (one per pod of
// the workload) each get one MIG device of Profile.
type MIGClaimTemplate struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Profile   string `json:"profile"`
	// Aligned are the requests of another driver's devices (a NIC) that
	// the workload's claim aligns its GPU with, as the claim asks them,
	// and MatchAttribute the attribute (resource.kubernetes.io/numaNode)
	// on which they and the MIG device must agree; empty when the
	// workload aligns none.
	Aligned        []cluster.ClaimRequest `json:"alignedRequests,omitempty"`
	MatchAttribute string                 `json:"matchAttribute,omitempty"`
}

// requestSpec is the request as its claim asks it, without what the
// loader read about the devices it accepts.
func requestSpec(r cluster.ClaimRequest) cluster.ClaimRequest {
	out := cluster.ClaimRequest{Name: r.Name, DeviceClass: r.DeviceClass, Count: r.Count, All: r.All,
		Selectors: r.Selectors, Tolerations: r.Tolerations, Capacity: r.Capacity}
	for _, alt := range r.FirstAvailable {
		out.FirstAvailable = append(out.FirstAvailable, requestSpec(alt))
	}
	return out
}

// draSelector is the node label that a DRA pool's shared pods select its
// nodes by: the pool label its nodes carry, or gpupack.io/pool=<pool> when
// they carry none (node-labels.yaml then adds it).
func (p *pool) draSelector(s *cluster.Snapshot) map[string]string {
	n := s.Nodes[p.nodes[0]]
	for _, k := range poolLabels {
		if v := n.Labels[k]; v != "" {
			return map[string]string{k: v}
		}
	}
	return map[string]string{wellknown.LabelPool: p.name}
}

// keepUnclaimable keeps whole the DRA pool's time-sliced and MPS workloads
// whose pods need more than one GPU: the driver shares a GPU among the pods
// that reference one ResourceClaim, and the pods of one workload (one pod
// template) can reference only the same claim. It reports whether it kept
// any.
func (p *pool) keepUnclaimable(tsBins map[string][]sharedBin) bool {
	kept := false
	for _, d := range p.decisions {
		gpus, how := 0, ""
		switch {
		case d.Action == Keep || d.Action == Unplaceable:
			continue
		case d.Method == TimeSlicing && len(tsBins[d.Workload]) > 1:
			gpus, how = len(tsBins[d.Workload]), fmt.Sprintf("VRAM need %s and compute %.2f GPU each", d.VRAMNeed, d.ComputeNeed)
		case d.Method == MPS && len(d.w.Pods) > d.clients:
			gpus, how = ceilDiv(len(d.w.Pods), d.clients), fmt.Sprintf("%d MPS clients per GPU", d.clients)
		default:
			continue
		}
		d.keep(ClaimSpansGPUs, fmt.Sprintf("its GPUs are offered through DRA, where pods share a GPU by referencing one ResourceClaim, so all %d pods would share one GPU; at %s they need %d", len(d.w.Pods), how, gpus))
		d.After = After{Resource: "nvidia.com/gpu", Count: max(1, d.w.Request.Count), GPUModel: p.model.Name}
		d.Risks = slices.DeleteFunc(d.Risks, func(r Risk) bool { return r != ShortWindow })
		d.clients = 0
		kept = true
	}
	return kept
}

// addClaims records the DRA pool's claims and claim templates, and names
// them in the decisions.
func (pl *Plan) addClaims(p *pool, _ PoolPlan, s *cluster.Snapshot) error {
	memory := p.sharedMemory(s)
	if pl.DRA == nil {
		pl.DRA = &DRAPlan{}
	}
	for _, d := range p.decisions {
		if d.Action == Keep || d.Action == Unplaceable {
			continue
		}
		ns := d.w.Namespace
		switch d.Method {
		case TimeSlicing, MPS:
			name := gpuoperator.ConfigName("gpupack", d.w.Owner, string(d.Method))
			c := SharedClaim{Namespace: ns, Name: name, Method: d.Method}
			if d.Method == MPS {
				// The claim's pods are MPS clients of one GPU, each with
				// the share of memory the plan sized and of threads,
				// rounded up so that it is never below the compute need
				// (1/clients at least; the percentage caps, it reserves
				// nothing).
				limit := p.model.Usable / gpu.MiB(d.clients)
				c.MPS = &MPSLimits{ThreadPercent: ceilDiv(100, d.clients), PinnedMemory: limit}
				d.After.VRAMLimit = limit
			}
			if memory != nil {
				// The claim's pods share its one share of the device: ask
				// for the memory they need together.
				per := d.VRAMNeed
				if d.Method == MPS {
					per = d.After.VRAMLimit
				}
				need := cluster.Quantity(per*gpu.MiB(len(d.w.Pods))) << 20
				if most, ok := placement.LargestAllowed(memory, memory.Value); ok && need <= most {
					c.MemoryRequest = need
				} else {
					pl.Warnings = append(pl.Warnings, fmt.Sprintf("workload %s: its claim asks no memory capacity: its pods need %s together, above what the devices' memory request policy allows (%s); the claim takes what the policy's default or the whole device gives", d.Workload, need, most))
				}
			}
			pl.DRA.Claims = append(pl.DRA.Claims, c)
			d.After.ResourceClaim = name
		case MIG:
			name := gpuoperator.ConfigName("gpupack", d.w.Owner, d.Profile)
			t := MIGClaimTemplate{Namespace: ns, Name: name, Profile: d.Profile}
			if a := d.w.aligned(); a != nil {
				for _, r := range a.others {
					t.Aligned = append(t.Aligned, requestSpec(r))
				}
				t.MatchAttribute = a.constraint.MatchAttribute
			}
			pl.DRA.ClaimTemplates = append(pl.DRA.ClaimTemplates, t)
			if !slices.Contains(pl.DRA.MIGProfiles, d.Profile) {
				pl.DRA.MIGProfiles = append(pl.DRA.MIGProfiles, d.Profile)
				slices.Sort(pl.DRA.MIGProfiles)
			}
			d.After.ResourceClaimTemplate = name
		}
	}
	return nil
}

// sharedMemory is the memory capacity of the DRA pool's devices when
// every one of them allows multiple allocations and offers memory as a
// consumable capacity (DRAConsumableCapacity), the smallest if they
// differ; nil otherwise.
func (p *pool) sharedMemory(s *cluster.Snapshot) *cluster.DeviceCapacity {
	var out *cluster.DeviceCapacity
	for _, i := range p.nodes {
		for _, g := range s.Nodes[i].GPUs {
			if g.DRA == nil || !g.DRA.Shared || g.DRA.Device == "" {
				return nil
			}
			k := g.DRA.CapacityIndex(nvidiadra.CapacityMemory)
			if k < 0 {
				return nil
			}
			if c := &g.DRA.Capacity[k]; out == nil || c.Value < out.Value {
				out = c
			}
		}
	}
	return out
}

// viaClaim reports whether the decision's pods get their share only by
// referencing a ResourceClaim (time slices and MPS clients of a DRA pool),
// not by the extended resource the admission webhook rewrites requests to.
func (d *Decision) viaClaim() bool { return d.After.ResourceClaim != "" }

// partitionableWarnings names, per DRA pool, the GPUs offered as
// partitionable devices (dynamic MIG over shared counters), which the plan
// does not plan partitions for yet: it counts them as whole GPUs.
func partitionableWarnings(s *cluster.Snapshot) []string {
	type poolGPUs struct {
		gpus    int
		classes map[string]bool
	}
	byPool := map[string]*poolGPUs{}
	for _, n := range s.Nodes {
		for _, g := range n.GPUs {
			if g.DRA == nil || !g.DRA.Partitionable() {
				continue
			}
			key := g.DRA.Driver + "/" + g.DRA.Pool
			p := byPool[key]
			if p == nil {
				p = &poolGPUs{classes: map[string]bool{}}
				byPool[key] = p
			}
			p.gpus++
			for _, c := range g.DRA.Classes {
				p.classes[c] = true
			}
			for _, part := range g.DRA.Partitions {
				for _, c := range part.Classes {
					p.classes[c] = true
				}
			}
		}
	}
	var out []string
	for _, key := range slices.Sorted(maps.Keys(byPool)) {
		p := byPool[key]
		classes := "none"
		if len(p.classes) > 0 {
			classes = strings.Join(slices.Sorted(maps.Keys(p.classes)), ", ")
		}
		out = append(out, fmt.Sprintf("DRA pool %s: %d GPU(s) offered as partitionable devices (dynamic MIG, DRAPartitionableDevices; device classes %s): the plan counts them as whole GPUs and proposes no partition claims for them yet", key, p.gpus, classes))
	}
	return out
}
