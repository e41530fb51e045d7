package plan

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/gpupack/gpupack/api/gpuoperator"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
	"github.com/gpupack/gpupack/sim"
	"github.com/gpupack/gpupack/usage"
)

// Options tune the plan.
type Options struct {
	// ReclaimIdleRatio is the share of the window a workload must be
	// idle-held to be reclaimed, 0..1.
	ReclaimIdleRatio float64
	// Headroom is added to measured VRAM p95 and activity when sizing a
	// share: 0.2 sizes for 120% of what was seen.
	Headroom float64
	// Autoscaling names the application metrics that scale inference
	// workloads and the node class of the NodePools; nil scales no
	// workload and emits NodePools of the default node class.
	Autoscaling *AutoscalingInput
	// ReserveDiscount is the discount, 0..1, that committed capacity (a
	// reservation or savings plan) gets off the catalogue price;
	// SpotDiscount the discount of spot capacity. They price the
	// reservation baseline and the spot candidates.
	ReserveDiscount float64
	SpotDiscount    float64
}

// The default discounts: about what a one-year GPU commitment and spot
// capacity get off on-demand prices at the large clouds. Give your own.
const (
	DefaultReserveDiscount = 0.3
	DefaultSpotDiscount    = 0.6
)

// DefaultOptions reclaims workloads idle-held 80% of the window, sizes
// shares with 20% headroom and prices commitments at 30% and spot at 60%
// off.
func DefaultOptions() Options {
	return Options{ReclaimIdleRatio: 0.8, Headroom: 0.2, ReserveDiscount: DefaultReserveDiscount, SpotDiscount: DefaultSpotDiscount}
}

// Validate checks the options' ranges.
func (o Options) Validate() error {
	if math.IsNaN(o.ReclaimIdleRatio) || o.ReclaimIdleRatio <= 0 || o.ReclaimIdleRatio > 1 {
		return fmt.Errorf("reclaim threshold %v: want a ratio in (0, 1], such as 0.8", o.ReclaimIdleRatio)
	}
	if math.IsNaN(o.Headroom) || o.Headroom < 0 || o.Headroom > 4 {
		return fmt.Errorf("headroom %v: want a ratio in [0, 4], such as 0.2", o.Headroom)
	}
	for _, d := range []struct {
		name    string
		v       float64
		example float64
	}{{"reserve discount", o.ReserveDiscount, DefaultReserveDiscount}, {"spot discount", o.SpotDiscount, DefaultSpotDiscount}} {
		if math.IsNaN(d.v) || d.v < 0 || d.v >= 1 {
			return fmt.Errorf("%s %v: want a ratio in [0, 1), such as %v for %v%% off", d.name, d.v, d.example, d.example*100)
		}
	}
	return nil
}

// HoursPerMonth prices a month: 8,760 hours a year over 12.
const HoursPerMonth = 730

// ProofPolicy is the placement policy the proof replays with: best fit
// packs pods onto the fewest nodes, which is what frees them.
const ProofPolicy = "bestfit"

// Plan is the whole plan: decisions, pool layouts, node changes, proof.
type Plan struct {
	Window       time.Duration `json:"window"`
	Decisions    []*Decision   `json:"workloads"`
	Pools        []PoolPlan    `json:"pools"`
	Nodes        []NodeChange  `json:"nodes"`
	Proof        Proof         `json:"proof"`
	Reservations []Reservation `json:"reservations"`
	Spot         []string      `json:"spot"`
	// SpotCandidates are the spot workloads with what spot would save.
	SpotCandidates []SpotCandidate `json:"spotCandidates"`
	Warnings       []string        `json:"warnings"`
	// UnknownModels are the cluster's GPU models the catalogue does not
	// describe in full (cluster.Snapshot.UnknownModels): the proof's
	// saving leaves out the GPUs of unpriced ones, and MIG is not planned
	// on unlisted ones.
	UnknownModels []cluster.UnknownModel `json:"unknownModels,omitempty"`
	// DevicePlugin and MIGParted are the configurations, by name.
	DevicePlugin map[string]DevicePluginConfig `json:"devicePluginConfigs"`
	MIGParted    map[string][]MIGDeviceConfig  `json:"migConfigs"`
	// DRA is what the plan applies to pools whose GPUs are offered through
	// DRA; nil when there are none.
	DRA *DRAPlan `json:"dra,omitempty"`
	// TaintRules are DeviceTaintRules that keep new claims off the DRA
	// GPUs that reported an XID error marking them unhealthy (Tainted
	// names them).
	TaintRules []DeviceTaintRule `json:"deviceTaintRules,omitempty"`
	Tainted    []TaintedGPU      `json:"taintedGPUs,omitempty"`
	// Autoscaling is the KEDA ScaledObjects and Karpenter NodePools that
	// fit the plan.
	Autoscaling *Autoscaling `json:"autoscaling"`
	// gpusAfter are the GPUs of each changed node as its configs leave
	// them, by node name.
	gpusAfter map[string][]cluster.GPU
}

// GPUsAfter returns the GPUs of a node that the plan changes as its new
// configs leave them (MIG layouts, time slices, MPS clients); ok is false
// for a node the plan leaves as it is. It is known only for a plan made in
// this process (Make), not for one read back from JSON.
func (pl *Plan) GPUsAfter(node string) (gpus []cluster.GPU, ok bool) {
	gpus, ok = pl.gpusAfter[node]
	return gpus, ok
}

// PoolPlan is what the plan puts on one node pool.
type PoolPlan struct {
	Name          string `json:"name"`
	Model         string `json:"model"`
	Nodes         int    `json:"nodes"`
	GPUs          int    `json:"gpus"`
	Changed       bool   `json:"changed"`
	MIGGPUs       int    `json:"migGPUs"`
	MIGLowerBound int    `json:"migLowerBound"`
	MIGAreaBound  int    `json:"migAreaBound"`
	MIGFirstFit   int    `json:"migFirstFitDecreasing"`
	MIGOptimal    bool   `json:"migOptimal"`
	// TimeSlicingGPUs and MPSGPUs are the GPUs the configs share: every
	// GPU of the TimeSlicingNodes and MPSNodes, since the device plugin
	// shares all GPUs of a node it configures. The ...Needed counts are
	// the GPUs of shares the workloads were sized into.
	TimeSlicingNodes      int `json:"timeSlicingNodes"`
	TimeSlicingGPUs       int `json:"timeSlicingGPUs"`
	TimeSlicingGPUsNeeded int `json:"timeSlicingGPUsNeeded"`
	TimeSlicingReplicas   int `json:"timeSlicingReplicas"`
	MPSNodes              int `json:"mpsNodes"`
	MPSGPUs               int `json:"mpsGPUs"`
	MPSGPUsNeeded         int `json:"mpsGPUsNeeded"`
	MPSClients            int `json:"mpsClients"`
	// WholeGPUs is the whole GPUs the pool's kept workloads ask for.
	WholeGPUs int `json:"wholeGPUs"`
}

