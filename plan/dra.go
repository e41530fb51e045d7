package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/api/gpuoperator"
	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/nvidiadra"
	"github.com/gpupack/gpupack/placement"
)

// DRAObjects are what the plan applies to pools whose GPUs are offered
// through Dynamic Resource Allocation by NVIDIA's DRA driver (package
// nvidiadra says which version): the driver's DeviceClasses, one shared
// ResourceClaim per time-sliced or MPS workload (its pods share one GPU by
// referencing it, with the driver's sharing config), and one
// ResourceClaimTemplate per MIG workload (each pod gets a MIG device of
// its profile).
type DRAObjects struct {
	DeviceClasses  []resourcev1.DeviceClass           `json:"deviceClasses"`
	Claims         []resourcev1.ResourceClaim         `json:"resourceClaims,omitempty"`
	ClaimTemplates []resourcev1.ResourceClaimTemplate `json:"resourceClaimTemplates,omitempty"`
	profiles       map[string]bool
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
func (pl *Plan) addClaims(p *pool, pp PoolPlan, s *cluster.Snapshot) error {
	memory := p.sharedMemory(s)
	if pl.DRA == nil {
		pl.DRA = &DRAObjects{profiles: map[string]bool{}}
	}
	for _, d := range p.decisions {
		if d.Action == Keep || d.Action == Unplaceable {
			continue
		}
		ns := d.w.Namespace
		switch d.Method {
		case TimeSlicing, MPS:
			cfg := nvidiadra.TimeSlicing()
			if d.Method == MPS {
				// The claim's pods are MPS clients of one GPU, each with
				// the share of memory the plan sized and of threads,
				// rounded up so that it is never below the compute need
				// (1/clients at least; the percentage caps, it reserves
				// nothing).
				limit := p.model.Usable / gpu.MiB(d.clients)
				cfg = nvidiadra.MPS(ceilDiv(100, d.clients), int64(limit))
				d.After.VRAMLimit = limit
			}
			name := gpuoperator.ConfigName("gpupack", d.w.Owner, string(d.Method))
			c, err := nvidiadra.SharedClaim(ns, name, cfg)
			if err != nil {
				return fmt.Errorf("workload %s: %w", d.Workload, err)
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
					nvidiadra.RequestMemory(&c, int64(need))
				} else {
					pl.Warnings = append(pl.Warnings, fmt.Sprintf("workload %s: its claim asks no memory capacity: its pods need %s together, above what the devices' memory request policy allows (%s); the claim takes what the policy's default or the whole device gives", d.Workload, need, most))
				}
			}
			pl.DRA.Claims = append(pl.DRA.Claims, c)
			d.After.ResourceClaim = name
		case MIG:
			name := gpuoperator.ConfigName("gpupack", d.w.Owner, d.Profile)
			pl.DRA.ClaimTemplates = append(pl.DRA.ClaimTemplates, nvidiadra.MIGClaimTemplate(ns, name, d.Profile))
			pl.DRA.profiles[d.Profile] = true
			d.After.ResourceClaimTemplate = name
		}
	}
	pl.DRA.DeviceClasses = nvidiadra.DeviceClasses(slices.Sorted(maps.Keys(pl.DRA.profiles)))
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

// DRAManifests renders the DRA objects as one multi-document YAML file, in
// the order they apply: DeviceClasses, ResourceClaims, ResourceClaimTemplates.
// It is empty when no pool's GPUs are offered through DRA.
func (pl *Plan) DRAManifests() ([]byte, error) {
	if pl.DRA == nil {
		return nil, nil
	}
	var docs []string
	add := func(obj any) error {
		b, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		docs = append(docs, string(b))
		return nil
	}
	for i := range pl.DRA.DeviceClasses {
		if err := add(&pl.DRA.DeviceClasses[i]); err != nil {
			return nil, err
		}
	}
	for i := range pl.DRA.Claims {
		if err := add(&pl.DRA.Claims[i]); err != nil {
			return nil, err
		}
	}
	for i := range pl.DRA.ClaimTemplates {
		if err := add(&pl.DRA.ClaimTemplates[i]); err != nil {
			return nil, err
		}
	}
	return []byte(strings.Join(docs, "---\n")), nil
}

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
