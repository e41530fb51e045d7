package plan

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/usage"
	"github.com/gpupack/gpupack/vram"
)

// Action is what the plan does with a workload.
type Action string

// The actions.
const (
	Keep        Action = "keep"        // its request stays as it is, and so does the GPU it holds
	Unshare     Action = "unshare"     // its request stays, but its pods leave the shared GPU they hold for whole GPUs
	Reclaim     Action = "reclaim"     // idle-held: scale it down, or move it to the smallest share
	Share       Action = "share"       // right-sized onto a MIG slice, time slice or MPS client
	Unplaceable Action = "unplaceable" // needs more VRAM than any device has: reported, not placed
)

// Method is how a workload gets its GPU after the plan.
type Method string

// The methods.
const (
	Whole       Method = "whole"        // nvidia.com/gpu, exclusive
	MIG         Method = "mig"          // a hardware slice
	TimeSlicing Method = "time-slicing" // a time slice, no VRAM isolation
	MPS         Method = "mps"          // an MPS client with a memory limit
)

// Code names why a decision was taken.
type Code string

// The reasons a decision gives.
const (
	NoUsage             Code = "NoUsage"             // nothing measured: nothing to prove a change by
	VRAMUnknown         Code = "VRAMUnknown"         // activity known, VRAM not: sharing could run it out of memory
	PendingOnly         Code = "PendingOnly"         // no running pod to measure or to move
	NodeConflict        Code = "NodeConflict"        // a pod sits on a node the plan leaves unchanged
	ExceedsEveryDevice  Code = "ExceedsEveryDevice"  // its VRAM need is beyond every GPU of the cluster
	MultiGPU            Code = "MultiGPU"            // several GPUs, and usage does not show one suffices
	TrainingWhole       Code = "TrainingWhole"       // training, and usage does not show it fits a share
	TooBigToShare       Code = "TooBigToShare"       // needs most of a GPU, and no MIG slice short of the whole GPU holds it
	LargeSlice          Code = "LargeSlice"          // needs most of a GPU's memory or compute: too much for time slices, held by a MIG slice short of the whole GPU
	IdleHeld            Code = "IdleHeld"            // held without work most of the window
	NeedsIsolation      Code = "NeedsIsolation"      // isolation none or production inference: hardware isolation only
	LoneTenant          Code = "LoneTenant"          // tenant isolation with no other pod of its tenant to share with
	CooperatingReplicas Code = "CooperatingReplicas" // several steady small replicas of one owner
	OneTrustBoundary    Code = "OneTrustBoundary"    // bursty, interactive or small, shares within its tenant
	NoMIGHardware       Code = "NoMIGHardware"       // needs MIG, its pool's GPUs have none
	ClaimSpansGPUs      Code = "ClaimSpansGPUs"      // DRA: its pods would share one claim's GPU, and need more than one
	AlignedDevices      Code = "AlignedDevices"      // DRA: a claim aligns its GPU with another driver's device (a NIC on one NUMA node), which a share would lose
)

// Reason is why a decision was taken, as data; Detail gives the figures.
type Reason struct {
	Code   Code   `json:"code"`
	Detail string `json:"detail"`
}

// Risk names what could go wrong after the change.
type Risk string

// The risks a decision can carry.
const (
	SharedVRAM      Risk = "shared-vram"      // time-slicing does not partition VRAM: one pod's growth can OOM its neighbours
	NoisyNeighbour  Risk = "noisy-neighbour"  // time slices and MPS clients slow each other down under load
	MPSFaultDomain  Risk = "mps-fault-domain" // a fatal fault in one MPS client ends every client on the GPU
	ScaleDown       Risk = "scale-down"       // reclaiming stops what users may still expect to find running
	ShortWindow     Risk = "short-window"     // the window is under a day: weekly peaks may be missed
	NoHardwareGuard Risk = "no-isolation"     // needs isolation that this hardware cannot give
)