// NodeChange is the configuration one node gets, and the labels that
// select it.
type NodeChange struct {
	Node   string            `json:"node"`
	Pool   string            `json:"pool"`
	Role   Method            `json:"role"`
	Labels map[string]string `json:"labels"`
	// Layouts are the MIG layouts of its GPUs ("" for a GPU without MIG).
	Layouts []string `json:"migLayouts,omitempty"`
}

// Proof is the replay of the changed cluster through the simulator's
// placement step.
type Proof struct {
	Policy        string   `json:"policy"`
	GPUsBefore    int      `json:"gpusInUseBefore"`
	GPUsAfter     int      `json:"gpusInUseAfter"`
	GPUsFreed     int      `json:"gpusFreed"`
	NodesBefore   int      `json:"nodesInUseBefore"`
	NodesAfter    int      `json:"nodesInUseAfter"`
	NodesFreed    []string `json:"nodesFreed"`
	GPUsOnFreed   int      `json:"gpusOnFreedNodes"`
	MonthlySaving float64  `json:"monthlySaving"`
	Currency      string   `json:"currency"`
	PendingBefore int      `json:"pendingGPUPodsBefore"`
	PendingAfter  int      `json:"pendingGPUPodsAfter"`
	StillPending  []string `json:"stillPending"`
	Unplaceable   []string `json:"unplaceable"`
	// Risks counts the workloads that carry each risk after the change.
	Risks map[Risk]int `json:"risks"`
	// placed is the node each moved pod was placed on, by pod key;
	// gpuOf the index of the GPU it got there (of its first device).
	placed map[string]string
	gpuOf  map[string]int
}

// PlacedOn is the node the proof placed a moved pod on: every pod of a
// changed node and every pending pod it found room for. ok is false for a
// pod the proof did not move or left pending.
func (pr *Proof) PlacedOn(key cluster.PodKey) (node string, ok bool) {
	node, ok = pr.placed[key.String()]
	return node, ok
}

// ReserveQuantile is the share of the window's hours in which a level of
// GPUs must have held for the plan to advise committing to it: the level
// held in at least 99% of the hours (all but one in a week).
const ReserveQuantile = 0.99

// Reservation is the baseline worth committing to for one GPU model: the
// GPUs busy after the plan in (nearly) every hour of the window, what the
// commitment saves, and what it costs if usage falls.
type Reservation struct {
	Model string `json:"model"`
	// BaselineGPUs is the level of GPUs busy after the plan (shares
	// counted as their fraction of a GPU; in no hour more than usage
	// measured allocated in it, where it did) held in at least Quantile of
	// the hours, LevelGPUs, rounded down.
	BaselineGPUs int     `json:"baselineGPUs"`
	LevelGPUs    float64 `json:"levelGPUs"`
	Quantile     float64 `json:"quantile"`
	// MinGPUs is the fewest busy after the plan in any hour; PeakGPUs the
	// most.
	MinGPUs   float64 `json:"minGPUs"`
	PeakGPUs  float64 `json:"peakGPUs"`
	Hours     int     `json:"hours"`
	Workloads int     `json:"workloadsWithHourlyData"`
	Without   int     `json:"workloadsWithout"`
	// Measured is the model's use before the plan as usage measured it
	// per hour (usage.Facts.Hourly); nil when not measured.
	Measured *MeasuredLevels `json:"measured,omitempty"`
	// Priced says whether the catalogue prices the model; the money
	// figures are per month (HoursPerMonth) in the proof's currency.
	Priced       bool    `json:"priced"`
	PricePerHour float64 `json:"pricePerHour"`
	Discount     float64 `json:"discount"`
	// SavingPerMonth is what committing to BaselineGPUs saves over paying
	// the catalogue price for them.
	SavingPerMonth float64 `json:"savingPerMonth"`
	// RiskPerMonth is what the commitment costs without use if usage falls
	// to the window's minimum (MinGPUs): the committed GPUs above it, at
	// the committed price.
	RiskPerMonth float64 `json:"riskPerMonth"`
}

// MeasuredLevels are a model's GPUs allocated and active per hour before
// the plan, each the level held in at least the reservation's quantile of
// the hours, and the fewest allocated in any hour.
type MeasuredLevels struct {
	AllocatedGPUs    float64 `json:"allocatedGPUs"`
	ActiveGPUs       float64 `json:"activeGPUs"`
	MinAllocatedGPUs float64 `json:"minAllocatedGPUs"`
}

// SpotCandidate is a workload whose history says it tolerates
// interruption, with what spot capacity would save.
type SpotCandidate struct {
	Workload string `json:"workload"`
	Model    string `json:"model,omitempty"`
	// Why says what shows it tolerates interruption.
	Why string `json:"why"`
	// GPUs is the mean GPUs it keeps busy after the plan over the window
	// (from its pods' hourly activity; all its pods' GPUs when that was
	// not measured).
	GPUs float64 `json:"gpus"`
	// Measured says whether GPUs comes from hourly activity.
	Measured       bool    `json:"measured"`
	Priced         bool    `json:"priced"`
	Discount       float64 `json:"discount"`
	SavingPerMonth float64 `json:"savingPerMonth"`
}

// LevelHeld is the highest level that the hourly figures reach or exceed
// in at least share q of the hours: the floor((1-q)*n)-th smallest; 0 for
// no hours.
func LevelHeld(hourly []float64, q float64) float64 {
	if len(hourly) == 0 {
		return 0
	}
	v := slices.Sorted(slices.Values(hourly))
	k := int(math.Floor((1-q)*float64(len(v)) + 1e-9))
	return v[min(k, len(v)-1)]
}

