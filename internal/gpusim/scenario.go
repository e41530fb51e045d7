package gpusim

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/util/yamldoc"
	"github.com/gpupack/gpupack/usage"
)

// Scenario is a scripted cluster of GPU nodes and pods. In YAML:
//
//	duration: 60s
//	nodes:
//	  - name: gpu-a
//	    model: H100-80GB        # a catalogue model or alias
//	    gpus: 2
//	    mig:                    # optional: MIG layout per GPU index
//	      "1": [3g.40gb, 3g.40gb]
//	pods:
//	  - namespace: ml
//	    name: train-0
//	    node: gpu-a
//	    gpu: 0                  # GPU index on the node
//	    slice: 1                # optional: index into that GPU's MIG list
//	    from: 5s                # optional, default 0s
//	    to: 55s                 # optional, default duration
//	    memoryMiB: 30000
//	    dram: 0.2               # DRAM activity ratio while held
//	    activity: {pattern: square, level: 0.9, low: 0, on: 1s, off: 3s}
//	    startup: {created: -30s, scheduled: -25s, containersReady: -5s, ready: 20s}
//	    cpu: {limitCores: 4, throttledRatio: 0.41, usedCores: 3.9}   # optional: cAdvisor's CPU series
//	    input: {networkReceiveBytesPerSecond: 2e8, pcieRxBytesPerSecond: 4e9}  # optional
//
// Times are offsets from the scenario's start; startup times are offsets
// from the pod's from. Patterns: constant (level), idle (0), square (level
// for on, then low for off, repeating).
type Scenario struct {
	Duration Duration `json:"duration"`
	Nodes    []Node   `json:"nodes"`
	Pods     []Pod    `json:"pods"`

	models map[string]*gpu.Model
}

// Node is a scripted GPU node.
type Node struct {
	Name  string              `json:"name"`
	Model string              `json:"model"`
	GPUs  int                 `json:"gpus"`
	MIG   map[string][]string `json:"mig"`
	// XIDs is, by GPU index, the XID error the GPU reported last (the
	// DCGM_FI_DEV_XID_ERRORS gauge) from the scenario's start; a GPU not
	// listed reports 0, none.
	XIDs map[string]int `json:"xids"`
}

// Pod is a scripted pod holding one GPU or MIG slice.
type Pod struct {
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Container string   `json:"container"`
	Node      string   `json:"node"`
	GPU       int      `json:"gpu"`
	Slice     *int     `json:"slice"`
	From      Duration `json:"from"`
	To        Duration `json:"to"`
	MemoryMiB float64  `json:"memoryMiB"`
	DRAM      float64  `json:"dram"`
	Activity  Activity `json:"activity"`
	Startup   Startup  `json:"startup"`
	App       *App     `json:"app"`
	// DRA, when set, says the pod holds its GPU through a ResourceClaim:
	// its series carry dcgm-exporter's DRA labels.
	DRA *DRAClaim `json:"dra"`
	// CPU, when set, scripts cAdvisor's CPU series of the pod's container.
	CPU *CPU `json:"cpu"`
	// Input, when set, scripts the pod's data input: cAdvisor's disk and
	// network reads, and DCGM's PCIe and NVLink fields on its GPU.
	Input *Input `json:"input"`
}

// CPU scripts a container's CPU as cAdvisor reports it while the pod runs:
// its CFS quota in cores (0: no limit, no quota series), the share of
// enforcement periods throttled, and the cores it uses. The container is
// runnable in every period.
type CPU struct {
	LimitCores     float64 `json:"limitCores"`
	ThrottledRatio float64 `json:"throttledRatio"`
	UsedCores      float64 `json:"usedCores"`
}

