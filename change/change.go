package change

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpupack/gpupack/api/gpuoperator"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/plan"
)

// Set is the node changes one plan asks for, with what each costs and
// gains, bound to a content hash that an approval names.
type Set struct {
	// Hash identifies what the set changes: each node's labels before and
	// after, its touched GPUs, the pods that must stop, the allocatable it
	// must show after, and the configs its labels name. Budgets, the
	// proof's destinations and the gain are left out: they are read again
	// at each step.
	Hash  string `json:"hash"`
	Nodes []Node `json:"nodes"`
	// MIGConfigs and DevicePluginConfigs are the configs that the nodes'
	// target labels name, by name.
	MIGConfigs          map[string][]gpuoperator.MIGDeviceConfig `json:"migConfigs,omitempty"`
	DevicePluginConfigs map[string]plan.DevicePluginConfig       `json:"devicePluginConfigs,omitempty"`
	// TaintRules are the plan's DeviceTaintRules (NoSchedule on the DRA
	// GPUs that reported an XID error marking them unhealthy): created
	// before any node changes, they stop new claims and evict nothing.
	TaintRules []plan.DeviceTaintRule `json:"deviceTaintRules,omitempty"`
	// GPUHoursLost is the estimate of GPU-hours the stopped pods lose
	// (Options.Outage each); Gain is what the plan's proof expects.
	GPUHoursLost float64  `json:"gpuHoursLost"`
	Gain         Gain     `json:"expectedGain"`
	Warnings     []string `json:"warnings,omitempty"`
}

// Gain is what the whole plan's proof expects once every node is changed.
type Gain struct {
	GPUsFreed     int      `json:"gpusFreed"`
	NodesFreed    []string `json:"nodesFreed"`
	MonthlySaving float64  `json:"monthlySaving"`
	Currency      string   `json:"currency"`
	PendingBefore int      `json:"pendingGPUPodsBefore"`
	PendingAfter  int      `json:"pendingGPUPodsAfter"`
}

// Node is the change of one node.
type Node struct {
	Name string      `json:"node"`
	Pool string      `json:"pool"`
	Role plan.Method `json:"role"`
	// Labels are the operator labels that change, sorted by key.
	Labels []Label `json:"labels"`
	// GPUs are the GPUs whose configuration changes; a per-GPU config
	// leaves the others as they are.
	GPUs []GPU `json:"gpus"`
	// Repartition says that mig-manager re-partitions some GPU (MIG
	// enabled, disabled or re-laid out): it needs the node's GPUs free.
	Repartition bool `json:"repartition"`
	// DRA says that the touched GPUs are offered through DRA: they are
	// fenced with a DeviceTaintRule, not by cordoning the node.
	DRA bool `json:"dra"`
	// Stop are the pods that must stop before the switch.
	Stop []Stop `json:"stop"`
	// Allocatable is the device plugin's resources the node must show
	// after the change (Offered of its GPUs after); nil on a DRA node.
	Allocatable map[string]int64 `json:"allocatable,omitempty"`
	// Fits are the pending pods that the proof places on this node once
	// it is changed.
	Fits         []cluster.PodKey `json:"fits"`
	GPUHoursLost float64          `json:"gpuHoursLost"`
}

// Label is one label's value before and after ("" for absent).
type Label struct {
	Key  string `json:"key"`
	From string `json:"from"`
	To   string `json:"to"`
}

// GPU is one GPU's configuration before and after (Describe's words).
type GPU struct {
	Index int    `json:"index"`
	From  string `json:"from"`
	To    string `json:"to"`
	// Devices are the DRA devices of a GPU offered through DRA (the whole
	// GPU's and its MIG slices'), which the fence taints.
	Devices []cluster.DRADeviceID `json:"draDevices,omitempty"`
}

// Why a pod must stop.
const (
	// ForRepartition: mig-manager re-partitions the node's GPUs, which
	// fails while a GPU client runs (mig-parted issue 119); the device
	// plugin does not say which GPU a pod holds, so every pod holding a
	// device-plugin GPU resource of the node stops (DRA: those holding a
	// touched GPU).
	ForRepartition = "repartition"
	// ForExcess: the new device plugin config offers fewer of the
	// resource than are allocated (fewer replicas, or a renamed
	// resource); the excess stops first so that no running pod is left
	// over the node's allocatable.
	ForExcess = "excess"
)