// Make plans the snapshot with the usage (nil when none was measured).
func Make(ctx context.Context, s *cluster.Snapshot, u *usage.Facts, o Options) (*Plan, error) {
	unaligned := map[string]string{}
	for {
		pl, err := makeOnce(ctx, s, u, o, unaligned)
		if err != nil {
			return nil, err
		}
		lost := pl.unalignedShares(s)
		if len(lost) == 0 {
			return pl, nil
		}
		// Keep those workloads' GPUs and plan again: each round keeps
		// at least one more, so it ends.
		maps.Copy(unaligned, lost)
	}
}

// makeOnce is Make with the aligned workloads whose MIG share the proof
// placed away from their other driver's devices kept whole (unaligned,
// why by workload).
func makeOnce(ctx context.Context, s *cluster.Snapshot, u *usage.Facts, o Options, unaligned map[string]string) (*Plan, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	// Figures drawn from a node that holds more than it has are wrong.
	if err := placement.CheckBound(s); err != nil {
		return nil, err
	}
	if err := checkMeasured(s, u); err != nil {
		return nil, err
	}
	pl := &Plan{DevicePlugin: map[string]DevicePluginConfig{}, MIGParted: map[string][]MIGDeviceConfig{}}
	if u != nil {
		pl.Window = u.Window
	}
	ps, poolOf, warnings := pools(s)
	pl.Warnings = append(warnings, partitionableWarnings(s)...)
	pl.UnknownModels = s.UnknownModels()
	var largest gpu.MiB
	for _, n := range s.Nodes {
		for _, g := range n.GPUs {
			largest = max(largest, g.Memory)
		}
	}
	workloads := Workloads(s, u)
	for _, w := range workloads {
		w.unaligned = unaligned[w.Key]
	}
	// Shareable pods per tenant and pool, to spot tenants alone.
	tenantPods := map[string]int{}
	targetOf := func(w *Workload) *pool {
		for _, p := range w.Pods {
			if i, ok := s.NodeIndex(p.NodeName); ok && p.Bound() {
				return poolOf[i]
			}
		}
		return nil
	}
	for _, w := range workloads {
		if p := targetOf(w); p != nil {
			tenantPods[p.name+"/"+w.Tenant] += len(w.Pods)
		}
	}
	window := pl.Window.Hours()
	for _, w := range workloads {
		p := targetOf(w)
		lone := func(w *Workload) bool { return tenantPods[p.name+"/"+w.Tenant] < 2 }
		d := decide(w, p, largest, o, window, lone)
		pl.Decisions = append(pl.Decisions, d)
		if p != nil && !p.conflict {
			p.decisions = append(p.decisions, d)
		}
		if d.Spot {
			pl.Spot = append(pl.Spot, d.Workload)
		}
	}
	newGPUs := map[int][]cluster.GPU{}
	for _, p := range ps {
		pp, err := p.size(s, newGPUs, pl)
		if err != nil {
			return nil, err
		}
		pl.Pools = append(pl.Pools, pp)
	}
	pl.fitEngines(s.Catalogue)
	if err := pl.prove(ctx, s, poolOf, newGPUs); err != nil {
		return nil, err
	}
	pl.gpusAfter = make(map[string][]cluster.GPU, len(newGPUs))
	for i, g := range newGPUs {
		pl.gpusAfter[s.Nodes[i].Name] = g
	}
	pl.reserve(u, o)
	pl.spot(o)
	pl.taintUnhealthy(s, u)
	if err := pl.autoscale(s, ps, o); err != nil {
		return nil, err
	}
	return pl, nil
}

// checkMeasured refuses usage that says a running pod used more VRAM than
// the GPUs it holds have: no sizing can be drawn from it.
func checkMeasured(s *cluster.Snapshot, u *usage.Facts) error {
	if u == nil {
		return nil
	}
	for _, p := range s.Pods {
		o, ok := u.Pods[p.Key()]
		n, bound := s.Node(p.NodeName)
		if !ok || !bound || !p.WantsGPU() || o.VRAMUsedP95 == 0 || len(n.GPUs) == 0 {
			continue
		}
		var per gpu.MiB
		for _, g := range n.GPUs {
			per = max(per, g.Memory, g.Model.Usable)
		}
		held, what := per, fmt.Sprintf("its share of a %s", n.GPUs[0].Model.Name)
		switch p.GPU.Kind {
		case cluster.WholeGPUs:
			held = per * gpu.MiB(max(1, p.GPU.Count))
			what = fmt.Sprintf("its %d x %s", max(1, p.GPU.Count), n.GPUs[0].Model.Name)
		case cluster.MIGSlice:
			if m := migMemoryOf(s.Catalogue, p.GPU.Profile); m > 0 {
				held, what = m, "its MIG slice "+p.GPU.Profile
			}
		}
		if o.VRAMUsedP95 > held {
			return fmt.Errorf("usage of pod %s: VRAM p95 %s is more than the %s that %s on node %s has; a pod cannot use more than it holds: measure it again", p.Key(), o.VRAMUsedP95, held, what, n.Name)
		}
	}
	return nil
}

// shared is the sizing of one pool's time slices and MPS clients.
type sharedBin struct {
	vram    gpu.MiB
	compute float64
	pods    int
}