// Input scripts a pod's data input rates, in bytes per second, while it
// runs (cAdvisor's) or holds its GPU (DCGM's).
type Input struct {
	DiskReadBytesPerSecond       float64 `json:"diskReadBytesPerSecond"`
	NetworkReceiveBytesPerSecond float64 `json:"networkReceiveBytesPerSecond"`
	PCIeRxBytesPerSecond         float64 `json:"pcieRxBytesPerSecond"`
	PCIeTxBytesPerSecond         float64 `json:"pcieTxBytesPerSecond"`
	NVLinkRxBytesPerSecond       float64 `json:"nvlinkRxBytesPerSecond"`
	NVLinkTxBytesPerSecond       float64 `json:"nvlinkTxBytesPerSecond"`
}

// DRAClaim is the ResourceClaim through which a pod holds its GPU, as
// dcgm-exporter 4.x labels its series when the kubelet's pod-resources API
// lists claims (dra_claim_name, dra_claim_namespace, dra_device_name,
// dra_driver_name, dra_pool_name).
type DRAClaim struct {
	// Claim is the claim's name, in the pod's namespace.
	Claim string `json:"claim"`
	// Device is the DRA device in the pool, such as gpu-0.
	Device string `json:"device"`
	// Pool defaults to the pod's node, Driver to gpu.nvidia.com (NVIDIA's
	// DRA driver publishes one pool per node).
	Pool   string `json:"pool"`
	Driver string `json:"driver"`
}

// App scripts an application metric proportional to the pod's activity,
// such as tokens per second, for the in-process demo.
type App struct {
	Name            string  `json:"name"`
	PerActiveSecond float64 `json:"perActiveSecond"`
}

// Activity is a pod's activity pattern, ratios 0..1.
type Activity struct {
	Pattern string   `json:"pattern"`
	Level   float64  `json:"level"`
	Low     float64  `json:"low"`
	On      Duration `json:"on"`
	Off     Duration `json:"off"`
}

// Startup holds a pod's Kubernetes life-cycle times relative to its from;
// nil means not scripted. Pulls are the kubelet's Pulled events, Storage
// the pod's volumes and mounts (what ClassifyModelStorage reads), Workload
// its owner's name.
type Startup struct {
	Created           *Duration             `json:"created"`
	Scheduled         *Duration             `json:"scheduled"`
	ContainersStarted *Duration             `json:"containersStarted"`
	ContainersReady   *Duration             `json:"containersReady"`
	Ready             *Duration             `json:"ready"`
	Workload          string                `json:"workload"`
	Pulls             []Pull                `json:"pulls"`
	Storage           *usage.PodStorageSpec `json:"storage"`
}

// Pull is one scripted Pulled event: the image of a container pulled in
// seconds (its size in bytes), or found present, at a time relative to the
// pod's from.
type Pull struct {
	Container string   `json:"container"`
	Image     string   `json:"image"`
	At        Duration `json:"at"`
	Seconds   float64  `json:"seconds"`
	SizeBytes int64    `json:"sizeBytes"`
	Present   bool     `json:"present"`
}

// Duration is a time.Duration written as "90s" or "1h30m".
type Duration time.Duration

// UnmarshalText reads a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration; write one such as 30s, 5m or 1h30m", b)
	}
	*d = Duration(v)
	return nil
}

// D is the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Parse reads and validates a scenario: exactly one YAML or JSON document.
// source names the file in errors, which say the line, the field path and
// what to do.
func Parse(data []byte, source string, c *gpu.Catalogue) (*Scenario, error) {
	var s Scenario
	doc, err := yamldoc.Decode(data, source, &s)
	if err != nil {
		return nil, err
	}
	if doc.Empty() {
		return nil, fmt.Errorf("%s: empty scenario; give at least duration, nodes and pods", source)
	}
	v := validator{doc: doc}
	s.validate(&v, c)
	if len(v.errs) > 0 {
		return nil, errors.Join(v.errs...)
	}
	return &s, nil
}

type validator struct {
	doc  *yamldoc.Doc
	errs []error
}

// fail records an error at the field path, e.g. ("pods", 2, "node").
func (v *validator) fail(path []any, format string, args ...any) {
	if len(v.errs) < 20 {
		v.errs = append(v.errs, v.doc.Errorf(path, format, args...))
	}
}

func path(p ...any) []any { return p }

