package plan

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/api/gpuoperator"
	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/util/yamldoc"
)

// The autoscaling file's identity.
const (
	AutoscalingAPIVersion = "gpupack.io/v1alpha1"
	AutoscalingKind       = "Autoscaling"
)

// AutoscalingInput says how to autoscale the plan's workloads: the
// Prometheus that KEDA queries, the Karpenter node class of the NodePools
// and, per inference workload, the application metric that scales it. It
// is the autoscaling file, `gpupack plan --autoscaling`.
type AutoscalingInput struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Prometheus is the server KEDA's Prometheus trigger queries, as seen
	// from inside the cluster.
	Prometheus string `json:"prometheus"`
	// NodeClass is the cloud's node class every NodePool refers to;
	// DefaultNodeClass when left out.
	NodeClass *NodeClassRef `json:"nodeClass,omitempty"`
	Workloads []AppMetric   `json:"workloads"`
}

// AppMetric is the application metric that scales one workload: queue
// depth, latency or tokens/s, never GPU utilisation, which says nothing of
// the requests waiting.
type AppMetric struct {
	// Workload is namespace/owner, as the plan names it.
	Workload string `json:"workload"`
	// Kind is the workload's controller: Deployment or StatefulSet.
	Kind string `json:"kind"`
	// Metric names what Query measures, such as queue_depth.
	Metric string `json:"metric"`
	// Query is PromQL returning one value for the whole workload.
	Query string `json:"query"`
	// Target is the value one replica should carry (AverageValue: the
	// metric is divided over the replicas, as queue depth and tokens/s
	// are) or the value to hold the metric at (Value: latency).
	Target     float64 `json:"target"`
	MetricType string  `json:"metricType,omitempty"`
}

// NodeClassRef is a Karpenter NodePool's nodeClassRef.
type NodeClassRef struct {
	Group string `json:"group"`
	Kind  string `json:"kind"`
	Name  string `json:"name"`
}

// DefaultNodeClass is the node class NodePools refer to when the
// autoscaling file names none: AWS's EC2NodeClass "default".
var DefaultNodeClass = NodeClassRef{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}

// The KEDA metric types the Prometheus trigger takes.
const (
	AverageValue = "AverageValue"
	Value        = "Value"
)

// gpuUtilisationMetrics are the DCGM and NVML series that must not scale a
// workload: a busy GPU says nothing of the requests waiting for it.
var gpuUtilisationMetrics = []string{"DCGM_FI_", "nvidia_gpu_", "nvidia_smi_"}

// ParseAutoscaling reads an autoscaling file; name is where it came from,
// for errors, which name the line of the field at fault where they can.
// parseQuery is the PromQL parser: every query must parse, since KEDA
// sends it to Prometheus as it is. The parser is the caller's, so that
// this package stays free of the parser's HTTP dependencies.
func ParseAutoscaling(data []byte, name string, parseQuery func(string) error) (*AutoscalingInput, error) {
	var in AutoscalingInput
	doc, err := yamldoc.Decode(data, name, &in)
	if err != nil {
		return nil, err
	}
	if in.APIVersion != AutoscalingAPIVersion || in.Kind != AutoscalingKind {
		return nil, fmt.Errorf("%s: apiVersion %q, kind %q: want apiVersion %s and kind %s", name, in.APIVersion, in.Kind, AutoscalingAPIVersion, AutoscalingKind)
	}
	if err := in.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for i, m := range in.Workloads {
		if err := parseQuery(m.Query); err != nil {
			return nil, doc.Errorf([]any{"workloads", i, "query"}, "%q does not parse as PromQL: %v; write a PromQL query such as sum(vllm:num_requests_waiting{namespace=\"shop\"})", m.Query, err)
		}
	}
	return &in, nil
}