// size lays the pool's shared workloads out on its nodes and records the
// node configurations.
func (p *pool) size(s *cluster.Snapshot, newGPUs map[int][]cluster.GPU, pl *Plan) (PoolPlan, error) {
	pp := PoolPlan{Name: p.name, Model: p.model.Name, Nodes: len(p.nodes)}
	hadShared := false
	for _, i := range p.nodes {
		pp.GPUs += len(s.Nodes[i].GPUs)
		for _, g := range s.Nodes[i].GPUs {
			hadShared = hadShared || g.Sharing != cluster.Exclusive
		}
	}
	migProfiles, tsBins, mpsPods, clients := p.sharedDemand(&pp)
	pp.Changed = len(migProfiles) > 0 || len(tsBins) > 0 || len(mpsPods) > 0 || hadShared
	if !pp.Changed {
		p.warnWholeShort(pp, s, nil, pl)
		return pp, nil
	}
	packing, err := p.sizeShared(&pp, migProfiles, tsBins, mpsPods, clients)
	if err != nil {
		return pp, err
	}
	l := poolLayout{p: p, s: s, pl: pl, pp: &pp, packing: packing,
		configs:     map[Method]string{Whole: gpuoperator.ConfigName(p.name, "exclusive"), MIG: gpuoperator.ConfigName(p.name, "mig"), TimeSlicing: gpuoperator.ConfigName(p.name, "time-slicing"), MPS: gpuoperator.ConfigName(p.name, "mps")},
		draSelector: p.draSelector(s),
		draLeft:     map[Method]int{TimeSlicing: pp.TimeSlicingGPUsNeeded, MPS: pp.MPSGPUsNeeded}}
	role := p.nodeRoles(s, &pp, pl)
	for _, i := range p.nodes {
		m, ok := role[i]
		if !ok {
			m = Whole
		}
		newGPUs[i] = l.node(s.Nodes[i], m)
	}
	p.warnWholeShort(pp, s, newGPUs, pl)
	if p.dra && (l.nextLayout < len(packing.Layouts) || l.draLeft[TimeSlicing] > 0 || l.draLeft[MPS] > 0) {
		pl.Warnings = append(pl.Warnings, fmt.Sprintf("pool %s: %d MIG, %d time-sliced and %d MPS GPUs did not fit its GPUs; the proof shows what stays pending", p.name, len(packing.Layouts)-l.nextLayout, l.draLeft[TimeSlicing], l.draLeft[MPS]))
	}
	// Time slices and MPS clients are both offered as nvidia.com/gpu.shared
	// (the plugin renames no resource otherwise), and MIG profiles of one
	// name exist in several pools, so a rewritten request also selects the
	// nodes of its own config.
	for _, d := range p.decisions {
		if d.Action != Keep && d.Action != Unplaceable && d.Method != Whole {
			d.After.NodeSelector = map[string]string{DevicePluginConfigLabel: l.configs[d.Method]}
			if p.dra {
				d.After.NodeSelector = maps.Clone(l.draSelector)
			}
		}
	}
	if p.dra {
		if err := pl.addClaims(p, pp, s); err != nil {
			return pp, err
		}
	}
	return pp, nil
}

// warnWholeShort warns when the pool's kept workloads ask for more whole
// GPUs than its nodes offer whole after the plan (newGPUs, or as they are
// when nil): the plan cannot give them, and the proof shows who waits.
func (p *pool) warnWholeShort(pp PoolPlan, s *cluster.Snapshot, newGPUs map[int][]cluster.GPU, pl *Plan) {
	whole := 0
	for _, i := range p.nodes {
		gpus := s.Nodes[i].GPUs
		if newGPUs != nil {
			gpus = newGPUs[i]
		}
		for _, g := range gpus {
			if g.Sharing == cluster.Exclusive {
				whole++
			}
		}
	}
	if pp.WholeGPUs > whole {
		pl.Warnings = append(pl.Warnings, fmt.Sprintf("pool %s: its kept workloads ask for %d whole GPUs, and after the plan it offers %d whole of its %s; the proof shows what stays pending", p.name, pp.WholeGPUs, whole, gpusText(pp.GPUs)))
	}
}

// sharedDemand tallies the pool's shared workloads (as tally does) once
// the node configurations they need are settled. The device plugin takes
// one config per node, so time slices and MPS clients never share a node.
// When the pool is short of nodes, MPS workloads move to time slices,
// which then share nodes with the rest; in a DRA pool, the workloads a
// claim cannot share stay whole (keepUnclaimable).
func (p *pool) sharedDemand(pp *PoolPlan) ([]string, map[string][]sharedBin, map[*Decision]int, int) {
	migProfiles, tsBins, mpsPods, clients := p.tally(pp)
	if len(mpsPods) > 0 && p.nodesNeeded(migProfiles, tsBins, mpsPods, clients, pp.WholeGPUs) > len(p.nodes) {
		for d := range mpsPods {
			d.timeSlice(p.model)
			d.Reason.Detail += "; time slices rather than MPS, which would need a node of its own in this pool"
		}
		migProfiles, tsBins, mpsPods, clients = p.tally(pp)
	}
	if p.dra && p.keepUnclaimable(tsBins) {
		migProfiles, tsBins, mpsPods, clients = p.tally(pp)
	}
	return migProfiles, tsBins, mpsPods, clients
}

// sizeShared packs the MIG instances onto GPUs and counts the time-sliced
// and MPS GPUs the workloads need, with their replicas and clients, in pp;
// it sets each MPS workload's VRAM limit.
func (p *pool) sizeShared(pp *PoolPlan, migProfiles []string, tsBins map[string][]sharedBin, mpsPods map[*Decision]int, clients int) (MIGPacking, error) {
	var packing MIGPacking
	if len(migProfiles) > 0 {
		var err error
		if packing, err = PackMIG(p.model.MIG, migProfiles); err != nil {
			return packing, fmt.Errorf("pool %s: %w", p.name, err)
		}
		pp.MIGGPUs, pp.MIGLowerBound, pp.MIGAreaBound, pp.MIGFirstFit, pp.MIGOptimal = len(packing.Layouts), packing.LowerBound, packing.AreaBound, packing.FirstFitDecreasing, packing.Optimal
	}
	for _, t := range slices.Sorted(maps.Keys(tsBins)) {
		for _, b := range tsBins[t] {
			pp.TimeSlicingGPUsNeeded++
			pp.TimeSlicingReplicas = max(pp.TimeSlicingReplicas, b.pods, 2)
		}
	}
	for d, n := range mpsPods {
		pp.MPSGPUsNeeded += ceilDiv(n, clients)
		d.After.VRAMLimit = p.model.Usable / gpu.MiB(clients)
	}
	pp.MPSClients = clients
	return packing, nil
}