// validate checks the scenario: its duration and nodes, then each node,
// then each pod; a valid scenario's pods then get their default end (the
// scenario's duration), and their memory is checked against their
// devices'. Each error is recorded at its field path.
func (s *Scenario) validate(v *validator, c *gpu.Catalogue) {
	if s.Duration <= 0 {
		v.fail(path("duration"), "want a positive duration such as 60s or 24h")
	}
	if len(s.Nodes) == 0 {
		v.fail(path("nodes"), "no nodes; add at least one node with name, model and gpus")
	}
	s.validateNodes(v, c)
	seen := map[string]bool{}
	for i := range s.Pods {
		s.validatePod(v, i, seen)
	}
	if len(v.errs) > 0 {
		return
	}
	for i := range s.Pods {
		if s.Pods[i].To == 0 {
			s.Pods[i].To = s.Duration
		}
	}
	s.validateMemory(v)
}

// validateNodes checks each node (a name of its own, a catalogue model,
// 1..64 GPUs, XIDs and MIG layouts of GPUs it has) and keeps each node's
// model.
func (s *Scenario) validateNodes(v *validator, c *gpu.Catalogue) {
	s.models = map[string]*gpu.Model{}
	for i, n := range s.Nodes {
		if n.Name == "" {
			v.fail(path("nodes", i, "name"), "missing; give each node a name")
		}
		if _, dup := s.models[n.Name]; dup {
			v.fail(path("nodes", i, "name"), "node %q is listed twice; give each node its own name", n.Name)
		}
		m, err := c.Resolve(n.Model)
		if err != nil {
			v.fail(path("nodes", i, "model"), "%v", err)
		}
		s.models[n.Name] = m
		if n.GPUs < 1 || n.GPUs > 64 {
			v.fail(path("nodes", i, "gpus"), "%d GPUs; want 1..64", n.GPUs)
		}
		for idx, xid := range n.XIDs {
			if gi, err := strconv.Atoi(idx); err != nil || gi < 0 || gi >= n.GPUs {
				v.fail(path("nodes", i, "xids", idx), "%q is not a GPU index of this node (0..%d)", idx, n.GPUs-1)
			} else if xid < 0 {
				v.fail(path("nodes", i, "xids", idx), "XID %d; want a positive XID code such as 79", xid)
			}
		}
		for idx, profiles := range n.MIG {
			gi, err := strconv.Atoi(idx)
			if err != nil || gi < 0 || gi >= n.GPUs {
				v.fail(path("nodes", i, "mig", idx), "%q is not a GPU index of this node (0..%d)", idx, n.GPUs-1)
				continue
			}
			if m == nil {
				continue
			}
			if m.MIG == nil {
				v.fail(path("nodes", i, "mig", idx), "%s does not support MIG; remove the mig entry or use an A100, H100, H200 or A30", m.Name)
				continue
			}
			if _, err := m.MIG.Fit(profiles); err != nil {
				v.fail(path("nodes", i, "mig", idx), "%v; valid profiles: %s", err, strings.Join(m.MIG.ProfileNames(), ", "))
			}
		}
	}
}