// Stop is a pod that must stop, why, and what stopping it costs.
type Stop struct {
	Pod cluster.PodKey `json:"pod"`
	// Owner is the pod's workload (plan.WorkloadKey); the drain evicts
	// one pod of an owner at a time. Job says the owner is a Job, which
	// the drain may let finish instead.
	Owner    string `json:"owner"`
	Job      bool   `json:"job"`
	Resource string `json:"resource"`
	Count    int    `json:"count"`
	// GPUs is the share of GPUs the pod holds (its devices' compute
	// shares: 1 a whole GPU, 1/4 a time slice of four).
	GPUs float64 `json:"gpus"`
	Why  string  `json:"why"`
	// Budget is the PodDisruptionBudget that covers the pod, nil when
	// none does.
	Budget *Budget `json:"budget"`
	// Destination is the node the proof places the pod on after the
	// change; "" when it stays pending.
	Destination string `json:"destination"`
}

// EvictableNow says whether the Eviction API would let the pod go now:
// no budget covers it, or its budget allows a disruption.
func (s Stop) EvictableNow() bool { return s.Budget == nil || s.Budget.DisruptionsAllowed > 0 }

// Budget is a PodDisruptionBudget as the disruption controller last
// counted it.
type Budget struct {
	Namespace          string `json:"namespace"`
	Name               string `json:"name"`
	DisruptionsAllowed int    `json:"disruptionsAllowed"`
}

// Options are the estimates a change set is costed with.
type Options struct {
	// OutageHours is how long a stopped pod is expected to be down: the
	// drain, the switch and its restart.
	OutageHours float64
}

// DefaultOptions: a quarter hour of outage per stopped pod, the order of
// a mig-manager re-partition with the GPU operator's pods restarted.
func DefaultOptions() Options { return Options{OutageHours: 0.25} }

// ErrNoPlacement is returned for a plan read back from JSON: the node
// GPUs after the change are known only to a plan made in this process.
var ErrNoPlacement = errors.New("the plan does not carry its nodes' GPUs after the change: make it in this process (plan.Make), not from its JSON")

// Build makes the change set of plan pl for snapshot s, the snapshot it
// was made for. budgets gives the PodDisruptionBudget covering each pod
// (absent: none). Nodes whose operator labels already have their targets
// are left out.
func Build(s *cluster.Snapshot, pl *plan.Plan, budgets map[cluster.PodKey]Budget, o Options) (*Set, error) {
	if o.OutageHours < 0 {
		return nil, fmt.Errorf("outage estimate %v h is negative", o.OutageHours)
	}
	set := &Set{MIGConfigs: map[string][]gpuoperator.MIGDeviceConfig{}, DevicePluginConfigs: map[string]plan.DevicePluginConfig{}}
	owners := workloadOf(s)
	podsOn := podsByNode(s)
	for _, nc := range pl.Nodes {
		n, ok := s.Node(nc.Node)
		if !ok {
			return nil, fmt.Errorf("the plan changes node %s, which the snapshot does not hold; plan again", nc.Node)
		}
		after, ok := pl.GPUsAfter(nc.Node)
		if !ok {
			return nil, ErrNoPlacement
		}
		labels := labelChanges(n.Labels, nc.Labels)
		if len(labels) == 0 {
			continue
		}
		after = withDRA(n.GPUs, after)
		node := Node{Name: n.Name, Pool: nc.Pool, Role: nc.Role, Labels: labels}
		node.GPUs, node.Repartition = gpuChanges(n.GPUs, after)
		node.DRA = slices.ContainsFunc(n.GPUs, func(g cluster.GPU) bool { return g.DRA != nil })
		if !node.DRA {
			node.Allocatable = Offered(after)
		}
		node.Stop = stops(n, podsOn[n.Name], node, owners)
		for i := range node.Stop {
			st := &node.Stop[i]
			if b, ok := budgets[st.Pod]; ok {
				st.Budget = &b
			}
			st.Destination, _ = pl.Proof.PlacedOn(st.Pod)
			node.GPUHoursLost += st.GPUs * o.OutageHours
		}
		node.Fits = fits(s, pl, n.Name)
		// Empty lists are [] in JSON, not null: none is known, not missing.
		node.GPUs, node.Stop, node.Fits = orEmpty(node.GPUs), orEmpty(node.Stop), orEmpty(node.Fits)
		set.GPUHoursLost += node.GPUHoursLost
		set.addConfigs(pl.MIGParted, pl.DevicePlugin, node.Labels)
		set.Nodes = append(set.Nodes, node)
	}
	set.TaintRules = pl.TaintRules
	pr := pl.Proof
	set.Gain = Gain{GPUsFreed: pr.GPUsFreed, NodesFreed: pr.NodesFreed, MonthlySaving: pr.MonthlySaving, Currency: pr.Currency,
		PendingBefore: pr.PendingBefore, PendingAfter: pr.PendingAfter}
	set.Warnings = stopWarnings(set.Nodes)
	hash, err := set.hash()
	if err != nil {
		return nil, err
	}
	set.Hash = hash
	return set, nil
}