// After is what a workload's pods should request once the plan is applied,
// for the admission webhook that rewrites requests.
type After struct {
	// Resource is nvidia.com/gpu, nvidia.com/gpu.shared or
	// nvidia.com/mig-<profile>. A workload that shares a DRA GPU through
	// ResourceClaim asks for none: the proof models its share as
	// nvidia.com/gpu.shared.
	Resource string `json:"resource"`
	Count    int    `json:"count"`
	// GPUModel is the model of the pool the workload is sized for.
	GPUModel string `json:"gpuModel,omitempty"`
	// VRAMLimit is the memory the pod may use: its need for time slices,
	// the MPS client limit, the MIG slice's memory.
	VRAMLimit gpu.MiB `json:"vramLimitMiB,omitempty"`
	// NodeSelector selects the nodes whose device plugin config offers the
	// resource as the plan sized it: time slices and MPS clients are both
	// nvidia.com/gpu.shared, so the config label tells them apart.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// ResourceClaim (time slices and MPS clients on GPUs offered through
	// DRA) is the ResourceClaim that the workload's pods reference to share
	// one GPU; ResourceClaimTemplate (MIG through DRA) the template each
	// pod's claim of a MIG device can be made from. Both are in the plan's
	// DRA objects.
	ResourceClaim         string `json:"resourceClaim,omitempty"`
	ResourceClaimTemplate string `json:"resourceClaimTemplate,omitempty"`
	// Engine is the setting that keeps the workload's preallocating
	// engine (vLLM, TGI, JAX, TensorFlow) within its share, which the
	// webhook writes into the pod's arguments or environment; nil when it
	// needs none.
	Engine *vram.Setting `json:"engine,omitempty"`
}

// Decision is the plan for one workload.
type Decision struct {
	Workload string `json:"workload"`
	Pods     int    `json:"pods"`
	Role     Role   `json:"role"`
	Before   string `json:"before"`
	Action   Action `json:"action"`
	Method   Method `json:"method"`
	Profile  string `json:"migProfile,omitempty"`
	Pool     string `json:"pool,omitempty"`
	// VRAMNeed and ComputeNeed are what each of the workload's pods needs
	// over all its GPUs: measured VRAM p95 and activity plus headroom, at
	// most what those GPUs have (the reason says when the headroom was cut
	// there). ComputeNeed is in GPUs.
	VRAMNeed    gpu.MiB `json:"vramNeedMiB,omitempty"`
	ComputeNeed float64 `json:"computeNeed,omitempty"`
	Reason      Reason  `json:"reason"`
	Risks       []Risk  `json:"risks,omitempty"`
	After       After   `json:"after"`
	// Spot is true for interruptible work (Jobs, not production).
	Spot bool `json:"spot"`
	// full is true when the sizing (use plus headroom) reached the GPUs
	// the workload holds, so that VRAMNeed and ComputeNeed are capped there
	// and it needs all of them; capNote says so in the reason.
	full    bool
	capNote string
	// engineNote says how a workload whose engine preallocates GPU memory
	// was sized (sizeEngine).
	engineNote string
	// clients is the MPS clients per GPU the workload allows.
	clients int
	w       *Workload
	pool    *pool
}

func (d *Decision) keep(code Code, detail string) {
	d.Action, d.Method, d.Reason = Keep, Whole, Reason{code, detail}
	if d.w.Request.Kind == cluster.MIGSlice {
		d.Method, d.Profile = MIG, d.w.Request.Profile
	}
}

// decide takes one workload's decision. p is the pool its running pods are
// on (nil for pending-only workloads); largest is the most VRAM any GPU of
// the cluster has.
func decide(w *Workload, p *pool, largest gpu.MiB, o Options, window float64, loneTenant func(*Workload) bool) *Decision {
	d := decideSized(w, p, largest, o, window, loneTenant)
	d.alignedShare()
	if w.SharedGPUPods > 0 && d.Action != Unplaceable && (d.VRAMNeed > 0 || d.ComputeNeed > 0) {
		if w.SharedEvenSplit {
			d.Reason.Detail += fmt.Sprintf("; measured on a GPU that %d pods held at once, whose VRAM and activity DCGM reports for the whole GPU: each pod is sized on an equal share of them", w.SharedGPUPods)
		} else {
			d.Reason.Detail += fmt.Sprintf("; measured on a GPU that %d pods held at once: each pod is sized on its own VRAM and activity, which gpupack agent measured per process", w.SharedGPUPods)
		}
	}
	if d.engineNote != "" && d.Action != Unplaceable {
		d.Reason.Detail += "; " + d.engineNote
	}
	if d.capNote != "" {
		d.Reason.Detail += "; " + d.capNote
	}
	d.unshare()
	return d
}

// keepAligned keeps the GPUs of a workload whose claim aligns its GPU
// with another driver's device (a NIC on one NUMA node), saying why no
// share keeps that alignment.
func (d *Decision) keepAligned(why string) {
	d.keep(AlignedDevices, d.w.aligned().String()+"; "+why+", so its GPUs stay")
	d.After = After{Resource: "nvidia.com/gpu", Count: max(1, d.w.Request.Count)}
	if d.w.Request.Kind == cluster.MIGSlice {
		d.After = After{Resource: "nvidia.com/mig-" + d.w.Request.Profile, Count: 1}
	}
	if d.pool != nil && !d.pool.conflict {
		d.After.GPUModel = d.pool.model.Name
	}
	d.Risks = slices.DeleteFunc(d.Risks, func(r Risk) bool { return r != ShortWindow })
	d.clients = 0
}