// Validate checks the input's fields, naming the entry at fault.
func (in *AutoscalingInput) Validate() error {
	if len(in.Workloads) > 0 {
		u, err := url.Parse(in.Prometheus)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("prometheus %q: want the URL KEDA queries from inside the cluster, such as http://prometheus.monitoring:9090", in.Prometheus)
		}
	}
	if c := in.NodeClass; c != nil && (c.Group == "" || c.Kind == "" || c.Name == "") {
		return fmt.Errorf("nodeClass %+v: want group, kind and name, such as {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}", *c)
	}
	seen := map[string]bool{}
	for i, m := range in.Workloads {
		where := fmt.Sprintf("workloads[%d] (%s)", i, m.Workload)
		switch {
		case !strings.Contains(m.Workload, "/"):
			return fmt.Errorf("workloads[%d]: workload %q: want namespace/owner, as `gpupack plan` lists it", i, m.Workload)
		case seen[m.Workload]:
			return fmt.Errorf("%s: listed twice; give each workload one metric", where)
		case m.Kind != "Deployment" && m.Kind != "StatefulSet":
			return fmt.Errorf("%s: kind %q: want Deployment or StatefulSet (KEDA scales Jobs with a ScaledJob)", where, m.Kind)
		case m.Metric == "" || m.Query == "":
			return fmt.Errorf("%s: metric and query are required: the application metric's name and its PromQL", where)
		case math.IsNaN(m.Target) || math.IsInf(m.Target, 0) || m.Target <= 0:
			return fmt.Errorf("%s: target %v: want the positive value one replica should carry", where, m.Target)
		case m.MetricType != "" && m.MetricType != AverageValue && m.MetricType != Value:
			return fmt.Errorf("%s: metricType %q: want %s (queue depth, tokens/s: divided over replicas) or %s (latency)", where, m.MetricType, AverageValue, Value)
		}
		for _, g := range gpuUtilisationMetrics {
			if strings.Contains(m.Query, g) {
				return fmt.Errorf("%s: query %q reads %s*, a GPU utilisation series; scale on the application metric (queue depth, latency or tokens/s) instead", where, m.Query, g)
			}
		}
		seen[m.Workload] = true
	}
	return nil
}

// Autoscaling is the pod and node autoscaling that fits the plan: KEDA
// ScaledObjects for the inference workloads with an application metric,
// and a Karpenter NodePool for each group of nodes (pool, device plugin
// role, capacity type) the plan uses, whose GPU limit holds every replica
// the ScaledObjects may add.
type Autoscaling struct {
	Prometheus    string         `json:"prometheus,omitempty"`
	NodeClass     NodeClassRef   `json:"nodeClass"`
	ScaledObjects []ScaledObject `json:"scaledObjects"`
	NodePools     []NodePool     `json:"nodePools"`
}

// ScaledObject scales one workload on its application metric.
type ScaledObject struct {
	Workload    string    `json:"workload"`
	Namespace   string    `json:"namespace"`
	Name        string    `json:"name"`
	Metric      AppMetric `json:"metric"`
	MinReplicas int       `json:"minReplicas"`
	MaxReplicas int       `json:"maxReplicas"`
	// Range says where MinReplicas and MaxReplicas come from.
	Range string `json:"range"`
	// NodePool is the NodePool whose nodes take the replicas.
	NodePool string `json:"nodePool"`
	// GPUsPerReplica is the GPUs one replica takes after the plan, a share
	// counted as its fraction of a GPU.
	GPUsPerReplica float64 `json:"gpusPerReplica"`
	// Replica is what one replica requests after the plan.
	Replica ReplicaShape `json:"replica"`
}

// ReplicaShape is what one replica requests.
type ReplicaShape struct {
	CPU          gpu.CPUMilli      `json:"cpuMilli"`
	Memory       gpu.MiB           `json:"memoryMiB"`
	Resource     string            `json:"resource"`
	Count        int               `json:"count"`
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
}

