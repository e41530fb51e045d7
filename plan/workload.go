package plan

import (
	"fmt"
	"math"
	"strings"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/usage"
	"github.com/gpupack/gpupack/vram"
)

// Role is what a workload does, which decides how it may share.
type Role string

// The roles the planner tells apart.
const (
	Inference   Role = "inference"   // serves requests
	Training    Role = "training"    // trains or fine-tunes; kept whole unless usage proves otherwise
	Interactive Role = "interactive" // notebooks and development
	Batch       Role = "batch"       // other Jobs
	Unknown     Role = "unknown"
)

// The pod labels the planner reads. Owner labels are tried in order; a
// pod with none of them is grouped by its pod-template-hash (Deployments)
// or stands alone.
var (
	ownerLabels     = []string{"app.kubernetes.io/name", "app", "batch.kubernetes.io/job-name", "job-name"}
	jobLabels       = []string{"batch.kubernetes.io/job-name", "job-name"}
	componentLabels = []string{wellknown.LabelRole, "app.kubernetes.io/component"}
	environLabels   = []string{"environment", "env"}
)

// Workload is the GPU pods of one owner (Deployment, StatefulSet, Job...),
// as read from the pods' labels.
type Workload struct {
	Key       string // namespace/owner
	Namespace string
	Owner     string
	Tenant    string
	Role      Role
	// Job is true for pods of a Job: interruptible, so spot capacity suits
	// them unless they serve production.
	Job        bool
	Production bool
	// Isolation is the strictest isolation class among the pods.
	Isolation cluster.Isolation
	Pods      []*cluster.Pod
	// Request is the largest GPU request among the pods.
	Request cluster.Request
	// Observed aggregates the pods' usage facts: the largest VRAM p95,
	// the mean activity and idle-held share of the measured pods; Measured
	// counts the pods with any facts. A pod that shared a GPU is credited
	// its share (usage.PodFacts.OwnShare) of the VRAM p95 and activity,
	// which DCGM reports for the whole GPU: all of them where gpupack
	// agent measured them per process.
	Observed usage.PodFacts
	Measured int
	// SharedGPUPods is the most pods, one of its own included, that held
	// one of its pods' GPUs at the same time; 0 when each held its GPUs
	// alone.
	SharedGPUPods int
	// SharedEvenSplit is true when a pod that shared a GPU was measured
	// without gpupack agent's per-pod figures (usage.PodFacts.PerProcess):
	// its VRAM and activity are an equal share of the GPU's.
	SharedEvenSplit bool
	// OnSharedGPU is true when one of its pods is bound to a time-sliced,
	// MPS or fractional GPU: kept whole, it would leave that GPU.
	OnSharedGPU bool
	// HourlyBusyPods counts, per hour of the window, the pods at least
	// busyActivity active in that hour; nil when no pod has hourly data.
	HourlyBusyPods []int
	// Engine is the engine of its pods that takes a share of each GPU's
	// memory at start-up (cluster.Pod.Engine); nil when none does.
	Engine *vram.Preallocation
	// modelFacts gives the usage facts' model of a pod, nil when they
	// name none.
	modelFacts func(key string) *vram.ModelSpec
	// unaligned says why the proof found no node where its MIG share
	// sits with the other driver's devices its claim aligns its GPU with
	// (checkAlignment); the plan then keeps its GPUs.
	unaligned string
}

// busyActivity is the activity from which a pod counts as busy in an hour.
const busyActivity = 0.05

// Workloads groups the snapshot's GPU pods by owner, in the order their
// first pods appear.
func Workloads(s *cluster.Snapshot, u *usage.Facts) []*Workload {
	byKey := map[string]*Workload{}
	var out []*Workload
	for _, p := range s.Pods {
		if !p.WantsGPU() {
			continue
		}
		owner := ownerOf(p)
		key := WorkloadKey(p)
		w, ok := byKey[key]
		if !ok {
			w = &Workload{Key: key, Namespace: p.Namespace, Owner: owner, Tenant: p.TenantName(), Role: roleOf(p, owner)}
			byKey[key] = w
			out = append(out, w)
		}
		w.Pods = append(w.Pods, p)
		w.Job = w.Job || firstLabel(p, jobLabels) != ""
		w.Production = w.Production || isProduction(firstLabel(p, environLabels))
		w.Isolation = max(w.Isolation, p.Isolation)
		w.OnSharedGPU = w.OnSharedGPU || onSharedGPU(s, p)
		if p.GPU.Kind == cluster.WholeGPUs && p.GPU.Count > w.Request.Count || w.Request.Kind == cluster.NoGPU {
			w.Request = p.GPU
		}
	}
	for _, w := range out {
		if w.Role == Unknown && w.Job {
			w.Role = Batch
		}
		w.aggregate(u)
		w.Engine = w.engineOf()
		w.modelFacts = func(key string) *vram.ModelSpec {
			if u == nil {
				return nil
			}
			return u.Pods[key].Model
		}
	}
	return out
}