// alignedShare keeps the GPUs of an aligned workload that would share by
// time slices or MPS clients: one shared claim would give all its pods
// the other driver's devices of one claim. A MIG share stays: its claim
// template asks the other driver's devices beside the MIG device, on one
// value of the attribute (addClaims).
func (d *Decision) alignedShare() {
	if d.w.aligned() == nil || d.Action == Keep || d.Action == Unplaceable || (d.Method != TimeSlicing && d.Method != MPS) {
		return
	}
	d.keepAligned("a shared claim of its pods would give all of them the other driver's devices of one claim; only a MIG device, whose claim template the plan writes with those devices and the constraint, keeps that alignment")
}

// unshare names a kept workload whose pods hold a shared GPU (time slices,
// MPS) in a pool the plan lays out again: kept whole, they leave that GPU
// for whole GPUs of their own, which is a change and not a keep.
func (d *Decision) unshare() {
	if d.Action != Keep || d.Method != Whole || !d.w.OnSharedGPU || d.pool == nil || d.pool.conflict {
		return
	}
	d.Action = Unshare
	d.Reason.Detail += fmt.Sprintf("; its pods leave the GPU they share now for %s each", gpusText(max(1, d.w.Request.Count)))
}

func decideSized(w *Workload, p *pool, largest gpu.MiB, o Options, window float64, loneTenant func(*Workload) bool) *Decision {
	d := &Decision{Workload: w.Key, Pods: len(w.Pods), Role: w.Role, Before: w.Request.String(), w: w, pool: p,
		Spot: w.Job && !w.Production && w.Role != Inference}
	perPod := max(1, w.Request.Count)
	if w.Observed.VRAMUsedP95 > 0 {
		d.VRAMNeed = gpu.MiB(math.Ceil(float64(w.Observed.VRAMUsedP95) * (1 + o.Headroom)))
	}
	d.sizeEngine(w, perPod, o)
	if w.Observed.Measured {
		d.ComputeNeed = w.Observed.ActiveRatio * float64(perPod) * (1 + o.Headroom)
	}
	if window < 24 && w.Measured > 0 {
		d.addRisks(ShortWindow)
	}
	// Only what is certain makes a workload unplaceable: a stated need, or
	// measured use without headroom, beyond every GPU.
	stated, used := w.Request.Memory, w.Observed.VRAMUsedP95/gpu.MiB(perPod)
	if stated > largest || used > largest {
		d.Action, d.Method = Unplaceable, Whole
		need := max(stated, used)
		d.Reason = Reason{ExceedsEveryDevice, fmt.Sprintf("needs %s per GPU; the largest GPU of the cluster has %s", need, largest)}
		return d
	}
	d.capAtHardware(w, p, largest, o)
	d.After = After{Resource: "nvidia.com/gpu", Count: perPod}
	if w.Request.Kind == cluster.MIGSlice {
		d.After = After{Resource: "nvidia.com/mig-" + w.Request.Profile, Count: 1}
	}
	switch {
	case p == nil:
		d.keep(PendingOnly, "no running pod to measure or move; it keeps its request")
		return d
	case p.conflict:
		d.keep(NodeConflict, "its pods run on nodes the plan leaves unchanged")
		return d
	case w.aligned() != nil && (!p.dra || w.unaligned != ""):
		d.keepAligned(cmp.Or(w.unaligned, "its GPUs are offered by the device plugin, whose shares no claim aligns with that device"))
		return d
	}
	d.Pool = p.name
	d.After.GPUModel = p.model.Name
	if w.Measured == 0 {
		d.keep(NoUsage, "no usage measured for its pods")
		return d
	}
	idle := w.Observed.Pattern == usage.IdleHeld
	if w.Observed.IdleHeldMeasured {
		idle = w.Observed.IdleHeldRatio >= o.ReclaimIdleRatio
	}
	if d.VRAMNeed == 0 {
		d.keep(VRAMUnknown, "VRAM p95 not measured; sharing without it could run the GPU out of memory")
		if idle {
			d.Action, d.Reason = Reclaim, Reason{IdleHeld, idleDetail(w, o) + "; scale it down (VRAM unknown, so it keeps a whole GPU in the proof)"}
			d.addRisks(ScaleDown)
		}
		return d
	}
	fitsOne := !d.full && d.VRAMNeed <= p.model.Usable && d.ComputeNeed <= 1
	switch {
	case idle && !d.full:
	case w.Request.Kind == cluster.WholeGPUs && w.Request.Count > 1 && !fitsOne:
		d.keep(MultiGPU, fmt.Sprintf("%d GPUs; usage (VRAM need %s, compute %.2f GPU) does not show one suffices", w.Request.Count, d.VRAMNeed, d.ComputeNeed))
		return d
	case w.Role == Training && !fitsOne:
		d.keep(TrainingWhole, fmt.Sprintf("training; VRAM need %s and compute %.2f GPU do not fit a share", d.VRAMNeed, d.ComputeNeed))
		return d
	case d.full || 2*d.VRAMNeed > p.model.Usable || d.ComputeNeed > 0.5:
		if d.full || p.model.MIG == nil || !d.chooseMIG(p.model) {
			d.keep(TooBigToShare, fmt.Sprintf("needs %s of %s's %s and %.2f GPU of compute", d.VRAMNeed, p.model.Name, p.model.Usable, d.ComputeNeed))
			return d
		}
		d.Action, d.Reason = Share, Reason{LargeSlice, fmt.Sprintf("needs %s of %s's %s and %.2f GPU of compute, too much for time slices: the MIG slice %s holds it with hardware isolation and leaves the rest of the GPU to others", d.VRAMNeed, p.model.Name, p.model.Usable, d.ComputeNeed, d.Profile)}
		return d
	}
	d.Action = Share
	if idle {
		d.Action = Reclaim
		d.addRisks(ScaleDown)
	}
	d.chooseSharing(w, p, idle, o, loneTenant)
	return d
}