// NodePool is one Karpenter NodePool: new nodes like the pool's nodes of
// one role, on one capacity type.
type NodePool struct {
	Name  string `json:"name"`
	Pool  string `json:"pool"`
	Model string `json:"model"`
	Role  Method `json:"role"`
	Spot  bool   `json:"spot"`
	// Labels are the labels Karpenter puts on its nodes: the pool's, and
	// the device plugin and MIG configs of the role.
	Labels map[string]string `json:"labels"`
	Taints []cluster.Taint   `json:"taints,omitempty"`
	// StartupTaints keep pods off a new node until mig-manager has applied
	// its mig-parted config (wellknown.TaintMIGPending), on every NodePool
	// that labels its nodes with one.
	StartupTaints []cluster.Taint `json:"startupTaints,omitempty"`
	InstanceTypes []string        `json:"instanceTypes,omitempty"`
	// GPUShares is the GPUs the plan puts on these nodes counted in
	// fractions of a GPU (footprint: a time slice or MPS client as one of
	// the GPU's replicas or clients, a MIG slice as its compute slices),
	// scaled workloads at their most replicas. It is not the whole GPUs
	// the shares were packed into (PoolPlan's ...GPUsNeeded). GPULimit is
	// that plus headroom, in whole nodes.
	GPUShares   float64 `json:"gpuShares"`
	GPULimit    int     `json:"gpuLimit"`
	GPUsPerNode int     `json:"gpusPerNode"`
	// GPUsPerNode, NodeCPU and NodeMemory are the largest of the nodes it
	// copies: Karpenter can make that instance type.
	NodeCPU    gpu.CPUMilli `json:"nodeCPUMilli"`
	NodeMemory gpu.MiB      `json:"nodeMemoryMiB"`
	// Consolidation is WhenEmptyOrUnderutilized when every workload on it
	// is replicated serving, which moves without loss; WhenEmpty otherwise.
	Consolidation string `json:"consolidationPolicy"`
	// Weight ranks on-demand NodePools above spot ones, so that only the
	// pods that select spot capacity get it.
	Weight    int      `json:"weight,omitempty"`
	Workloads []string `json:"workloads"`
}

// The consolidation policies of a NodePool.
const (
	WhenEmpty                = "WhenEmpty"
	WhenEmptyOrUnderutilized = "WhenEmptyOrUnderutilized"
)

// Karpenter's label of a node's capacity type, and its values.
const (
	CapacityTypeLabel = "karpenter.sh/capacity-type"
	instanceTypeLabel = "node.kubernetes.io/instance-type"
	gpuProductLabel   = "nvidia.com/gpu.product"
	onDemandWeight    = 10
)

// nodeGroup is the nodes of one pool and role after the plan.
type nodeGroup struct {
	np    *NodePool
	nodes []*cluster.Node
	// labels are the plan's labels of each node (device plugin, MIG).
	labels []map[string]string
}

// autoscale builds the Autoscaling of the plan: node groups from the plan's
// node roles, a ScaledObject per workload with a metric, and the NodePools'
// limits from what the decisions put on them.
func (pl *Plan) autoscale(s *cluster.Snapshot, ps []*pool, o Options) error {
	in := o.Autoscaling
	if in == nil {
		in = &AutoscalingInput{}
	}
	if err := in.Validate(); err != nil {
		return fmt.Errorf("autoscaling: %w", err)
	}
	a := &Autoscaling{Prometheus: in.Prometheus, NodeClass: DefaultNodeClass}
	if in.NodeClass != nil {
		a.NodeClass = *in.NodeClass
	}
	groups := pl.nodeGroups(s, ps)
	metrics, err := pl.scaledMetrics(in)
	if err != nil {
		return err
	}
	for _, d := range pl.Decisions {
		pl.scaleDecision(a, groups, ps, d, metrics, o)
	}
	for _, key := range groups.order {
		pl.addNodePool(a, groups.byKey[key], o)
	}
	pl.keepFitting(a)
	pl.Autoscaling = a
	return nil
}

// nodeGroups are the plan's node groups by key, in the order they were
// made, and the group of each node.
type nodeGroups struct {
	byKey  map[string]*nodeGroup
	ofNode map[string]*nodeGroup
	order  []string
}

// group is the node group of the pool, role and capacity type, made at
// the first call.
func (gs *nodeGroups) group(p *pool, m Method, spot bool) *nodeGroup {
	key := gpuoperator.ConfigName("gpupack", p.name, string(m))
	if spot {
		key += "-spot"
	}
	g, ok := gs.byKey[key]
	if !ok {
		g = &nodeGroup{np: &NodePool{Name: key, Pool: p.name, Model: p.model.Name, Role: m, Spot: spot}}
		gs.byKey[key] = g
		gs.order = append(gs.order, key)
	}
	return g
}