// validatePod checks pod i: a namespace and name not seen before (seen
// holds namespace/name of the pods checked), its span within the
// scenario, its memory, DRAM ratio, application metric, activity and DRA
// claim, and the device it holds.
func (s *Scenario) validatePod(v *validator, i int, seen map[string]bool) {
	p := &s.Pods[i]
	at := func(f string) []any { return path("pods", i, f) }
	if p.Name == "" || p.Namespace == "" {
		v.fail(path("pods", i), "give the pod a namespace and a name")
	}
	if seen[p.Namespace+"/"+p.Name] {
		v.fail(at("name"), "pod %s/%s is listed twice; one entry per pod", p.Namespace, p.Name)
	}
	seen[p.Namespace+"/"+p.Name] = true
	if p.From < 0 {
		v.fail(at("from"), "negative start; want 0s or later")
	}
	if p.To != 0 && p.To <= p.From {
		v.fail(at("to"), "ends at %s, not after its start %s", p.To.D(), p.From.D())
	}
	if p.To > s.Duration {
		v.fail(at("to"), "ends at %s, after the scenario's duration %s", p.To.D(), s.Duration.D())
	}
	if p.MemoryMiB < 0 || math.IsNaN(p.MemoryMiB) {
		v.fail(at("memoryMiB"), "want MiB of framebuffer, 0 or more")
	}
	if p.DRAM < 0 || p.DRAM > 1 || math.IsNaN(p.DRAM) {
		v.fail(at("dram"), "%v is not a ratio; want 0..1", p.DRAM)
	}
	if p.App != nil && (p.App.Name == "" || p.App.PerActiveSecond < 0 || math.IsNaN(p.App.PerActiveSecond)) {
		v.fail(at("app"), "give the application metric a name and a non-negative perActiveSecond")
	}
	validateActivity(v, i, p.Activity)
	validateEvidence(v, i, p)
	if p.DRA != nil && (p.DRA.Claim == "" || p.DRA.Device == "") {
		v.fail(at("dra"), "a DRA claim needs its claim and device names")
	}
	s.validateDevice(v, i, p)
}

// validateEvidence checks pod i's CPU and input: a throttled share is a
// ratio of a quota that exists, and no core count or rate is negative.
func validateEvidence(v *validator, i int, p *Pod) {
	if c := p.CPU; c != nil {
		if c.ThrottledRatio < 0 || c.ThrottledRatio > 1 || math.IsNaN(c.ThrottledRatio) {
			v.fail(path("pods", i, "cpu", "throttledRatio"), "%v is not a ratio; want 0..1", c.ThrottledRatio)
		}
		if c.ThrottledRatio > 0 && c.LimitCores <= 0 {
			v.fail(path("pods", i, "cpu", "throttledRatio"), "only a CPU limit throttles; give limitCores")
		}
		for _, n := range []struct {
			name string
			v    float64
		}{{"limitCores", c.LimitCores}, {"usedCores", c.UsedCores}} {
			if n.v < 0 || math.IsNaN(n.v) {
				v.fail(path("pods", i, "cpu", n.name), "%v cores; want 0 or more", n.v)
			}
		}
	}
	if in := p.Input; in != nil {
		for _, r := range []struct {
			name string
			v    float64
		}{{"diskReadBytesPerSecond", in.DiskReadBytesPerSecond}, {"networkReceiveBytesPerSecond", in.NetworkReceiveBytesPerSecond},
			{"pcieRxBytesPerSecond", in.PCIeRxBytesPerSecond}, {"pcieTxBytesPerSecond", in.PCIeTxBytesPerSecond},
			{"nvlinkRxBytesPerSecond", in.NVLinkRxBytesPerSecond}, {"nvlinkTxBytesPerSecond", in.NVLinkTxBytesPerSecond}} {
			if r.v < 0 || math.IsNaN(r.v) {
				v.fail(path("pods", i, "input", r.name), "%v bytes per second; want 0 or more", r.v)
			}
		}
	}
}

// validateActivity checks pod i's activity: a known pattern, positive on
// and off durations for a square one, and level and low ratios.
func validateActivity(v *validator, i int, a Activity) {
	switch a.Pattern {
	case "constant", "idle":
	case "square":
		if a.On <= 0 || a.Off <= 0 {
			v.fail(path("pods", i, "activity", "on"), "a square pattern needs positive on and off durations")
		}
	default:
		v.fail(path("pods", i, "activity", "pattern"), "unknown pattern %q; want constant, idle or square", a.Pattern)
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"level", a.Level}, {"low", a.Low}} {
		if r.v < 0 || r.v > 1 || math.IsNaN(r.v) {
			v.fail(path("pods", i, "activity", r.name), "%v is not a ratio; want 0..1", r.v)
		}
	}
}