// chooseSharing picks how a workload that fits a share of its pool's GPU
// shares one, and why: a MIG slice where it needs hardware isolation (or
// keeps its GPUs where the model has no slice for it) or where its tenant
// is alone, MPS for steady replicas of one owner, time slices otherwise.
func (d *Decision) chooseSharing(w *Workload, p *pool, idle bool, o Options, loneTenant func(*Workload) bool) {
	needsHW := w.Isolation == cluster.ShareNone || (w.Role == Inference && w.Production)
	pattern := w.Observed.Pattern
	steady := pattern == usage.FlatLow || pattern == usage.Busy || pattern == usage.MemoryBound
	switch {
	case needsHW:
		why := "isolation none"
		if w.Isolation != cluster.ShareNone {
			why = "production inference"
		}
		if p.model.MIG == nil || !d.chooseMIG(p.model) {
			d.keep(NoMIGHardware, fmt.Sprintf("%s needs hardware isolation; %s has no MIG profile for %s", why, p.model.Name, d.VRAMNeed))
			d.addRisks(NoHardwareGuard)
			return
		}
		d.setReason(NeedsIsolation, fmt.Sprintf("%s: a MIG slice isolates memory and faults in hardware", why), idle, o)
	case w.Isolation == cluster.ShareTenant && loneTenant(w) && p.model.MIG != nil && d.chooseMIG(p.model):
		d.setReason(LoneTenant, fmt.Sprintf("tenant %s has no other pod to time-share with; a MIG slice can sit beside other tenants", w.Tenant), idle, o)
	case len(w.Pods) >= 2 && w.Role != Interactive && steady && d.chooseMPS(p.model):
		d.setReason(CooperatingReplicas, fmt.Sprintf("%d steady (%s) replicas of one owner, %s each: %d MPS clients per GPU, %s limit each", len(w.Pods), pattern, d.VRAMNeed, d.clients, p.model.Usable/gpu.MiB(d.clients)), idle, o)
		d.addRisks(NoisyNeighbour, MPSFaultDomain)
	default:
		d.timeSlice(p.model)
		d.setReason(OneTrustBoundary, fmt.Sprintf("%s work within tenant %s: time slices of one GPU whose co-located VRAM needs add up to at most %s", strings.TrimPrefix(string(w.Role)+" "+string(pattern), "unknown "), w.Tenant, p.model.Usable), idle, o)
		d.addRisks(SharedVRAM, NoisyNeighbour)
	}
}