// nodeGroups groups the pools' nodes by the roles the plan gives them; a
// DRA pool's nodes get none, and a warning says why.
func (pl *Plan) nodeGroups(s *cluster.Snapshot, ps []*pool) *nodeGroups {
	roleOf := map[string]NodeChange{}
	for _, nc := range pl.Nodes {
		roleOf[nc.Node] = nc
	}
	gs := &nodeGroups{byKey: map[string]*nodeGroup{}, ofNode: map[string]*nodeGroup{}}
	for _, p := range ps {
		if p.dra {
			// A NodePool's role labels and nvidia.com/gpu limit are the
			// device plugin's terms, and more replicas of a workload
			// sharing one claim would crowd its one GPU.
			pl.Warnings = append(pl.Warnings, fmt.Sprintf("pool %s: its GPUs are offered through DRA, for which the plan emits no Karpenter NodePool and no KEDA ScaledObject yet", p.name))
			continue
		}
		for _, i := range p.nodes {
			n := s.Nodes[i]
			nc, changed := roleOf[n.Name]
			m := Whole
			if changed {
				m = nc.Role
			}
			g := gs.group(p, m, false)
			gs.ofNode[n.Name] = g
			g.nodes = append(g.nodes, n)
			g.labels = append(g.labels, nc.Labels)
		}
	}
	return gs
}

// of is the node group of a decision: that of the node the proof placed
// its first pod on (or that it stays on), else its pool's nodes of its
// method, else of whole GPUs; spot work gets the group's spot twin.
func (gs *nodeGroups) of(pl *Plan, ps []*pool, d *Decision) *nodeGroup {
	var g *nodeGroup
	for _, p := range d.w.Pods {
		if n, moved := pl.Proof.placed[p.Key()]; moved {
			g = gs.ofNode[n]
		} else if p.Bound() {
			g = gs.ofNode[p.NodeName]
		}
		if g != nil {
			break
		}
	}
	for _, m := range []Method{d.Method, Whole} {
		if g == nil {
			g = gs.byKey[gpuoperator.ConfigName("gpupack", d.pool.name, string(m))]
		}
	}
	if g == nil || !d.Spot {
		return g
	}
	sg := gs.group(g.np.poolOf(ps), g.np.Role, true)
	if sg.nodes == nil {
		sg.nodes, sg.labels = g.nodes, g.labels
	}
	return sg
}

// scaledMetrics is the input's metric of each workload it scales; it
// refuses a workload that is not a GPU workload of the plan, a Job, or
// work that serves no requests.
func (pl *Plan) scaledMetrics(in *AutoscalingInput) (map[string]AppMetric, error) {
	metrics := map[string]AppMetric{}
	for _, m := range in.Workloads {
		metrics[m.Workload] = m
	}
	decisionOf := map[string]*Decision{}
	for _, d := range pl.Decisions {
		decisionOf[d.Workload] = d
	}
	for _, m := range in.Workloads {
		d, ok := decisionOf[m.Workload]
		switch {
		case !ok:
			return nil, fmt.Errorf("autoscaling: workload %s is not a GPU workload of the cluster; name one that `gpupack plan` lists", m.Workload)
		case d.w.Job:
			return nil, fmt.Errorf("autoscaling: workload %s is a Job; KEDA scales Jobs with a ScaledJob, and a ScaledObject only Deployments and StatefulSets that serve", m.Workload)
		case d.Role == Training || d.Role == Interactive:
			return nil, fmt.Errorf("autoscaling: workload %s is %s work, which serves no requests to scale on; scale only serving workloads", m.Workload, d.Role)
		}
	}
	return metrics, nil
}

// scaleDecision puts a decision's workload on its node group: its GPUs
// count towards the group's need, at its most replicas where a metric
// scales it with a ScaledObject.
func (pl *Plan) scaleDecision(a *Autoscaling, groups *nodeGroups, ps []*pool, d *Decision, metrics map[string]AppMetric, o Options) {
	if d.Action == Unplaceable || d.pool == nil || d.pool.conflict || d.pool.dra {
		if _, ok := metrics[d.Workload]; ok {
			pl.Warnings = append(pl.Warnings, fmt.Sprintf("autoscaling: workload %s runs on no node pool the plan changes or keeps, so it gets no ScaledObject", d.Workload))
		}
		return
	}
	g := groups.of(pl, ps, d)
	if g == nil || len(g.nodes) == 0 {
		return
	}
	foot := footprint(d, pl.poolPlan(g.np.Pool))
	g.np.Workloads = append(g.np.Workloads, d.Workload)
	m, scaled := metrics[d.Workload]
	if !scaled {
		g.np.GPUShares += foot * float64(len(d.w.Pods))
		if !(d.Role == Inference && !d.w.Job && len(d.w.Pods) > 1) {
			g.np.Consolidation = WhenEmpty
		}
		return
	}
	if m.MetricType == "" {
		m.MetricType = AverageValue
	}
	so := ScaledObject{Workload: d.Workload, Namespace: d.w.Namespace, Name: d.w.Owner, Metric: m, NodePool: g.np.Name, GPUsPerReplica: foot}
	so.MinReplicas, so.MaxReplicas, so.Range = replicaRange(d, o.Headroom)
	so.Replica = replicaShape(d)
	g.np.GPUShares += foot * float64(so.MaxReplicas)
	a.ScaledObjects = append(a.ScaledObjects, so)
}