// nodeRoles gives nodes their roles (MIG, time-slicing, MPS; the rest stay
// whole), preferring nodes already in that mode, and warns where the pool
// has too few. A DRA pool shares GPUs, not nodes: its nodes get none (see
// poolLayout.gpuMethod).
func (p *pool) nodeRoles(s *cluster.Snapshot, pp *PoolPlan, pl *Plan) map[int]Method {
	per := max(1, p.perNode)
	need := map[Method]int{MIG: ceilDiv(pp.MIGGPUs, per), TimeSlicing: ceilDiv(pp.TimeSlicingGPUsNeeded, per), MPS: ceilDiv(pp.MPSGPUsNeeded, per)}
	modeOf := map[Method]cluster.Sharing{MIG: cluster.MIG, TimeSlicing: cluster.TimeSliced, MPS: cluster.MPS}
	free := append([]int(nil), p.nodes...)
	role := map[int]Method{}
	for _, m := range []Method{MIG, TimeSlicing, MPS} {
		if p.dra {
			break // a DRA pool shares GPUs, not nodes: see gpuMethod
		}
		sort.SliceStable(free, func(a, b int) bool {
			return s.Nodes[free[a]].GPUs[0].Sharing == modeOf[m] && s.Nodes[free[b]].GPUs[0].Sharing != modeOf[m]
		})
		k := min(need[m], len(free))
		for _, i := range free[:k] {
			role[i] = m
		}
		free = free[k:]
		if k < need[m] {
			pl.Warnings = append(pl.Warnings, fmt.Sprintf("pool %s: %d nodes needed for %s, %d left; the proof shows what stays pending", p.name, need[m], m, k))
		}
	}
	return role
}

// poolLayout configures a sized pool's nodes one by one: their GPUs, the
// labels that select their configs, their MIG configs and the device
// plugin's.
type poolLayout struct {
	p       *pool
	s       *cluster.Snapshot
	pl      *Plan
	pp      *PoolPlan
	packing MIGPacking
	// configs names the device plugin's config of each method.
	configs     map[Method]string
	draSelector map[string]string
	// A claim shares one GPU, not a node: a DRA pool's GPUs take, in
	// order, the MIG layouts, the time-sliced and the MPS GPUs the
	// workloads were sized into, and the rest stay whole. nextLayout is
	// the next MIG layout to give, draLeft the shared GPUs left to give.
	draLeft    map[Method]int
	nextLayout int
}

// gpuMethod is how the next GPU of a node of the role node is shared.
func (l *poolLayout) gpuMethod(node Method) Method {
	switch {
	case !l.p.dra:
		return node
	case l.nextLayout < len(l.packing.Layouts):
		return MIG
	case l.draLeft[TimeSlicing] > 0:
		return TimeSlicing
	case l.draLeft[MPS] > 0:
		return MPS
	}
	return Whole
}

// node configures a node of the role m and gives its GPUs as the plan
// leaves them.
func (l *poolLayout) node(n *cluster.Node, m Method) []cluster.GPU {
	p, pl := l.p, l.pl
	if p.dra {
		m = l.gpuMethod(Whole) // the node's first shared GPU names its role
	}
	nc := NodeChange{Node: n.Name, Pool: p.name, Role: m, Labels: map[string]string{DevicePluginConfigLabel: l.configs[m]}}
	if p.dra {
		// The DRA driver shares by claim, not by node config: a DRA
		// node gets the label its pool's claims select it by (when
		// it lacks it) and, below, its MIG layout.
		nc.Labels = map[string]string{}
		for k, v := range l.draSelector {
			if n.Labels[k] != v {
				nc.Labels[k] = v
			}
		}
	}
	gpus, groups := l.gpus(n, m, &nc)
	l.pp.countShared(gpus)
	if p.model.MIG != nil {
		name := MIGDisabled
		if m == MIG {
			name = pl.addMIGConfig(p.name, groups)
		} else {
			pl.MIGParted[MIGDisabled] = []MIGDeviceConfig{{Devices: "all", MIGEnabled: false}}
		}
		nc.Labels[MIGConfigLabel] = name
	}
	if !p.dra {
		pl.DevicePlugin[l.configs[m]] = devicePluginConfig(m, *l.pp)
	}
	pl.Nodes = append(pl.Nodes, nc)
	return gpus
}

// gpus shares the GPUs of a node of the role m as the pool was sized,
// adding the MIG layouts of a MIG node to nc; it gives the GPUs and, for a
// MIG-capable model, the MIG config's device groups.
func (l *poolLayout) gpus(n *cluster.Node, m Method, nc *NodeChange) ([]cluster.GPU, []MIGDeviceConfig) {
	gpus := make([]cluster.GPU, len(n.GPUs))
	var groups []MIGDeviceConfig
	for j, g := range n.GPUs {
		ng := cluster.GPU{Index: j, UUID: g.UUID, Model: g.Model, Memory: g.Memory, Sharing: cluster.Exclusive}
		switch l.gpuMethod(m) {
		case MIG:
			if l.nextLayout < len(l.packing.Layouts) {
				ng.Sharing, ng.Layout = cluster.MIG, l.packing.Layouts[l.nextLayout]
				l.nextLayout++
			}
		case TimeSlicing: // renameByDefault: offered as nvidia.com/gpu.shared
			ng.Sharing, ng.Replicas, ng.SharedResource = cluster.TimeSliced, l.pp.TimeSlicingReplicas, true
			l.draLeft[TimeSlicing]--
		case MPS:
			ng.Sharing, ng.Replicas, ng.SharedResource = cluster.MPS, l.pp.MPSClients, true
			l.draLeft[MPS]--
		}
		gpus[j] = ng
		if l.p.model.MIG != nil {
			groups = gpuoperator.AppendMIGGroup(groups, j, ng.Layout)
		}
		if m == MIG {
			nc.Layouts = append(nc.Layouts, ng.Layout.String())
		}
	}
	return gpus, groups
}

// countShared counts a node's time-sliced and MPS GPUs, and the node once
// for each of the two it has.
func (pp *PoolPlan) countShared(gpus []cluster.GPU) {
	counted := map[cluster.Sharing]bool{}
	for _, g := range gpus {
		switch g.Sharing {
		case cluster.TimeSliced:
			pp.TimeSlicingGPUs++
		case cluster.MPS:
			pp.MPSGPUs++
		default:
			continue
		}
		if !counted[g.Sharing] {
			counted[g.Sharing] = true
			if g.Sharing == cluster.TimeSliced {
				pp.TimeSlicingNodes++
			} else {
				pp.MPSNodes++
			}
		}
	}
}