// capAtHardware caps the sizing at the GPUs each pod holds (perPod GPUs of
// the pool's model, or of the largest GPU when it is in no pool): headroom
// over measured use cannot make a pod need more than it has. A capped
// sizing means the pod needs all of them.
func (d *Decision) capAtHardware(w *Workload, p *pool, largest gpu.MiB, o Options) {
	perPod := max(1, w.Request.Count)
	memory, model := largest, "the largest GPU"
	if p != nil && !p.conflict {
		memory, model = p.model.Usable, p.model.Name
	}
	var notes []string
	if hw := memory * gpu.MiB(perPod); d.VRAMNeed > hw {
		notes = append(notes, fmt.Sprintf("VRAM p95 %s plus %.0f%% headroom is %s, capped at the %s of %d x %s", w.Observed.VRAMUsedP95, 100*o.Headroom, d.VRAMNeed, hw, perPod, model))
		d.VRAMNeed, d.full = hw, true
	}
	if hw := float64(perPod); d.ComputeNeed > hw {
		notes = append(notes, fmt.Sprintf("activity %.2f plus %.0f%% headroom is %.2f GPU, capped at its %s", w.Observed.ActiveRatio, 100*o.Headroom, d.ComputeNeed, gpusText(perPod)))
		d.ComputeNeed, d.full = hw, true
	}
	if len(notes) > 0 {
		d.capNote = "sized at the hardware: " + strings.Join(notes, "; ")
	}
}

func gpusText(n int) string {
	if n == 1 {
		return "1 GPU"
	}
	return fmt.Sprintf("%d GPUs", n)
}

// setReason records the sharing reason, or the reclaim reason with the
// share it falls back to when the workload is idle-held.
func (d *Decision) setReason(code Code, detail string, idle bool, o Options) {
	d.Reason = Reason{code, detail}
	if idle {
		d.Reason = Reason{IdleHeld, idleDetail(d.w, o) + fmt.Sprintf("; scale it down, or keep it on a %s share (%s)", d.Method, detail)}
	}
}

func idleDetail(w *Workload, o Options) string {
	if w.Observed.IdleHeldMeasured {
		return fmt.Sprintf("idle-held %.0f%% of the window (threshold %.0f%%)", 100*w.Observed.IdleHeldRatio, 100*o.ReclaimIdleRatio)
	}
	return fmt.Sprintf("idle-held, %.0f%% active over the window", 100*w.Observed.ActiveRatio)
}

// chooseMIG picks the smallest profile of the model that holds the VRAM
// need and the compute need, and reports whether one does. A profile of
// every compute slice (7g.80gb of an H100) is the whole GPU, which shares
// nothing: it is never chosen.
func (d *Decision) chooseMIG(m *gpu.Model) bool {
	g := m.MIG
	for _, p := range g.Profiles {
		if p.Compute < g.ComputeSlices && p.Memory >= d.VRAMNeed && float64(p.Compute)/float64(g.ComputeSlices) >= d.ComputeNeed {
			d.Method, d.Profile = MIG, p.Name
			d.After = After{Resource: "nvidia.com/mig-" + p.Name, Count: 1, GPUModel: m.Name, VRAMLimit: p.Memory}
			return true
		}
	}
	return false
}

// addRisks records risks once each.
func (d *Decision) addRisks(rs ...Risk) {
	for _, r := range rs {
		if !slices.Contains(d.Risks, r) {
			d.Risks = append(d.Risks, r)
		}
	}
}

// timeSlice gives the workload time slices of one GPU of model m.
func (d *Decision) timeSlice(m *gpu.Model) {
	if d.Method == MPS {
		d.Risks = slices.DeleteFunc(d.Risks, func(r Risk) bool { return r == MPSFaultDomain })
	}
	d.Method, d.clients = TimeSlicing, 0
	d.After = After{Resource: "nvidia.com/gpu.shared", Count: 1, GPUModel: m.Name, VRAMLimit: d.VRAMNeed}
	d.addRisks(SharedVRAM)
}

// maxMPSClients is the most MPS clients one GPU serves.
const maxMPSClients = 48

// chooseMPS sizes MPS clients: as many as the memory limit (GPU memory /
// clients) and the compute needs allow, at most 48, at least 2.
func (d *Decision) chooseMPS(m *gpu.Model) bool {
	c := min(maxMPSClients, int(m.Usable/d.VRAMNeed))
	if d.ComputeNeed > 0 {
		c = min(c, int(1/d.ComputeNeed))
	}
	if c < 2 {
		return false
	}
	d.clients, d.Method = c, MPS
	d.After = After{Resource: "nvidia.com/gpu.shared", Count: 1, GPUModel: m.Name, VRAMLimit: m.Usable / gpu.MiB(c)}
	return true
}