// addNodePool shapes a node group that has nodes and workloads into its
// NodePool.
func (pl *Plan) addNodePool(a *Autoscaling, g *nodeGroup, o Options) {
	if len(g.np.Workloads) == 0 || len(g.nodes) == 0 {
		return
	}
	g.shape(o.Headroom)
	if g.np.Consolidation == "" {
		g.np.Consolidation = WhenEmptyOrUnderutilized
	}
	if !g.np.Spot {
		g.np.Weight = onDemandWeight
	}
	if g.np.Labels[MIGConfigLabel] != "" {
		g.np.StartupTaints = []cluster.Taint{{Key: wellknown.TaintMIGPending, Value: "true", Effect: cluster.NoSchedule}}
	}
	if g.np.Role == MIG && g.np.Labels[MIGConfigLabel] == "" {
		pl.Warnings = append(pl.Warnings, fmt.Sprintf("NodePool %s: the pool's MIG nodes have different mig-parted configs, so its new nodes get none; label them %s by hand", g.np.Name, MIGConfigLabel))
	}
	a.NodePools = append(a.NodePools, *g.np)
}

// keepFitting drops the ScaledObjects whose replica cannot fit: a replica
// that cannot fit is not scaled, and the warning says why.
func (pl *Plan) keepFitting(a *Autoscaling) {
	kept := a.ScaledObjects[:0]
	for _, so := range a.ScaledObjects {
		if err := a.checkScaledObject(so); err != nil {
			pl.Warnings = append(pl.Warnings, fmt.Sprintf("autoscaling: no ScaledObject for %s: %v", so.Workload, err))
			continue
		}
		kept = append(kept, so)
	}
	a.ScaledObjects = kept
}

func (np *NodePool) poolOf(ps []*pool) *pool {
	for _, p := range ps {
		if p.name == np.Pool {
			return p
		}
	}
	return nil
}

func (pl *Plan) poolPlan(name string) PoolPlan {
	for _, pp := range pl.Pools {
		if pp.Name == name {
			return pp
		}
	}
	return PoolPlan{}
}

// shape fills the NodePool's node shape, labels, taints and GPU limit from
// its nodes: what they have in common, and the largest of each size.
func (g *nodeGroup) shape(headroom float64) {
	np := g.np
	np.Labels = map[string]string{wellknown.LabelPool: np.Pool}
	common := func(value func(k int) string) (string, bool) {
		v := value(0)
		for k := range g.nodes {
			if value(k) != v {
				return "", false
			}
		}
		return v, v != ""
	}
	for _, key := range []string{DevicePluginConfigLabel, MIGConfigLabel} {
		if v, ok := common(func(k int) string { return g.labels[k][key] }); ok {
			np.Labels[key] = v
		}
	}
	if v, ok := common(func(k int) string { return g.nodes[k].Labels[gpuProductLabel] }); ok {
		np.Labels[gpuProductLabel] = v
	}
	types := map[string]bool{}
	for _, n := range g.nodes {
		if t := n.Labels[instanceTypeLabel]; t != "" {
			types[t] = true
		}
		np.GPUsPerNode = max(np.GPUsPerNode, len(n.GPUs))
		np.NodeCPU, np.NodeMemory = max(np.NodeCPU, n.CPU), max(np.NodeMemory, n.Memory)
	}
	np.InstanceTypes = slices.Sorted(maps.Keys(types))
	for _, t := range g.nodes[0].Taints {
		everywhere := true
		for _, n := range g.nodes[1:] {
			everywhere = everywhere && slices.Contains(n.Taints, t)
		}
		if everywhere {
			np.Taints = append(np.Taints, t)
		}
	}
	np.GPUShares = math.Round(np.GPUShares*1000) / 1000
	per := max(1, np.GPUsPerNode)
	np.GPULimit = per * max(1, int(math.Ceil(np.GPUShares*(1+headroom)/float64(per)-1e-9)))
}