// labelChanges lists the operator labels whose value differs from the
// target, sorted by key.
func labelChanges(now, target map[string]string) []Label {
	var out []Label
	for _, k := range slices.Sorted(maps.Keys(target)) {
		if now[k] != target[k] {
			out = append(out, Label{Key: k, From: now[k], To: target[k]})
		}
	}
	return out
}

// withDRA is the GPUs after the change with the DRA identity of the GPUs
// before it: DRA offers the same devices, configured otherwise.
func withDRA(before, after []cluster.GPU) []cluster.GPU {
	out := slices.Clone(after)
	for i := range min(len(before), len(out)) {
		if out[i].DRA == nil {
			out[i].DRA = before[i].DRA
		}
	}
	return out
}

// gpuChanges lists the GPUs whose configuration differs and whether any
// is re-partitioned.
func gpuChanges(before, after []cluster.GPU) (out []GPU, repartition bool) {
	for i := range min(len(before), len(after)) {
		from, to := Describe(before[i]), Describe(after[i])
		if from == to {
			continue
		}
		g := GPU{Index: i, From: from, To: to}
		if d := before[i].DRA; d != nil {
			for _, name := range append([]string{d.Device}, d.SliceDevices...) {
				if name != "" {
					g.Devices = append(g.Devices, cluster.NewDRADeviceID(d.Driver, d.Pool, name))
				}
			}
		}
		out = append(out, g)
		if before[i].Sharing == cluster.MIG || after[i].Sharing == cluster.MIG {
			repartition = true
		}
	}
	return out, repartition
}

// Describe says how a GPU is configured: "whole", "time-slicing x4",
// "mps x15 (shared)", "mig 3g.40gb@0,3g.40gb@4".
func Describe(g cluster.GPU) string {
	switch g.Sharing {
	case cluster.MIG:
		return "mig " + g.Layout.String()
	case cluster.TimeSliced, cluster.MPS:
		d := fmt.Sprintf("%s x%d", g.Sharing, g.Replicas)
		if g.SharedResource {
			d += " (shared)"
		}
		return d
	case cluster.Exclusive:
		return "whole"
	}
	return g.Sharing.String()
}

// Resource names of the NVIDIA device plugin.
const (
	ResourceGPU       = "nvidia.com/gpu"
	ResourceGPUShared = "nvidia.com/gpu.shared"
	resourceMIGPrefix = "nvidia.com/mig-"
)

// Offered is what the device plugin advertises for these GPUs: whole GPUs
// as nvidia.com/gpu, time slices and MPS clients as their replicas (by
// nvidia.com/gpu.shared when renamed), MIG slices as nvidia.com/mig-<profile>
// (the mixed strategy). GPUs offered through DRA are not the device
// plugin's and are left out.
func Offered(gpus []cluster.GPU) map[string]int64 {
	out := map[string]int64{}
	for _, g := range gpus {
		if g.DRA != nil {
			continue
		}
		switch g.Sharing {
		case cluster.MIG:
			for profile, n := range g.Layout.Counts() {
				out[resourceMIGPrefix+profile] += int64(n)
			}
		case cluster.TimeSliced, cluster.MPS:
			name := ResourceGPU
			if g.SharedResource {
				name = ResourceGPUShared
			}
			out[name] += int64(g.Replicas)
		default:
			out[ResourceGPU]++
		}
	}
	return out
}

// Resource is the device-plugin resource and count a pod holds; "" for a
// pod that holds none (no GPU, or GPUs through DRA).
func Resource(p *cluster.Pod) (string, int) {
	if p.UsesDRA() {
		return "", 0
	}
	switch p.GPU.Kind {
	case cluster.WholeGPUs:
		if p.GPU.SharedResource {
			return ResourceGPUShared, p.GPU.Count
		}
		return ResourceGPU, p.GPU.Count
	case cluster.MIGSlice:
		return resourceMIGPrefix + p.GPU.Profile, 1
	}
	return "", 0
}