// onSharedGPU says whether the pod is bound to a GPU that other pods may
// hold at the same time (time slices, MPS clients, fractions).
func onSharedGPU(s *cluster.Snapshot, p *cluster.Pod) bool {
	n, ok := s.Node(p.NodeName)
	if !ok {
		return false
	}
	for _, d := range p.Devices {
		if d.GPU < 0 || d.GPU >= len(n.GPUs) {
			continue
		}
		switch n.GPUs[d.GPU].Sharing {
		case cluster.TimeSliced, cluster.MPS, cluster.Fractional:
			return true
		}
	}
	return false
}

func (w *Workload) aggregate(u *usage.Facts) {
	if u == nil {
		return
	}
	var active, idle float64
	nActive, nIdle := 0, 0
	patterns := map[usage.PatternName]int{}
	for _, p := range w.Pods {
		o, ok := u.Pods[p.Key()]
		if !ok {
			continue
		}
		w.Measured++
		own := o.OwnShare()
		if len(o.SharedWith) > 0 {
			w.SharedGPUPods = max(w.SharedGPUPods, 1+len(o.SharedWith))
			w.SharedEvenSplit = w.SharedEvenSplit || !o.PerProcess
		}
		w.Observed.VRAMUsedP95 = max(w.Observed.VRAMUsedP95, gpu.MiB(math.Ceil(float64(o.VRAMUsedP95)*own)))
		if o.Measured {
			active += o.ActiveRatio * own
			nActive++
			patterns[o.Pattern]++
		}
		if o.IdleHeldMeasured {
			idle += o.IdleHeldRatio
			nIdle++
		}
		for i, a := range o.HourlyActivity {
			h := o.FirstHour + i
			for h >= len(w.HourlyBusyPods) {
				w.HourlyBusyPods = append(w.HourlyBusyPods, 0)
			}
			if a >= busyActivity {
				w.HourlyBusyPods[h]++
			}
		}
	}
	if nActive > 0 {
		w.Observed.Measured, w.Observed.ActiveRatio = true, active/float64(nActive)
		// The workload's pattern is its pods' most common one.
		best := 0
		for _, q := range []usage.PatternName{usage.Busy, usage.MemoryBound, usage.FlatLow, usage.Bursty, usage.IdleHeld} {
			if patterns[q] > best {
				w.Observed.Pattern, best = q, patterns[q]
			}
		}
	}
	if nIdle > 0 {
		w.Observed.IdleHeldMeasured, w.Observed.IdleHeldRatio = true, idle/float64(nIdle)
	}
}

// WorkloadKey is the key ("namespace/owner") of the workload a pod belongs
// to, as Workloads groups pods and workload-requests.yaml names them. The
// admission webhook uses it to find a new pod's planned request.
func WorkloadKey(p *cluster.Pod) string {
	return p.Namespace + "/" + ownerOf(p)
}

func ownerOf(p *cluster.Pod) string {
	if o := firstLabel(p, ownerLabels); o != "" {
		return o
	}
	if hash := p.Labels["pod-template-hash"]; hash != "" {
		if i := strings.Index(p.Name, "-"+hash); i > 0 {
			return p.Name[:i]
		}
	}
	return p.Name
}

func firstLabel(p *cluster.Pod, keys []string) string {
	for _, k := range keys {
		if v := p.Labels[k]; v != "" {
			return v
		}
	}
	return ""
}

func isProduction(env string) bool {
	switch strings.ToLower(env) {
	case "prod", "production":
		return true
	}
	return false
}

// roleOf reads the role from a component label, else from the owner's
// name: notebooks and trainers name themselves so.
func roleOf(p *cluster.Pod, owner string) Role {
	words := strings.ToLower(firstLabel(p, componentLabels))
	if words == "" {
		words = strings.ToLower(owner)
	}
	for _, r := range []struct {
		role  Role
		words []string
	}{
		{Interactive, []string{"notebook", "jupyter", "dev", "interactive"}},
		{Training, []string{"train", "finetune", "fine-tune", "sweep"}},
		{Inference, []string{"inference", "serving", "server", "serve", "api", "predictor", "infer"}},
	} {
		for _, word := range r.words {
			if strings.Contains(words, word) {
				return r.role
			}
		}
	}
	return Unknown
}

// alignment is a claim of a workload's pods whose matchAttribute
// constraint covers a GPU request and requests of another driver's
// devices (a NIC on the GPU's NUMA node).
type alignment struct {
	claim      *cluster.Claim
	constraint *cluster.ClaimConstraint
	// others are the constraint's requests of the other driver, as the
	// claim has them.
	others []cluster.ClaimRequest
}

// aligned finds the workload's first claim that aligns its GPU with
// another driver's devices; nil when none does.
func (w *Workload) aligned() *alignment {
	for _, p := range w.Pods {
		for i := range p.Claims {
			c := &p.Claims[i]
			for j := range c.Constraints {
				k := &c.Constraints[j]
				if k.MatchAttribute == "" {
					continue
				}
				a := &alignment{claim: c, constraint: k}
				for _, r := range c.Requests {
					if r.OthersRead && k.Applies(r.Name) {
						a.others = append(a.others, r)
					}
				}
				if len(a.others) > 0 {
					return a
				}
			}
		}
	}
	return nil
}

// String says which claim keeps the GPU with which request, on what.
func (a *alignment) String() string {
	return fmt.Sprintf("its claim %s keeps its GPU with request %s of another driver's devices on one %s", a.claim.Ref(), a.others[0].Name, a.constraint.MatchAttribute)
}