// replicaRange is the replicas a scaled workload may run: from the busy
// pods measured per hour (the fewest, and the most plus headroom), else
// from its pods now; never fewer than 1 (see keptReplica).
func replicaRange(d *Decision, headroom float64) (lo, hi int, why string) {
	pods := len(d.w.Pods)
	if busy := d.w.HourlyBusyPods; len(busy) > 0 {
		least, most := slices.Min(busy), slices.Max(busy)
		hi = max(1, least, int(math.Ceil(float64(most)*(1+headroom)-1e-9)))
		why = fmt.Sprintf("busy replicas measured per hour: %d to %d; at most %d with %.0f%% headroom", least, most, hi, headroom*100)
		if least == 0 {
			why += "; " + keptReplica
		}
		return max(1, least), hi, why
	}
	hi = max(1, int(math.Ceil(float64(pods)*(1+headroom)-1e-9)))
	why = fmt.Sprintf("no hourly activity measured: from %d replicas now, at most %d with %.0f%% headroom", pods, hi, headroom*100)
	if d.Action == Reclaim {
		why += "; idle-held, but " + keptReplica
	}
	return 1, hi, why
}

// keptReplica says why a ScaledObject's minReplicaCount is never 0: at 0,
// KEDA scales the workload to zero whenever its trigger reads nothing, as
// the queue of a replica still loading its model does (and a queue that
// only the replicas report never wakes it again). gpupack reclaim pauses
// idle serving at zero instead, never while a pod is starting.
const keptReplica = "at least 1, since KEDA at minReplicaCount 0 scales to zero a replica whose queue reads nothing, as one loading its model does (gpupack reclaim pauses idle serving instead)"

// replicaShape is what one replica of the decision requests after the plan.
func replicaShape(d *Decision) ReplicaShape {
	var r ReplicaShape
	for _, p := range d.w.Pods {
		r.CPU, r.Memory = max(r.CPU, p.CPU), max(r.Memory, p.Memory)
	}
	r.Resource, r.Count = d.After.Resource, d.After.Count
	if d.Action == Keep || d.After.Resource == "" {
		r.Resource, r.Count = "nvidia.com/gpu", max(1, d.w.Request.Count)
		if d.w.Request.Kind == cluster.MIGSlice {
			r.Resource, r.Count = "nvidia.com/mig-"+d.w.Request.Profile, 1
		}
	}
	r.NodeSelector = maps.Clone(d.After.NodeSelector)
	return r
}