// Excess is, by resource, how many more are allocated to pods than the
// node offers: what must stop before a switch to offered.
func Excess(offered map[string]int64, pods []*cluster.Pod) map[string]int64 {
	allocated := map[string]int64{}
	for _, p := range pods {
		if r, n := Resource(p); r != "" {
			allocated[r] += int64(n)
		}
	}
	out := map[string]int64{}
	for r, n := range allocated {
		if n > offered[r] {
			out[r] = n - offered[r]
		}
	}
	return out
}

// hash is the hex SHA-256 (first 16 digits) of what the set changes.
func (set *Set) hash() (string, error) {
	type stopKey struct {
		Pod cluster.PodKey
		Why string
	}
	type nodeKey struct {
		Name        string
		Labels      []Label
		GPUs        []GPU
		Stop        []stopKey
		Allocatable map[string]int64
	}
	content := struct {
		Nodes        []nodeKey
		MIG          map[string][]gpuoperator.MIGDeviceConfig
		DevicePlugin map[string]plan.DevicePluginConfig
		TaintRules   []plan.DeviceTaintRule
	}{MIG: set.MIGConfigs, DevicePlugin: set.DevicePluginConfigs, TaintRules: set.TaintRules}
	for _, n := range set.Nodes {
		k := nodeKey{Name: n.Name, Labels: n.Labels, GPUs: n.GPUs, Allocatable: n.Allocatable}
		for _, s := range n.Stop {
			k.Stop = append(k.Stop, stopKey{Pod: s.Pod, Why: s.Why})
		}
		content.Nodes = append(content.Nodes, k)
	}
	b, err := json.Marshal(content) // maps marshal with sorted keys
	if err != nil {
		return "", fmt.Errorf("internal error: hashing the change set: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16], nil
}

// addConfigs adds the configs of mig and dp that the labels' targets
// name.
func (set *Set) addConfigs(mig map[string][]gpuoperator.MIGDeviceConfig, dp map[string]plan.DevicePluginConfig, labels []Label) {
	for _, l := range labels {
		switch l.Key {
		case gpuoperator.MIGConfigLabel:
			if c, ok := mig[l.To]; ok {
				set.MIGConfigs[l.To] = c
			}
		case gpuoperator.DevicePluginConfigLabel:
			if c, ok := dp[l.To]; ok {
				set.DevicePluginConfigs[l.To] = c
			}
		}
	}
}

// stopWarnings names the pods that no budget lets go now.
func stopWarnings(nodes []Node) []string {
	var out []string
	for _, n := range nodes {
		var held []string
		for _, s := range n.Stop {
			if !s.EvictableNow() {
				held = append(held, fmt.Sprintf("%s (PodDisruptionBudget %s/%s allows 0)", s.Pod, s.Budget.Namespace, s.Budget.Name))
			}
		}
		if len(held) > 0 {
			out = append(out, fmt.Sprintf("node %s: %s cannot be evicted now; its change waits for the budget and aborts if it does not allow it in time", n.Name, strings.Join(held, ", ")))
		}
	}
	return out
}

// Only is the set cut to the named nodes, hashed again: what an approval
// of some nodes covers; the plan's DeviceTaintRules, which belong to no
// node change, are left out. A name the set does not change is an error.
func (set *Set) Only(names []string) (*Set, error) {
	out := &Set{MIGConfigs: map[string][]gpuoperator.MIGDeviceConfig{}, DevicePluginConfigs: map[string]plan.DevicePluginConfig{}, Gain: set.Gain}
	for _, name := range names {
		i := slices.IndexFunc(set.Nodes, func(n Node) bool { return n.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("node %s: the plan changes nothing on it (the set changes %s)", name, nodeNames(set.Nodes))
		}
		n := set.Nodes[i]
		out.Nodes = append(out.Nodes, n)
		out.GPUHoursLost += n.GPUHoursLost
		out.addConfigs(set.MIGConfigs, set.DevicePluginConfigs, n.Labels)
	}
	out.Warnings = stopWarnings(out.Nodes)
	hash, err := out.hash()
	if err != nil {
		return nil, err
	}
	out.Hash = hash
	return out, nil
}

func nodeNames(nodes []Node) string {
	if len(nodes) == 0 {
		return "no node"
	}
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	return strings.Join(names, ", ")
}

func orEmpty[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}