// tally collects the pool's MIG instances, time-slice bins per tenant, MPS
// pods per workload and the MPS clients per GPU, and counts whole GPUs.
func (p *pool) tally(pp *PoolPlan) ([]string, map[string][]sharedBin, map[*Decision]int, int) {
	var migProfiles []string
	tsBins := map[string][]sharedBin{}
	mpsPods := map[*Decision]int{}
	clients := 0
	pp.WholeGPUs = 0
	for _, d := range p.decisions {
		// Time slices go to GPUs per tenant; in a DRA pool per workload,
		// whose pods share a GPU through one claim.
		bin := d.w.Tenant
		if p.dra {
			bin = d.Workload
		}
		for range d.w.Pods {
			switch d.Method {
			case MIG:
				migProfiles = append(migProfiles, d.Profile)
			case TimeSlicing:
				tsBins[bin] = addFirstFit(tsBins[bin], d.VRAMNeed, d.ComputeNeed, p.model.Usable)
			case MPS:
				mpsPods[d]++
			case Whole:
				if d.Action != Unplaceable {
					pp.WholeGPUs += max(1, d.w.Request.Count)
				}
			}
		}
		if d.Method == MPS && (clients == 0 || d.clients < clients) {
			clients = d.clients
		}
	}
	return migProfiles, tsBins, mpsPods, clients
}

// nodesNeeded estimates the pool's nodes for a tally: MIG nodes (their
// spare GPUs take whole-GPU pods), time-slicing nodes, MPS nodes and nodes
// for the remaining whole GPUs. The MIG count is the area bound, a floor.
func (p *pool) nodesNeeded(mig []string, ts map[string][]sharedBin, mps map[*Decision]int, clients, whole int) int {
	per := max(1, p.perNode)
	migGPUs := 0
	if len(mig) > 0 {
		counts := make(vec, len(p.model.MIG.Profiles))
		for _, name := range mig {
			for k, pr := range p.model.MIG.Profiles {
				if pr.Name == name {
					counts[k]++
				}
			}
		}
		migGPUs = tablesFor(p.model.MIG).lowerBound(counts)
	}
	tsGPUs, mpsGPUs := 0, 0
	for _, bins := range ts {
		tsGPUs += len(bins)
	}
	for _, n := range mps {
		mpsGPUs += ceilDiv(n, max(1, clients))
	}
	migNodes := ceilDiv(migGPUs, per)
	spare := migNodes*per - migGPUs
	return migNodes + ceilDiv(tsGPUs, per) + ceilDiv(mpsGPUs, per) + ceilDiv(max(0, whole-spare), per)
}

// addFirstFit puts one time-sliced pod on the first GPU of its tenant
// whose co-located VRAM needs and compute still fit, or a new GPU.
func addFirstFit(bins []sharedBin, vram gpu.MiB, compute float64, capacity gpu.MiB) []sharedBin {
	for k := range bins {
		b := &bins[k]
		if b.vram+vram <= capacity && b.compute+compute <= 1 && b.pods < maxMPSClients {
			b.vram += vram
			b.compute += compute
			b.pods++
			return bins
		}
	}
	return append(bins, sharedBin{vram: vram, compute: compute, pods: 1})
}

// prove builds the changed cluster and replays every moved pod through
// sim.Place.
func (pl *Plan) prove(ctx context.Context, s *cluster.Snapshot, poolOf map[int]*pool, newGPUs map[int][]cluster.GPU) error {
	before, _, err := placement.States(s)
	if err != nil {
		return err
	}
	pr := &pl.Proof
	pr.Policy, pr.Currency, pr.Risks, pr.placed, pr.gpuOf = ProofPolicy, s.Catalogue.Currency, map[Risk]int{}, map[string]string{}, map[string]int{}
	for _, d := range pl.Decisions {
		for _, r := range d.Risks {
			pr.Risks[r]++
		}
	}
	pods, moved := pl.movedPods(s, newGPUs)
	changed, err := cluster.NewSnapshot(s.Catalogue, pl.changedNodes(s, newGPUs), pods)
	if err != nil {
		return fmt.Errorf("internal error: the changed snapshot: %w", err)
	}
	states, _, err := placement.States(changed)
	if err != nil {
		return err
	}
	if err := pl.replay(ctx, s.Catalogue, states, moved); err != nil {
		return err
	}
	for _, p := range s.Pods {
		if !p.Bound() && p.WantsGPU() {
			pr.PendingBefore++
		}
	}
	pr.PendingAfter = len(pr.StillPending) + len(pr.Unplaceable)
	pr.GPUsBefore, pr.NodesBefore = inUse(before)
	pr.GPUsAfter, pr.NodesAfter = inUse(states)
	pr.GPUsFreed = pr.GPUsBefore - pr.GPUsAfter
	pl.countFreed(before, states)
	return nil
}

// changedNodes is the snapshot's nodes as the plan leaves them: the
// changed ones with their new GPUs and the labels that select their
// configs.
func (pl *Plan) changedNodes(s *cluster.Snapshot, newGPUs map[int][]cluster.GPU) []*cluster.Node {
	labels := map[string]map[string]string{}
	for _, nc := range pl.Nodes {
		labels[nc.Node] = nc.Labels
	}
	nodes := make([]*cluster.Node, len(s.Nodes))
	for i, n := range s.Nodes {
		nodes[i] = n
		if g, ok := newGPUs[i]; ok {
			cp := *n
			cp.GPUs = g
			cp.Labels = map[string]string{}
			for k, v := range n.Labels {
				cp.Labels[k] = v
			}
			for k, v := range labels[n.Name] {
				cp.Labels[k] = v
			}
			nodes[i] = &cp
		}
	}
	return nodes
}

// movedPods is the snapshot's pods as the plan leaves them, and those of
// them that move: every pod but those bound to unchanged nodes, unbound
// and rewritten as its decision says. A pending pod the plan finds no
// place for is in neither; the proof lists it as unplaceable.
func (pl *Plan) movedPods(s *cluster.Snapshot, newGPUs map[int][]cluster.GPU) (pods, moved []*cluster.Pod) {
	decisionOf := map[*cluster.Pod]*Decision{}
	for _, d := range pl.Decisions {
		for _, p := range d.w.Pods {
			decisionOf[p] = d
		}
	}
	for _, p := range s.Pods {
		i, bound := s.NodeIndex(p.NodeName)
		_, changed := newGPUs[i]
		d := decisionOf[p]
		switch {
		case bound && p.Bound() && !changed:
			pods = append(pods, p)
			continue
		case d != nil && d.Action == Unplaceable && !p.Bound():
			pl.Proof.Unplaceable = append(pl.Proof.Unplaceable, p.Key())
			continue
		}
		cp := *p
		cp.NodeName, cp.Devices = "", nil
		if d != nil {
			after(&cp, d)
		}
		pods = append(pods, &cp)
		moved = append(moved, &cp)
	}
	return pods, moved
}