// validateDevice checks that the device pod i holds exists: its node, the
// GPU on it, and, on a MIG-partitioned GPU, the slice, which a pod on a
// whole GPU must not name.
func (s *Scenario) validateDevice(v *validator, i int, p *Pod) {
	at := func(f string) []any { return path("pods", i, f) }
	node, ok := s.node(p.Node)
	if !ok {
		v.fail(at("node"), "node %q is not defined; define it under nodes or fix the name", p.Node)
		return
	}
	if p.GPU < 0 || p.GPU >= node.GPUs {
		v.fail(at("gpu"), "GPU %d does not exist on %s (0..%d)", p.GPU, node.Name, node.GPUs-1)
		return
	}
	slices := node.MIG[strconv.Itoa(p.GPU)]
	switch {
	case p.Slice == nil && len(slices) > 0:
		v.fail(at("gpu"), "GPU %d of %s is MIG-partitioned; name the slice (0..%d)", p.GPU, node.Name, len(slices)-1)
	case p.Slice != nil && (*p.Slice < 0 || *p.Slice >= len(slices)):
		v.fail(at("slice"), "slice %d does not exist on GPU %d of %s, which has %d MIG slices", *p.Slice, p.GPU, node.Name, len(slices))
	}
}

// validateMemory refuses framebuffer use beyond the device's memory: a
// pod's own, and that of the pods holding one device at once (checked as
// each starts, when the sum can only have grown).
func (s *Scenario) validateMemory(v *validator) {
	for i := range s.Pods {
		p := &s.Pods[i]
		d := s.device(p)
		mem := s.memory(d)
		if p.MemoryMiB > mem {
			v.fail(path("pods", i, "memoryMiB"), "%v MiB, more than the %v MiB of %s", p.MemoryMiB, mem, describeDevice(d))
			continue
		}
		used, others := 0.0, []string(nil)
		for j := range s.Pods {
			q := &s.Pods[j]
			if j != i && s.holds(q, d, p.From.D()) {
				used += q.MemoryMiB
				others = append(others, q.Namespace+"/"+q.Name)
			}
		}
		if used+p.MemoryMiB > mem {
			v.fail(path("pods", i, "memoryMiB"), "%v MiB beside the %v MiB of %s on %s at %s: more than its %v MiB",
				p.MemoryMiB, used, strings.Join(others, ", "), describeDevice(d), p.From.D(), mem)
		}
	}
}

// device is the GPU or MIG slice that a validated pod holds.
func (s *Scenario) device(p *Pod) usage.Device {
	d := usage.Device{Node: p.Node, GPU: strconv.Itoa(p.GPU)}
	if p.Slice != nil {
		node, _ := s.node(p.Node)
		d.MIGProfile = node.MIG[d.GPU][*p.Slice]
		d.MIGInstance = strconv.Itoa(*p.Slice + 1)
	}
	return d
}

func describeDevice(d usage.Device) string {
	if d.MIGProfile != "" {
		return fmt.Sprintf("MIG slice %s (%s) of GPU %s on %s", d.MIGInstance, d.MIGProfile, d.GPU, d.Node)
	}
	return fmt.Sprintf("GPU %s on %s", d.GPU, d.Node)
}

func (s *Scenario) node(name string) (*Node, bool) {
	for i := range s.Nodes {
		if s.Nodes[i].Name == name {
			return &s.Nodes[i], true
		}
	}
	return nil, false
}

// level is the pod's activity at t seconds after its from.
func (a Activity) level(t time.Duration) float64 {
	switch a.Pattern {
	case "constant":
		return a.Level
	case "square":
		if t%(a.On.D()+a.Off.D()) < a.On.D() {
			return a.Level
		}
		return a.Low
	}
	return 0
}

// integral is the activity integrated over [0, t) in seconds.
func (a Activity) integral(t time.Duration) float64 {
	switch a.Pattern {
	case "constant":
		return a.Level * t.Seconds()
	case "square":
		period := a.On.D() + a.Off.D()
		cycles := t / period
		rest := t % period
		on := time.Duration(cycles)*a.On.D() + min(rest, a.On.D())
		return a.Level*on.Seconds() + a.Low*(t-on).Seconds()
	}
	return 0
}