// Check checks that the pods KEDA adds fit the nodes Karpenter makes:
// every ScaledObject's NodePool exists, its most replicas take no more
// GPUs than the NodePool's limit, one replica's requests fit one node of
// the NodePool, and the NodePool's labels satisfy the replica's node
// selector. The error names every ScaledObject that does not fit.
func (a *Autoscaling) Check() error {
	var errs []error
	for _, so := range a.ScaledObjects {
		if err := a.checkScaledObject(so); err != nil {
			errs = append(errs, fmt.Errorf("ScaledObject %s/%s: %w", so.Namespace, so.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (a *Autoscaling) checkScaledObject(so ScaledObject) error {
	i := slices.IndexFunc(a.NodePools, func(np NodePool) bool { return np.Name == so.NodePool })
	if i < 0 {
		return fmt.Errorf("NodePool %s is not emitted", so.NodePool)
	}
	np := a.NodePools[i]
	r := so.Replica
	var why []string
	if gpus := float64(so.MaxReplicas) * so.GPUsPerReplica; gpus > float64(np.GPULimit)+1e-9 {
		why = append(why, fmt.Sprintf("%d replicas x %g GPUs = %g GPUs, beyond NodePool %s's limit of %d", so.MaxReplicas, so.GPUsPerReplica, gpus, np.Name, np.GPULimit))
	}
	if r.CPU > np.NodeCPU {
		why = append(why, fmt.Sprintf("a replica's CPU %s is more than a node of NodePool %s has (%s)", r.CPU, np.Name, np.NodeCPU))
	}
	if r.Memory > np.NodeMemory {
		why = append(why, fmt.Sprintf("a replica's memory %s is more than a node of NodePool %s has (%s)", r.Memory, np.Name, np.NodeMemory))
	}
	if r.Resource == "nvidia.com/gpu" && r.Count > np.GPUsPerNode {
		why = append(why, fmt.Sprintf("a replica's %d GPUs are more than a node of NodePool %s has (%d)", r.Count, np.Name, np.GPUsPerNode))
	}
	for _, k := range slices.Sorted(maps.Keys(r.NodeSelector)) {
		if np.Labels[k] != r.NodeSelector[k] {
			why = append(why, fmt.Sprintf("a replica selects %s=%s, which NodePool %s's nodes do not carry", k, r.NodeSelector[k], np.Name))
		}
	}
	if len(why) > 0 {
		return errors.New(strings.Join(why, "; "))
	}
	return nil
}

// KEDAScaledObjects renders the ScaledObjects, one YAML document each.
func (pl *Plan) KEDAScaledObjects() ([]byte, error) {
	a := pl.Autoscaling
	if a == nil || len(a.ScaledObjects) == 0 {
		return []byte("# No ScaledObjects: no inference workload has an application metric; name them in a `gpupack plan --autoscaling` file.\n"), nil
	}
	var docs []any
	for _, so := range a.ScaledObjects {
		docs = append(docs, map[string]any{
			"apiVersion": "keda.sh/v1alpha1",
			"kind":       "ScaledObject",
			"metadata":   map[string]any{"name": so.Name, "namespace": so.Namespace, "labels": map[string]string{"app.kubernetes.io/managed-by": "gpupack"}},
			"spec": map[string]any{
				"scaleTargetRef":  map[string]string{"apiVersion": "apps/v1", "kind": so.Metric.Kind, "name": so.Name},
				"minReplicaCount": so.MinReplicas,
				"maxReplicaCount": so.MaxReplicas,
				"triggers": []any{map[string]any{
					"type":       "prometheus",
					"name":       gpuoperator.ConfigName(so.Metric.Metric),
					"metricType": so.Metric.MetricType,
					"metadata": map[string]string{
						"serverAddress": a.Prometheus,
						"query":         so.Metric.Query,
						"threshold":     strconv.FormatFloat(so.Metric.Target, 'f', -1, 64),
					},
				}},
			},
		})
	}
	return yamlDocuments(docs)
}

// KarpenterNodePools renders the NodePools, one YAML document each.
func (pl *Plan) KarpenterNodePools() ([]byte, error) {
	a := pl.Autoscaling
	if a == nil || len(a.NodePools) == 0 {
		return []byte("# No NodePools: the plan puts no workload on a node pool.\n"), nil
	}
	var docs []any
	for _, np := range a.NodePools {
		capacity := "on-demand"
		if np.Spot {
			capacity = "spot"
		}
		reqs := []any{map[string]any{"key": CapacityTypeLabel, "operator": "In", "values": []string{capacity}}}
		if len(np.InstanceTypes) > 0 {
			reqs = append(reqs, map[string]any{"key": instanceTypeLabel, "operator": "In", "values": np.InstanceTypes})
		}
		tmpl := map[string]any{"nodeClassRef": a.NodeClass, "requirements": reqs}
		if len(np.Taints) > 0 {
			tmpl["taints"] = np.Taints
		}
		if len(np.StartupTaints) > 0 {
			tmpl["startupTaints"] = np.StartupTaints
		}
		spec := map[string]any{
			"template":   map[string]any{"metadata": map[string]any{"labels": np.Labels}, "spec": tmpl},
			"limits":     map[string]string{"nvidia.com/gpu": strconv.Itoa(np.GPULimit)},
			"disruption": map[string]string{"consolidationPolicy": np.Consolidation, "consolidateAfter": "5m"},
		}
		if np.Weight > 0 {
			spec["weight"] = np.Weight
		}
		docs = append(docs, map[string]any{
			"apiVersion": "karpenter.sh/v1",
			"kind":       "NodePool",
			"metadata":   map[string]any{"name": np.Name, "labels": map[string]string{"app.kubernetes.io/managed-by": "gpupack"}},
			"spec":       spec,
		})
	}
	return yamlDocuments(docs)
}

func yamlDocuments(docs []any) ([]byte, error) {
	var b strings.Builder
	for i, d := range docs {
		y, err := yaml.Marshal(d)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(y)
	}
	return []byte(b.String()), nil
}