// replay places the moved pods on the changed nodes' states, largest
// first, with the proof's policy, and notes where each went or that it
// stays pending.
func (pl *Plan) replay(ctx context.Context, catalogue *gpu.Catalogue, states []*placement.NodeState, moved []*cluster.Pod) error {
	pr := &pl.Proof
	sort.SliceStable(moved, func(a, b int) bool { return placeOrder(catalogue, moved[a]) > placeOrder(catalogue, moved[b]) })
	var maxCPU gpu.CPUMilli
	var maxGPU gpu.Milli
	for _, st := range states {
		maxCPU, maxGPU = max(maxCPU, st.Node.CPU), max(maxGPU, st.GPUMilliCapacity())
	}
	policy, err := placement.New(ProofPolicy, placement.Options{MaxNodeCPU: maxCPU, MaxNodeGPUMilli: maxGPU})
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i, p := range moved {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("proof stopped after replaying %d of %d pods: %w", i, len(moved), err)
			}
		}
		d, err := placement.NewDemand(p, catalogue)
		if err != nil {
			return err
		}
		n, a := sim.Place(d, states, policy, sim.Ties{Rand: rng})
		switch {
		case n >= 0:
			pr.placed[p.Key()] = states[n].Node.Name
			if len(a.Devices) > 0 {
				pr.gpuOf[p.Key()] = a.Devices[0].GPU
			}
		case p.WantsGPU():
			pr.StillPending = append(pr.StillPending, p.Key())
		}
	}
	return nil
}

// countFreed lists the GPU nodes that held pods before and hold none
// after, with their GPUs and monthly saving; a warning names the freed
// GPUs whose price is unknown, which the saving leaves out.
func (pl *Plan) countFreed(before, after []*placement.NodeState) {
	pr := &pl.Proof
	unpriced := map[string]int{} // freed GPUs of unpriced models, by model
	for i, st := range after {
		if before[i].Pods > 0 && st.Pods == 0 && len(st.Node.GPUs) > 0 {
			pr.NodesFreed = append(pr.NodesFreed, st.Node.Name)
			for _, g := range st.Node.GPUs {
				pr.GPUsOnFreed++
				if !g.Model.Priced {
					unpriced[g.Model.Name]++
				}
				pr.MonthlySaving += g.Model.PricePerHour * HoursPerMonth
			}
		}
	}
	pr.MonthlySaving = math.Round(pr.MonthlySaving*100) / 100
	for _, name := range slices.Sorted(maps.Keys(unpriced)) {
		pl.Warnings = append(pl.Warnings, fmt.Sprintf("the monthly saving leaves out the %d freed GPUs of %s, whose price is unknown; give it with pricePerHour in a --catalogue file", unpriced[name], name))
	}
}

// after rewrites a moved pod's request as the admission webhook would
// from workload-requests.yaml: only pods of a workload that the plan
// changes and that ask for what the plan saw (Before), to the resource it
// names, with the VRAM annotation it adds for a shared GPU and the node
// selector of its config. The changed nodes offer what their configs say
// (renamed shares, MIG layouts, whole GPUs), so placement puts the pod
// only where its resource is offered.
//
// A moved pod whose VRAM was measured also goes only to GPUs that hold
// what it used (per GPU), so that the proof never moves it where it could
// not run: a kept 2-GPU trainer leaves reconfigured H100s for H100s, not
// for L4s.
func after(p *cluster.Pod, d *Decision) {
	if p.GPU.Kind == cluster.WholeGPUs && p.GPU.Memory == 0 && d.w.Observed.VRAMUsedP95 > 0 {
		p.GPU.Memory = d.w.Observed.VRAMUsedP95 / gpu.MiB(max(1, p.GPU.Count))
	}
	if d.Action == Keep || d.Action == Unplaceable || p.GPU.String() != d.Before {
		return
	}
	switch d.After.Resource {
	case "nvidia.com/gpu":
		p.GPU = cluster.Request{Kind: cluster.WholeGPUs, Count: d.After.Count, Memory: p.GPU.Memory}
	case "nvidia.com/gpu.shared":
		mem := p.GPU.Memory
		if mem == 0 {
			mem = d.After.VRAMLimit
		}
		p.GPU = cluster.Request{Kind: cluster.WholeGPUs, Count: d.After.Count, Memory: mem, SharedResource: true}
		// The plan sized shares within one tenant, and MPS clients of
		// one owner per GPU (in a DRA pool all shares: a claim's).
		p.Isolation = max(p.Isolation, cluster.ShareTenant)
		if d.Method == MPS || d.pool != nil && d.pool.dra {
			p.Tenant = d.Workload
		}
	default:
		p.GPU = cluster.Request{Kind: cluster.MIGSlice, Profile: d.Profile}
	}
	if len(d.After.NodeSelector) > 0 {
		sel := maps.Clone(p.NodeSelector)
		if sel == nil {
			sel = map[string]string{}
		}
		maps.Copy(sel, d.After.NodeSelector)
		p.NodeSelector = sel
	}
}

// placeOrder places the hardest pods first: MIG slices by size, then whole
// GPUs by count, then shares by VRAM, then CPU-only pods.
func placeOrder(c *gpu.Catalogue, p *cluster.Pod) float64 {
	switch p.GPU.Kind {
	case cluster.MIGSlice:
		return 3e12 + float64(migMemoryOf(c, p.GPU.Profile))
	case cluster.WholeGPUs:
		if p.GPU.Memory > 0 && p.GPU.Count == 1 && p.Isolation == cluster.ShareTenant {
			return 1e12 + float64(p.GPU.Memory)
		}
		return 2e12 + float64(p.GPU.Count)
	case cluster.NoGPU:
		return 0
	}
	return 1e12
}

func inUse(states []*placement.NodeState) (gpus, nodes int) {
	for _, st := range states {
		if len(st.GPUs) > 0 && st.Pods > 0 {
			nodes++
		}
		for k := range st.GPUs {
			if st.GPUs[k].Holders > 0 {
				gpus++
			}
		}
	}
	return gpus, nodes
}

// reserve finds, per GPU model, the level of GPUs busy after the plan in
// at least ReserveQuantile of the window's hours: each busy pod counts its
// footprint (whole GPUs, or its share's fraction of one), and the GPUs
// measured allocated in an hour cap that hour. It prices the commitment at
// o.ReserveDiscount and its risk should usage fall to the window's minimum.
func (pl *Plan) reserve(u *usage.Facts, o Options) {
	hours := int(math.Ceil(pl.Window.Hours()))
	byModel := map[string]*Reservation{}
	busy := map[string][]float64{}
	models := map[string]*gpu.Model{}
	poolPlan := map[string]PoolPlan{}
	for _, pp := range pl.Pools {
		poolPlan[pp.Name] = pp
	}
	for _, d := range pl.Decisions {
		if d.pool == nil || d.pool.conflict || hours == 0 {
			continue
		}
		m := d.pool.model.Name
		r, ok := byModel[m]
		if !ok {
			r = &Reservation{Model: m, Hours: hours, Quantile: ReserveQuantile}
			byModel[m] = r
			busy[m] = make([]float64, hours)
			models[m] = d.pool.model
		}
		if d.w.HourlyBusyPods == nil {
			r.Without++
			continue
		}
		r.Workloads++
		foot := footprint(d, poolPlan[d.pool.name])
		for h, n := range d.w.HourlyBusyPods {
			if h < hours {
				busy[m][h] += float64(n) * foot
			}
		}
	}
	hourly := map[string]usage.ModelHours{}
	if u != nil {
		for _, mh := range u.Hourly {
			hourly[mh.Model] = mh
		}
	}
	for _, m := range slices.Sorted(maps.Keys(byModel)) {
		r := byModel[m]
		if r.Workloads == 0 {
			continue
		}
		// No hour needs more GPUs after the plan than it was measured to
		// hold before it (hours the measurement lacks count as 0).
		if mh, ok := hourly[m]; ok {
			r.Measured = &MeasuredLevels{AllocatedGPUs: LevelHeld(mh.AllocatedGPUs, ReserveQuantile), ActiveGPUs: LevelHeld(mh.ActiveGPUs, ReserveQuantile),
				MinAllocatedGPUs: slices.Min(mh.AllocatedGPUs)}
			for h := range busy[m] {
				allocated := 0.0
				if h < len(mh.AllocatedGPUs) {
					allocated = mh.AllocatedGPUs[h]
				}
				busy[m][h] = min(busy[m][h], allocated)
			}
		}
		r.MinGPUs = round2(slices.Min(busy[m]))
		r.PeakGPUs = round2(slices.Max(busy[m]))
		level := LevelHeld(busy[m], ReserveQuantile)
		r.LevelGPUs = round2(level)
		r.BaselineGPUs = int(math.Floor(level + 1e-9))
		if gm := models[m]; gm.Priced {
			r.Priced, r.PricePerHour, r.Discount = true, gm.PricePerHour, o.ReserveDiscount
			r.SavingPerMonth = round2(float64(r.BaselineGPUs) * gm.PricePerHour * o.ReserveDiscount * HoursPerMonth)
			r.RiskPerMonth = round2(max(0, float64(r.BaselineGPUs)-r.MinGPUs) * gm.PricePerHour * (1 - o.ReserveDiscount) * HoursPerMonth)
		}
		pl.Reservations = append(pl.Reservations, *r)
	}
}

// spot prices the spot candidates: the workloads decided Spot, each at the
// mean GPUs it keeps busy after the plan, at o.SpotDiscount.
func (pl *Plan) spot(o Options) {
	poolPlan := map[string]PoolPlan{}
	for _, pp := range pl.Pools {
		poolPlan[pp.Name] = pp
	}
	for _, d := range pl.Decisions {
		if !d.Spot {
			continue
		}
		c := SpotCandidate{Workload: d.Workload, Why: spotWhy(d.w), Discount: o.SpotDiscount}
		if d.pool != nil {
			c.Model = d.pool.model.Name
			foot := footprint(d, poolPlan[d.pool.name])
			c.Measured = len(d.w.HourlyBusyPods) > 0
			if busy := d.w.HourlyBusyPods; len(busy) > 0 {
				var sum float64
				for _, n := range busy {
					sum += float64(n) * foot
				}
				c.GPUs = sum / max(float64(len(busy)), math.Ceil(pl.Window.Hours()))
			} else {
				c.GPUs = float64(len(d.w.Pods)) * foot
			}
			c.GPUs = math.Round(c.GPUs*100) / 100
			if gm := d.pool.model; gm.Priced {
				c.Priced = true
				c.SavingPerMonth = round2(c.GPUs * gm.PricePerHour * o.SpotDiscount * HoursPerMonth)
			}
		}
		pl.SpotCandidates = append(pl.SpotCandidates, c)
	}
}

// spotWhy says what shows that a workload tolerates interruption.
func spotWhy(w *Workload) string {
	why := "its pods belong to a Job (they are retried when interrupted)"
	if w.Role == Batch {
		why += ", batch work"
	}
	return why + ", not production"
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

// footprint is the GPUs one pod of the decision takes after the plan.
func footprint(d *Decision, pp PoolPlan) float64 {
	switch d.Method {
	case MIG:
		p, _ := d.pool.model.MIG.Profile(d.Profile)
		return float64(p.Compute) / float64(d.pool.model.MIG.ComputeSlices)
	case TimeSlicing:
		return 1 / float64(max(1, pp.TimeSlicingReplicas))
	case MPS:
		return 1 / float64(max(1, pp.MPSClients))
	}
	return float64(max(1, d.w.Request.Count))
}

// migMemoryOf is the memory of a MIG profile, 0 when no model has it.
func migMemoryOf(c *gpu.Catalogue, profile string) gpu.MiB {
	p, _ := c.MIGProfile(profile)
	return p.Memory
}
