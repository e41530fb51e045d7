package kube

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	dracel "k8s.io/dynamic-resource-allocation/cel"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

// The names NVIDIA's DRA driver for GPUs publishes (github.com/NVIDIA/k8s-dra-driver-gpu,
// cmd/gpu-kubelet-plugin, followed at commit 22407113 of May 2026, v0.4.0-rc.1+):
// the driver gpu.nvidia.com; whole GPUs named gpu-<minor> and MIG devices
// gpu-<minor>-mig-<profile>-<profileID>-<placementStart>; the attributes
// type ("gpu" or "mig"), uuid, productName (NVML's, e.g. "NVIDIA H100 80GB
// HBM3"), architecture, and for MIG devices profile (e.g. "1g.10gb") and
// parentUUID; the capacity memory in bytes. Its Helm chart's DeviceClasses
// are gpu.nvidia.com (type gpu, extendedResourceName nvidia.com/gpu) and
// mig.nvidia.com (type mig).
const (
	DriverNVIDIAGPU = "gpu.nvidia.com"

	draAttrType       = "type"
	draAttrProduct    = "productName"
	draAttrUUID       = "uuid"
	draAttrProfile    = "profile"
	draAttrParentUUID = "parentUUID"
	draCapMemory      = "memory"

	draTypeGPU = "gpu"
	draTypeMIG = "mig"
)

// DRAObjects are the Dynamic Resource Allocation objects of a cluster
// (resource.k8s.io/v1). A nil *DRAObjects is a cluster without DRA.
type DRAObjects struct {
	Classes   []*resourcev1.DeviceClass
	Slices    []*resourcev1.ResourceSlice
	Claims    []*resourcev1.ResourceClaim
	Templates []*resourcev1.ResourceClaimTemplate
	// TaintRules are the DeviceTaintRules, whose taints the kube-scheduler
	// adds to the devices they select.
	TaintRules []*resourcev1.DeviceTaintRule
	// TaintRulesUnserved: the apiserver does not serve DeviceTaintRules
	// (resource.k8s.io/v1 has them since Kubernetes 1.37), so the taints
	// they would add are unknown.
	TaintRulesUnserved bool
}

// draDevice is one device of a current ResourceSlice, with where it is.
type draDevice struct {
	slice  *resourcev1.ResourceSlice
	device *resourcev1.Device
	node   string
	// taints are the device's taints: its slice's, then those the
	// DeviceTaintRules add.
	taints []cluster.DeviceTaint
}

func (d *draDevice) id() string {
	return cluster.DeviceID(d.slice.Spec.Driver, d.slice.Spec.Pool.Name, d.device.Name)
}

func (d *draDevice) str(name string) string {
	if a, ok := d.device.Attributes[resourcev1.QualifiedName(name)]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

// memory is the device's memory capacity, 0 when it has none.
func (d *draDevice) memory() gpu.MiB {
	if c, ok := d.device.Capacity[draCapMemory]; ok {
		return gpu.MiB(c.Value.Value() / mib)
	}
	return 0
}

// draLocation is where a DRA device lies in the snapshot: a GPU of a node
// and, for a MIG device, its slice (-1 for a whole GPU).
type draLocation struct {
	node  string
	gpu   int
	slice int
	// part: slice is a partition of a partitionable GPU, not a MIG slice
	// of its layout.
	part bool
}

// draView is what the DRA objects say about the snapshot: the GPUs they add
// to each node, where each device lies, and the device classes.
type draView struct {
	gpus      map[string][]cluster.GPU // by node
	locations map[string]draLocation   // by DeviceID
	classes   map[string]*draClass     // by name
	// extended maps an extended resource name (nvidia.com/gpu) to the
	// DeviceClass whose extendedResourceName serves it.
	extended map[corev1.ResourceName]string
	claims   map[string]*resourcev1.ResourceClaim // by namespace/name
	// base is, by node, the index of its first DRA GPU: the device
	// plugin's GPUs come first.
	base map[string]int
	// read: the DRA objects were listed, so a claim or template not
	// among them does not exist.
	read bool
	// devices are the devices read as GPUs or MIG slices, which claims'
	// requests are judged against.
	devices []*draDevice
	// others are the devices of other drivers on the listed nodes, read
	// only for claims' constraints, and heldOthers those of them that a
	// claim's allocation holds, by DeviceID.
	others     []*draDevice
	heldOthers map[string]bool
	// counterSets are the shared counters of the current slices, by
	// driver/pool and counter set name.
	counterSets map[string]map[string]resourcev1.CounterSet
	// taints are the taints of the devices read, by DeviceID.
	taints   map[string][]cluster.DeviceTaint
	warnings []string
}

// warnf adds a warning about the DRA objects.
func (v *draView) warnf(format string, args ...any) {
	v.warnings = append(v.warnings, fmt.Sprintf(format, args...))
}

// draClass is a DeviceClass with its compiled selectors.
type draClass struct {
	class     *resourcev1.DeviceClass
	selectors []dracel.CompilationResult
	broken    bool // a selector does not compile: it selects nothing
	// gpus reports whether the class selects a device that is a GPU.
	gpus bool
}

// celCache compiles the selectors of device classes with the upstream
// evaluator, as the kube-scheduler does.
var celCache = dracel.NewCache(100, dracel.Features{EnableConsumableCapacity: true})

// readDRA reads the GPUs that the ResourceSlices offer on the listed nodes
// (nodes: how many GPUs each has already, from its device plugin),
// the classes that select them and the claims.
func readDRA(c *gpu.Catalogue, objs *DRAObjects, nodes map[string]int) *draView {
	v := &draView{gpus: map[string][]cluster.GPU{}, locations: map[string]draLocation{}, classes: map[string]*draClass{},
		extended: map[corev1.ResourceName]string{}, claims: map[string]*resourcev1.ResourceClaim{}, base: nodes}
	if objs == nil {
		return v
	}
	for _, dc := range objs.Classes {
		cl := &draClass{class: dc}
		for i, sel := range dc.Spec.Selectors {
			if sel.CEL == nil {
				v.warnf("DeviceClass %s: selector %d is not a CEL selector, which gpupack does not know; the class selects no device", dc.Name, i)
				cl.broken = true
				continue
			}
			r := celCache.GetOrCompile(sel.CEL.Expression)
			if r.Error != nil {
				v.warnf("DeviceClass %s: selector %d does not compile (%v); the class selects no device", dc.Name, i, r.Error)
				cl.broken = true
				continue
			}
			cl.selectors = append(cl.selectors, r)
		}
		v.classes[dc.Name] = cl
		if name := dc.Spec.ExtendedResourceName; name != nil && *name != "" {
			if prev, dup := v.extended[corev1.ResourceName(*name)]; dup {
				v.warnf("DeviceClasses %s and %s both serve the extended resource %s; gpupack takes %s", prev, dc.Name, *name, min(prev, dc.Name))
				if dc.Name > prev {
					continue
				}
			}
			v.extended[corev1.ResourceName(*name)] = dc.Name
		}
	}
	v.heldOthers = map[string]bool{}
	for _, claim := range objs.Claims {
		v.claims[claim.Namespace+"/"+claim.Name] = claim
		if a := claim.Status.Allocation; a != nil {
			for _, r := range a.Devices.Results {
				if r.Driver != DriverNVIDIAGPU {
					v.heldOthers[cluster.DeviceID(r.Driver, r.Pool, r.Device)] = true
				}
			}
		}
	}
	v.read = true
	devices, others := v.currentDevices(objs.Slices, nodes)
	v.others = others
	v.taintDevices(devices, objs)
	v.addGPUs(c, devices, nodes)
	v.taints = map[string][]cluster.DeviceTaint{}
	for _, d := range devices {
		if _, ok := v.locations[d.id()]; ok {
			v.devices = append(v.devices, d)
			if len(d.taints) > 0 {
				v.taints[d.id()] = d.taints
			}
		}
	}
	return v
}

// currentDevices lists the devices of each pool's current generation on
// the listed nodes, by node, pool and name, NVIDIA's GPU driver's and the
// other drivers' apart, and keeps the pools' shared counters. What gpupack
// cannot model yet is named in a warning: devices not local to one node,
// consumable capacity.
func (v *draView) currentDevices(all []*resourcev1.ResourceSlice, nodes map[string]int) (gpus, others []*draDevice) {
	latest := map[string]int64{}
	for _, s := range all {
		key := s.Spec.Driver + "/" + s.Spec.Pool.Name
		latest[key] = max(latest[key], s.Spec.Pool.Generation)
	}
	var out []*draDevice
	foreign := map[string]int{} // devices of other drivers, by driver
	for _, s := range all {
		if s.Spec.Pool.Generation < latest[s.Spec.Driver+"/"+s.Spec.Pool.Name] {
			continue // an older generation of the pool, being replaced
		}
		node := ""
		if s.Spec.NodeName != nil {
			node = *s.Spec.NodeName
		}
		if s.Spec.Driver != DriverNVIDIAGPU {
			foreign[s.Spec.Driver] += len(s.Spec.Devices)
			others = append(others, localDevices(s, node, nodes)...)
			continue
		}
		for _, cs := range s.Spec.SharedCounters {
			key := s.Spec.Driver + "/" + s.Spec.Pool.Name
			if v.counterSets == nil {
				v.counterSets = map[string]map[string]resourcev1.CounterSet{}
			}
			if v.counterSets[key] == nil {
				v.counterSets[key] = map[string]resourcev1.CounterSet{}
			}
			v.counterSets[key][cs.Name] = cs
		}
		for i := range s.Spec.Devices {
			d := &draDevice{slice: s, device: &s.Spec.Devices[i], node: node}
			if d.device.NodeName != nil {
				d.node = *d.device.NodeName
			}
			if d.node == "" {
				v.warnf("ResourceSlice %s: device %s is not local to one node (allNodes or a node selector), which gpupack cannot model yet; it is left out", s.Name, d.device.Name)
				continue
			}
			if _, ok := nodes[d.node]; !ok {
				v.warnf("ResourceSlice %s: device %s is on node %s, which was not listed; it is left out", s.Name, d.device.Name, d.node)
				continue
			}
			out = append(out, d)
		}
	}
	for _, driver := range slices.Sorted(maps.Keys(foreign)) {
		v.warnf("ResourceSlices of driver %s (%d devices): not NVIDIA's GPU driver (%s); their devices are not read as GPUs, only for the constraints of claims that also ask for GPUs", driver, foreign[driver], DriverNVIDIAGPU)
	}
	byPlace := func(a, b *draDevice) int {
		return cmp.Or(strings.Compare(a.node, b.node), strings.Compare(a.slice.Spec.Pool.Name, b.slice.Spec.Pool.Name), strings.Compare(a.device.Name, b.device.Name))
	}
	slices.SortFunc(out, byPlace)
	slices.SortFunc(others, byPlace)
	return out, others
}

// localDevices are the devices of another driver's slice that lie on one
// listed node: they are read only for claims' constraints, so the others
// are left out without a word.
func localDevices(s *resourcev1.ResourceSlice, node string, nodes map[string]int) []*draDevice {
	var out []*draDevice
	for i := range s.Spec.Devices {
		d := &draDevice{slice: s, device: &s.Spec.Devices[i], node: node}
		if d.device.NodeName != nil {
			d.node = *d.device.NodeName
		}
		if _, ok := nodes[d.node]; ok && d.node != "" {
			out = append(out, d)
		}
	}
	return out
}

// selects reports whether every selector of the class selects the device,
// with the upstream CEL evaluator.
func (cl *draClass) selects(d *draDevice) (bool, error) {
	if cl.broken {
		return false, nil
	}
	in := dracel.Device{Driver: d.slice.Spec.Driver, AllowMultipleAllocations: d.device.AllowMultipleAllocations,
		Attributes: d.device.Attributes, Capacity: d.device.Capacity}
	for i, sel := range cl.selectors {
		ok, _, err := sel.DeviceMatches(context.Background(), in)
		if err != nil {
			return false, fmt.Errorf("class %s: selector #%d on device %s: CEL runtime error: %w", cl.class.Name, i, d.id(), dracel.EnhanceRuntimeError(err))
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

// classesOf lists the classes that select the device, sorted.
func (v *draView) classesOf(d *draDevice) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(v.classes)) {
		cl := v.classes[name]
		ok, err := cl.selects(d)
		if err != nil {
			v.warnf("DeviceClass %s: evaluating its selectors failed (%v); taken as not selecting the device", name, err)
		}
		if ok {
			out = append(out, name)
			cl.gpus = true
		}
	}
	return out
}

// addGPUs turns the devices into GPUs of their nodes: whole GPUs (type
// gpu) one each, MIG devices (type mig) as the slices of their parent GPU,
// and devices that consume shared counters as partitionable GPUs
// (addPartitionable). Each node gets its whole GPUs first, then its
// partitionable GPUs, then its MIG GPUs.
func (v *draView) addGPUs(c *gpu.Catalogue, devices []*draDevice, nodes map[string]int) {
	model := v.modelOf(c)
	add := v.adder(nodes)
	parents := &migParents{groups: map[migParentKey]*migParent{}}
	parts := &partitionGroups{groups: map[string]*partitionGroup{}}
	for _, d := range devices {
		v.unmodelled(d)
		switch t := d.str(draAttrType); t {
		case draTypeGPU:
			if len(d.device.ConsumesCounters) > 0 {
				parts.add(d, true)
				continue
			}
			v.addWholeGPU(d, model, add)
		case draTypeMIG:
			if len(d.device.ConsumesCounters) > 0 {
				// A partition that is made when a claim gets it
				// (dynamic MIG), not one that exists.
				parts.add(d, false)
				continue
			}
			parents.add(d)
		default:
			v.warnf("ResourceSlice %s: device %s has %s %q, not %q or %q; it is left out", d.slice.Name, d.device.Name, draAttrType, t, draTypeGPU, draTypeMIG)
		}
	}
	v.addPartitionable(parts, model, add)
	for _, p := range parents.order {
		v.addMIGGPU(p, model, add)
	}
}

// modelOf returns the function that finds the model of a device's GPU in
// the catalogue by its productName attribute: nil, with a warning, when
// the device has none; an unlisted model with the device's memory, with a
// warning once per product, when the catalogue does not list it.
func (v *draView) modelOf(c *gpu.Catalogue) func(d *draDevice) *gpu.Model {
	unlisted := map[string]bool{}
	return func(d *draDevice) *gpu.Model {
		product := d.str(draAttrProduct)
		if product == "" {
			v.warnf("ResourceSlice %s: device %s has no %s attribute; it is left out (gpupack needs the model)", d.slice.Name, d.device.Name, draAttrProduct)
			return nil
		}
		m, ok := c.Lookup(product)
		if !ok {
			m = c.Unlisted(product, d.memory())
		}
		if m.Unlisted && !unlisted[product] {
			unlisted[product] = true
			v.warnf("ResourceSlice %s: GPU product %q (attribute %s) is not in gpupack's catalogue; its devices count with the memory of their capacity; their price and MIG geometry are unknown (add the model to a --catalogue file)", d.slice.Name, product, draAttrProduct)
		}
		return m
	}
}

// adder returns the function that appends a GPU to the DRA GPUs of its
// node and records where its devices lie: each of names at its entry of
// slices (-1 for the whole GPU), each partition at its index. nodes gives
// how many GPUs each node has before its DRA GPUs.
func (v *draView) adder(nodes map[string]int) func(node string, g cluster.GPU, names []string, slices []int) {
	return func(node string, g cluster.GPU, names []string, slices []int) {
		idx := nodes[node] + len(v.gpus[node])
		v.gpus[node] = append(v.gpus[node], g)
		for i, name := range names {
			v.locations[cluster.DeviceID(g.DRA.Driver, g.DRA.Pool, name)] = draLocation{node: node, gpu: idx, slice: slices[i]}
		}
		for j, p := range g.DRA.Partitions {
			v.locations[cluster.DeviceID(g.DRA.Driver, g.DRA.Pool, p.Device)] = draLocation{node: node, gpu: idx, slice: j, part: true}
		}
	}
}

// addWholeGPU adds a device of type gpu as one GPU of its memory capacity
// (else its model's usable memory): exclusive, or fractional when the
// device allows multiple allocations.
func (v *draView) addWholeGPU(d *draDevice, model func(*draDevice) *gpu.Model, add func(string, cluster.GPU, []string, []int)) {
	m := model(d)
	if m == nil {
		return
	}
	mem := d.memory()
	if mem == 0 {
		mem = m.Usable
	}
	g := cluster.GPU{Model: m, Memory: mem, UUID: d.str(draAttrUUID), Sharing: cluster.Exclusive,
		DRA: &cluster.DRADevice{Driver: d.slice.Spec.Driver, Pool: d.slice.Spec.Pool.Name, Device: d.device.Name, Classes: v.classesOf(d), Product: d.str(draAttrProduct), Taints: d.taints,
			Capacity: deviceCapacities(d.device.Capacity)}}
	if d.device.AllowMultipleAllocations != nil && *d.device.AllowMultipleAllocations {
		g.Sharing = cluster.Fractional
		g.DRA.Shared = true
	}
	add(d.node, g, []string{d.device.Name}, []int{-1})
}

// migParent is a GPU in MIG mode: the MIG devices on one node that name
// it as their parent (parentUUID; a device that names none is its own
// parent, by its DeviceID).
type migParent struct {
	migParentKey
	devices []*draDevice
}

// migParentKey names a MIG parent GPU by its node and parent.
type migParentKey struct {
	node, parent string
}

// migParents gathers the MIG devices by their parent GPU, in the order
// first met.
type migParents struct {
	groups map[migParentKey]*migParent
	order  []*migParent
}

func (ps *migParents) add(d *draDevice) {
	key := migParentKey{node: d.node, parent: d.str(draAttrParentUUID)}
	if key.parent == "" {
		key.parent = d.id()
	}
	p, ok := ps.groups[key]
	if !ok {
		p = &migParent{migParentKey: key}
		ps.groups[key] = p
		ps.order = append(ps.order, p)
	}
	p.devices = append(p.devices, d)
}

// addMIGGPU adds the GPU whose MIG devices p gathers, with the layout
// they form as its slices; when they form no layout gpupack knows, each
// device counts as one exclusive GPU of its memory, as the scheduler sees
// it, with a warning.
func (v *draView) addMIGGPU(p *migParent, model func(*draDevice) *gpu.Model, add func(string, cluster.GPU, []string, []int)) {
	first := p.devices[0]
	m := model(first)
	if m == nil {
		return
	}
	var profiles, names []string
	for _, d := range p.devices {
		profiles = append(profiles, d.str(draAttrProfile))
		names = append(names, d.device.Name)
	}
	dra := &cluster.DRADevice{Driver: first.slice.Spec.Driver, Pool: first.slice.Spec.Pool.Name, Classes: v.classesOf(first), Product: first.str(draAttrProduct)}
	var layout gpu.Layout
	var err error
	if m.MIG == nil {
		err = fmt.Errorf("gpupack knows no MIG geometry of %s", m.Name)
	} else {
		layout, err = m.MIG.Fit(profiles)
	}
	if err != nil {
		// Still count each MIG device, as one exclusive GPU with its
		// memory, as the scheduler sees it.
		v.warnf("ResourceSlice %s: the MIG devices %v of GPU %s do not form a layout gpupack knows (%v); each counts as one GPU of its memory", first.slice.Name, names, p.parent, err)
		for _, d := range p.devices {
			one := *dra
			one.Device = d.device.Name
			one.Taints = d.taints
			add(p.node, cluster.GPU{Model: m, Memory: d.memory(), UUID: d.str(draAttrUUID), Sharing: cluster.Exclusive, DRA: &one}, []string{d.device.Name}, []int{-1})
		}
		return
	}
	dra.SliceDevices = cluster.InLayout(profiles, names, layout)
	for _, d := range p.devices {
		dra.Taints = append(dra.Taints, d.taints...)
	}
	idx := make([]int, len(layout))
	for i := range idx {
		idx[i] = i
	}
	mem := m.Usable
	add(p.node, cluster.GPU{Model: m, Memory: mem, UUID: first.str(draAttrParentUUID), Sharing: cluster.MIG, Layout: layout, DRA: dra}, dra.SliceDevices, idx)
}

// unmodelled warns about the features of a device that gpupack does not
// model yet, naming the device, its slice and the feature.
func (v *draView) unmodelled(d *draDevice) {
	warn := func(feature, effect string) {
		v.warnf("ResourceSlice %s: device %s uses %s, which gpupack does not model yet; %s", d.slice.Name, d.device.Name, feature, effect)
	}
	if d.str(draAttrType) == draTypeMIG {
		for name, c := range d.device.Capacity {
			if c.RequestPolicy != nil {
				warn(fmt.Sprintf("consumable capacity %s (DRAConsumableCapacity) on a MIG device", name), "claims' capacity requests are not judged on it")
				break
			}
		}
	}
	if len(d.device.BindingConditions) > 0 {
		warn("binding conditions (DRADeviceBindingConditions)", "it counts as ready")
	}
}

// podClaims reads the pod's ResourceClaims (spec.resourceClaims, the claim
// names in status.resourceClaimStatuses, and the claim of its extended
// resources) and, for a pod that asks for no GPU by resources, the GPU
// request that its claims stand for. For a bound pod the devices come from
// the allocations.
func (v *draView) podClaims(p *corev1.Pod, out *cluster.Pod, templates map[string]*resourcev1.ResourceClaimTemplate) []string {
	var warnings []string
	warn := podWarn(p, &warnings)
	claims := v.specClaims(p, templates, warn)
	if c, ok := v.extendedClaim(p, out); ok {
		claims = append(claims, c)
	}
	held, heldDevices := v.allocations(claims, out, warn)
	if len(out.Claims) == 0 {
		return warnings
	}
	if out.NodeName != "" && len(held) > 0 {
		warnings = append(warnings, v.bindDevices(p, out, held, heldDevices)...)
		// A bound pod's claim with constraints is read as a pending
		// pod's is, so that the plan sees which other devices it aligns
		// its GPU with (plan's AlignedDevices) and their values.
		for i := range out.Claims {
			if c := &out.Claims[i]; len(c.Constraints) > 0 {
				v.evaluate(p.Namespace, c)
			}
		}
		return warnings
	}
	v.unlistedClasses(out.Claims, warn)
	if out.GPU.Kind == cluster.NoGPU {
		out.GPU = v.claimRequest(out.Claims)
	}
	if out.NodeName == "" {
		// The claim of an extended resource too: the scheduler allocates
		// it through its class wherever no device plugin advertises the
		// resource.
		for i := range out.Claims {
			if c := &out.Claims[i]; len(c.Allocated) == 0 {
				v.evaluate(p.Namespace, c)
				unjudgedConstraints(c, warn)
			}
		}
	}
	return warnings
}

// podClaim is a claim of a pod with its ResourceClaim (nil when it was not
// listed, or is not made yet).
type podClaim struct {
	claim *cluster.Claim
	obj   *resourcev1.ResourceClaim
}

// specClaims reads the claims of the pod's spec.resourceClaims, each by
// its name or made from a template (its name then in
// status.resourceClaimStatuses), with the requests and constraints of the
// claim, else of the template. A claim or template that was not listed
// leaves them unknown, with a warning, and the claim Missing when the DRA
// objects were listed.
func (v *draView) specClaims(p *corev1.Pod, templates map[string]*resourcev1.ResourceClaimTemplate, warn func(format string, args ...any)) []podClaim {
	statusNames := map[string]string{}
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			statusNames[s.Name] = *s.ResourceClaimName
		}
	}
	var claims []podClaim
	for _, pc := range p.Spec.ResourceClaims {
		c := &cluster.Claim{PodClaim: pc.Name}
		switch {
		case pc.ResourceClaimName != nil:
			c.Name = *pc.ResourceClaimName
		case pc.ResourceClaimTemplateName != nil:
			c.Template = *pc.ResourceClaimTemplateName
			c.Name = statusNames[pc.Name]
		}
		var obj *resourcev1.ResourceClaim
		if c.Name != "" {
			obj = v.claims[p.Namespace+"/"+c.Name]
		}
		switch {
		case obj != nil:
			c.Requests = claimRequests(obj.Spec.Devices.Requests)
			c.Constraints = claimConstraints(obj.Spec.Devices.Constraints)
		case c.Template != "":
			if t, ok := templates[p.Namespace+"/"+c.Template]; ok {
				c.Requests = claimRequests(t.Spec.Spec.Devices.Requests)
				c.Constraints = claimConstraints(t.Spec.Spec.Devices.Constraints)
			} else {
				warn("ResourceClaimTemplate %s (claim %s) was not listed; its requests are unknown", c.Template, pc.Name)
				c.Missing = v.read
			}
		case c.Name != "":
			warn("ResourceClaim %s (claim %s) was not listed; its requests are unknown", c.Name, pc.Name)
			c.Missing = v.read
		}
		claims = append(claims, podClaim{c, obj})
	}
	return claims
}

// extendedClaim is the claim through which the scheduler serves the pod's
// extended resources (status.extendedResourceClaimStatus); or, for a pod
// without one that asks for whole nvidia.com/gpu that a DeviceClass
// serves, the claim the scheduler will make through the class. false:
// neither.
func (v *draView) extendedClaim(p *corev1.Pod, out *cluster.Pod) (podClaim, bool) {
	if s := p.Status.ExtendedResourceClaimStatus; s != nil && s.ResourceClaimName != "" {
		var res corev1.ResourceName
		for _, m := range s.RequestMappings {
			res = corev1.ResourceName(m.ResourceName)
			break
		}
		c := &cluster.Claim{Name: s.ResourceClaimName, ExtendedResource: string(res)}
		obj := v.claims[p.Namespace+"/"+s.ResourceClaimName]
		if obj != nil {
			c.Requests = claimRequests(obj.Spec.Devices.Requests)
		}
		return podClaim{c, obj}, true
	}
	if out.GPU.Kind == cluster.WholeGPUs && !out.GPU.SharedResource {
		if class, ok := v.extended[ResourceGPU]; ok {
			// The scheduler will serve the request through the class;
			// the claim exists once the pod is bound.
			return podClaim{&cluster.Claim{ExtendedResource: string(ResourceGPU),
				Requests: []cluster.ClaimRequest{{Name: string(ResourceGPU), DeviceClass: class, Count: out.GPU.Count}}}, nil}, true
		}
	}
	return podClaim{}, false
}

// allocations gives each claim the devices of its allocation and adds the
// claims to the pod, in order. It returns where the allocated GPUs that
// gpupack read lie, with their devices. An allocated device whose
// NoExecute taint the allocation does not tolerate, and one of NVIDIA's
// driver that is not among the GPUs read, are warned about.
func (v *draView) allocations(claims []podClaim, out *cluster.Pod, warn func(format string, args ...any)) ([]draLocation, []cluster.ClaimDevice) {
	var held []draLocation
	var heldDevices []cluster.ClaimDevice
	for _, f := range claims {
		if f.obj != nil && f.obj.Status.Allocation != nil {
			for _, r := range f.obj.Status.Allocation.Devices.Results {
				cd := claimDevice(r)
				f.claim.Allocated = append(f.claim.Allocated, cd)
				if msg := v.evicted(f.claim.Name, r); msg != "" {
					warn("%s", msg)
				}
				if loc, ok := v.locations[cd.ID()]; ok {
					held = append(held, loc)
					heldDevices = append(heldDevices, cd)
				} else if cd.Driver == DriverNVIDIAGPU {
					warn("its claim %s holds device %s, which is not among the GPUs gpupack read (see the warnings on its ResourceSlice); the pod is placed as if it had no record", f.claim.Name, cd.ID())
				}
			}
		}
		out.Claims = append(out.Claims, *f.claim)
	}
	return held, heldDevices
}

// claimDevice converts a device of a claim's allocation.
func claimDevice(r resourcev1.DeviceRequestAllocationResult) cluster.ClaimDevice {
	cd := cluster.ClaimDevice{Request: r.Request, Driver: r.Driver, Pool: r.Pool, Device: r.Device}
	if r.ShareID != nil {
		cd.ShareID = string(*r.ShareID)
	}
	for name, q := range r.ConsumedCapacity {
		if cd.ConsumedCapacity == nil {
			cd.ConsumedCapacity = map[string]string{}
		}
		cd.ConsumedCapacity[string(name)] = q.String()
	}
	return cd
}

// unlistedClasses warns about each request, and each alternative of one,
// whose DeviceClass was not listed: it is not counted as a GPU request.
func (v *draView) unlistedClasses(claims []cluster.Claim, warn func(format string, args ...any)) {
	for _, c := range claims {
		for _, r := range c.Requests {
			for _, alt := range append([]cluster.ClaimRequest{r}, r.FirstAvailable...) {
				if _, ok := v.classes[alt.DeviceClass]; alt.DeviceClass != "" && !ok {
					warn("claim %s, request %s: DeviceClass %s was not listed; the request is not counted as a GPU request", cmp.Or(c.Name, c.PodClaim), alt.Name, alt.DeviceClass)
				}
			}
		}
	}
}

// evaluate judges each request of an unallocated claim against every
// device read, as the kube-scheduler's allocator selects devices
// (structured/internal/stable, isSelectable and selectorsMatch, v0.37.2):
// the class's selectors first, then the request's, with the upstream CEL
// evaluator; a selector that fails to evaluate is recorded with the
// allocator's own error. A request whose class was not listed, or selects
// no GPU (gpupack reads only GPUs), is left unevaluated.
func (v *draView) evaluate(namespace string, c *cluster.Claim) {
	claimName := namespace + "/" + c.Ref()
	for i := range c.Requests {
		r := &c.Requests[i]
		alts := []*cluster.ClaimRequest{r}
		if len(r.FirstAvailable) > 0 {
			alts = alts[:0]
			for j := range r.FirstAvailable {
				alts = append(alts, &r.FirstAvailable[j])
			}
		}
		for _, alt := range alts {
			cl, ok := v.classes[alt.DeviceClass]
			if !ok {
				continue // gpupack reads no devices of it
			}
			if !v.classMeansGPU(cl) {
				v.readOthers(alt, cl)
				continue
			}
			var selectors []dracel.CompilationResult
			compileErr := ""
			for k, expr := range alt.Selectors {
				res := celCache.GetOrCompile(expr)
				if res.Error != nil {
					compileErr = fmt.Sprintf("claim %s: selector #%d: CEL compile error: %v", claimName, k, res.Error)
					break
				}
				selectors = append(selectors, res)
			}
			alt.Evaluated = true
			for _, d := range v.devices {
				id := d.id()
				if ok, err := cl.selects(d); err != nil {
					setSelectorError(alt, id, err.Error())
					continue
				} else if !ok {
					continue
				}
				if compileErr != "" {
					setSelectorError(alt, id, compileErr)
					continue
				}
				in := dracel.Device{Driver: d.slice.Spec.Driver, AllowMultipleAllocations: d.device.AllowMultipleAllocations,
					Attributes: d.device.Attributes, Capacity: d.device.Capacity}
				accepted := true
				for k, sel := range selectors {
					ok, _, err := sel.DeviceMatches(context.Background(), in)
					if err != nil {
						setSelectorError(alt, id, fmt.Sprintf("claim %s: selector #%d on device %s: CEL runtime error: %v", claimName, k, id, dracel.EnhanceRuntimeError(err)))
						accepted = false
						break
					}
					if !ok {
						accepted = false
						break
					}
				}
				if accepted {
					alt.Accepts = append(alt.Accepts, id)
				}
				if compileErr == "" {
					readCapacity(alt, alt.Selectors, selectors, id, in)
				}
			}
			slices.Sort(alt.Accepts)
			slices.Sort(alt.CapacityRejects)
			slices.Sort(alt.CapacityAccepts)
		}
	}
	v.constraintValues(c)
}

// readOthers reads the devices of other drivers that a request of a class
// that selects no GPU accepts (its class's selectors, then its own, as in
// evaluate): they are not allocated, only read for the claim's
// constraints. A selector that does not compile or fails on a device
// accepts none there.
func (v *draView) readOthers(alt *cluster.ClaimRequest, cl *draClass) {
	var selectors []dracel.CompilationResult
	for _, expr := range alt.Selectors {
		res := celCache.GetOrCompile(expr)
		if res.Error != nil {
			return
		}
		selectors = append(selectors, res)
	}
	alt.OthersRead = true
	for _, d := range v.others {
		if ok, err := cl.selects(d); err != nil || !ok {
			continue
		}
		in := dracel.Device{Driver: d.slice.Spec.Driver, AllowMultipleAllocations: d.device.AllowMultipleAllocations,
			Attributes: d.device.Attributes, Capacity: d.device.Capacity}
		accepted := true
		for _, sel := range selectors {
			if ok, _, err := sel.DeviceMatches(context.Background(), in); err != nil || !ok {
				accepted = false
				break
			}
		}
		if accepted {
			alt.Others = append(alt.Others, cluster.OtherDevice{ID: d.id(), Node: d.node, Held: v.heldOthers[d.id()]})
		}
	}
}

// readCapacity judges a device that the request's class selects by the
// request's selectors on capacity (device.capacity) apart from its others,
// so that diagnose can tell a request refused for what its devices hold
// (memory) from one refused for what they are (placement): it adds the
// device to CapacityRejects when the other selectors accept it and a
// capacity selector does not, and to CapacityAccepts when every capacity
// selector does. A selector that fails to evaluate matches nothing here.
func readCapacity(alt *cluster.ClaimRequest, exprs []string, selectors []dracel.CompilationResult, id string, in dracel.Device) {
	capOK, otherOK, any := true, true, false
	for k, sel := range selectors {
		ok, _, err := sel.DeviceMatches(context.Background(), in)
		ok = ok && err == nil
		if cluster.ReadsCapacity(exprs[k]) {
			any = true
			capOK = capOK && ok
		} else {
			otherOK = otherOK && ok
		}
	}
	if !any {
		return
	}
	if capOK {
		alt.CapacityAccepts = append(alt.CapacityAccepts, id)
	} else if otherOK {
		alt.CapacityRejects = append(alt.CapacityRejects, id)
	}
}

// unjudgedConstraints warns of each constraint of the claim that covers a
// request gpupack read no devices for (its class was not listed, or a
// selector does not compile): the constraint is judged without them, so
// the claim may be called placeable when the kube-scheduler cannot
// allocate it.
func unjudgedConstraints(c *cluster.Claim, warn func(format string, args ...any)) {
	for _, k := range c.Constraints {
		var other []string
		for _, r := range c.Requests {
			for _, alt := range r.Alternatives() {
				if !alt.Evaluated && !alt.OthersRead && k.Applies(r.Name) && !slices.Contains(other, r.Name) {
					other = append(other, r.Name)
				}
			}
		}
		if len(other) > 0 {
			warn("claim %s: its constraint %s %s covers request(s) %s, whose devices gpupack could not read: the constraint is judged without them, so whether they can share the GPUs' value is not checked",
				c.Ref(), constraintKind(k), k.Attribute(), strings.Join(other, ", "))
		}
	}
}

func constraintKind(k cluster.ClaimConstraint) string {
	if k.MatchAttribute != "" {
		return "matchAttribute"
	}
	return "distinctAttribute"
}

// constraintValues reads, for each constraint of the claim, the
// attribute's value on every device its requests accept.
func (v *draView) constraintValues(c *cluster.Claim) {
	if len(c.Constraints) == 0 {
		return
	}
	accepted := map[string]bool{}
	for _, r := range c.Requests {
		for _, alt := range r.Alternatives() {
			for _, id := range alt.Accepts {
				accepted[id] = true
			}
			for _, o := range alt.Others {
				accepted[o.ID] = true
			}
		}
	}
	for i := range c.Constraints {
		k := &c.Constraints[i]
		k.Evaluated = true
		for _, d := range slices.Concat(v.devices, v.others) {
			id := d.id()
			if !accepted[id] {
				continue
			}
			if val, ok := attributeValue(d, k.Attribute()); ok {
				if k.Values == nil {
					k.Values = map[string]string{}
				}
				k.Values[id] = val
			}
		}
	}
}

// attributeValue is the device's value of the fully qualified attribute,
// typed as the allocator compares values (structured/internal/stable,
// lookupAttribute and matchAttributeConstraint, v0.37.2): the name as
// given, or, when its domain is the driver's, the bare name.
func attributeValue(d *draDevice, name string) (string, bool) {
	a, ok := d.device.Attributes[resourcev1.QualifiedName(name)]
	if !ok {
		domain, bare, found := strings.Cut(name, "/")
		if !found || domain != d.slice.Spec.Driver {
			return "", false
		}
		if a, ok = d.device.Attributes[resourcev1.QualifiedName(bare)]; !ok {
			return "", false
		}
	}
	switch {
	case a.StringValue != nil:
		return "string:" + *a.StringValue, true
	case a.IntValue != nil:
		return fmt.Sprintf("int:%d", *a.IntValue), true
	case a.BoolValue != nil:
		return fmt.Sprintf("bool:%t", *a.BoolValue), true
	case a.VersionValue != nil:
		return "version:" + *a.VersionValue, true
	}
	return "", false // a type the allocator cannot compare
}

// claimConstraints converts a claim's device constraints.
func claimConstraints(in []resourcev1.DeviceConstraint) []cluster.ClaimConstraint {
	var out []cluster.ClaimConstraint
	for _, k := range in {
		c := cluster.ClaimConstraint{Requests: k.Requests}
		if k.MatchAttribute != nil {
			c.MatchAttribute = string(*k.MatchAttribute)
		}
		if k.DistinctAttribute != nil {
			c.DistinctAttribute = string(*k.DistinctAttribute)
		}
		out = append(out, c)
	}
	return out
}

// bindDevices sets a bound pod's GPU request and devices from the GPUs its
// claims' allocations hold on its node.
func (v *draView) bindDevices(p *corev1.Pod, out *cluster.Pod, held []draLocation, devices []cluster.ClaimDevice) []string {
	var warnings []string
	warn := podWarn(p, &warnings)
	gpus := v.gpus[out.NodeName]
	var whole, slices, parts []cluster.Device
	var shares []cluster.ClaimDevice
	var sharedAt []cluster.Device
	for i, loc := range held {
		if loc.node != out.NodeName {
			warn("its claim's device %s is on node %s, not on %s where the pod is bound; it is not counted", devices[i].ID(), loc.node, out.NodeName)
			continue
		}
		dev := cluster.Device{GPU: loc.gpu, Slice: loc.slice}
		g := gpuAt(gpus, loc.gpu, v.base[out.NodeName])
		switch {
		case loc.part:
			parts = append(parts, dev)
		case loc.slice >= 0:
			slices = append(slices, dev)
		case g != nil && g.DRA.Shared:
			shares = append(shares, devices[i])
			sharedAt = append(sharedAt, dev)
		default:
			whole = append(whole, dev)
		}
	}
	device := func(d cluster.Device) *cluster.GPU { return gpuAt(gpus, d.GPU, v.base[out.NodeName]) }
	switch {
	case len(whole) > 0:
		out.GPU = cluster.Request{Kind: cluster.WholeGPUs, Count: len(whole), Memory: out.GPU.Memory}
		out.Devices = whole
		if len(slices)+len(parts)+len(shares) > 0 {
			warn("its claims hold %d whole GPUs and %d MIG devices and %d shares; gpupack counts only the whole GPUs", len(whole), len(slices)+len(parts), len(shares))
		}
	case len(parts)+len(slices) > 0:
		// Every partition and MIG device the claims hold is counted; the
		// request names the first one's profile.
		out.Devices = append(parts, slices...)
		first := out.Devices[0]
		profile := ""
		if len(parts) > 0 {
			p := device(first).DRA.Partitions[first.Slice]
			profile = cmp.Or(p.Profile, p.Device)
		} else {
			profile = device(first).Layout[first.Slice].Profile
		}
		out.GPU = cluster.Request{Kind: cluster.MIGSlice, Profile: profile}
		if len(shares) > 0 {
			warn("its claims hold %d partitions or MIG devices and %d shares; gpupack counts the partitions and MIG devices", len(parts)+len(slices), len(shares))
		}
	case len(shares) > 0:
		out.GPU = shareRequest(shares[0])
		out.Devices = sharedAt[:1]
		if len(shares) > 1 {
			warn("its claims hold %d shares of devices; gpupack models one share per pod and counts the first", len(shares))
		}
	}
	return warnings
}

func gpuAt(gpus []cluster.GPU, index, base int) *cluster.GPU {
	if k := index - base; k >= 0 && k < len(gpus) {
		return &gpus[k]
	}
	return nil
}

// shareRequest is the request of a share of a device that allows multiple
// allocations: the memory it consumes, or, when it consumes none, the
// smallest fraction, so that it counts as one share.
func shareRequest(d cluster.ClaimDevice) cluster.Request {
	if text, ok := d.ConsumedCapacity[draCapMemory]; ok {
		if m, err := cluster.ParseMemory(text); err == nil && m > 0 {
			return cluster.Request{Kind: cluster.GPUMemory, Memory: m}
		}
	}
	return cluster.Request{Kind: cluster.Fraction, Milli: 1}
}

// claimRequest is the GPU request that an unallocated pod's claims stand
// for: each request's device class (its first alternative's) decides:
// MIG devices of one profile are a MIG slice, other GPUs whole GPUs, and
// classes that select no GPU and do not name NVIDIA's driver no GPU.
func (v *draView) claimRequest(claims []cluster.Claim) cluster.Request {
	count := 0
	profile := ""
	for _, c := range claims {
		for _, r := range c.Requests {
			if len(r.FirstAvailable) > 0 {
				r = r.FirstAvailable[0]
			}
			cl, ok := v.classes[r.DeviceClass]
			if !ok || !v.classMeansGPU(cl) {
				continue
			}
			if p := v.classProfile(r.DeviceClass); p != "" {
				profile = p
				continue
			}
			count += max(r.Count, 1)
		}
	}
	switch {
	case count > 0:
		return cluster.Request{Kind: cluster.WholeGPUs, Count: count}
	case profile != "":
		return cluster.Request{Kind: cluster.MIGSlice, Profile: profile}
	}
	return cluster.Request{}
}

// classMeansGPU reports whether the class selects GPUs: it selects one of
// the GPUs read, or one of its selectors names NVIDIA's GPU driver (so that
// a claim is a GPU claim even when no GPU is published yet).
func (v *draView) classMeansGPU(cl *draClass) bool {
	if cl.gpus {
		return true
	}
	for _, sel := range cl.class.Spec.Selectors {
		if sel.CEL != nil && strings.Contains(sel.CEL.Expression, DriverNVIDIAGPU) {
			return true
		}
	}
	return false
}

// classProfile is the MIG profile of the slices the class selects when
// it selects MIG slices of one profile only and no whole GPU; "" otherwise.
func (v *draView) classProfile(class string) string {
	profile := ""
	for _, gpus := range v.gpus {
		for _, g := range gpus {
			if !slices.Contains(g.DRA.Classes, class) {
				continue
			}
			if g.Sharing != cluster.MIG {
				return ""
			}
			for _, sl := range g.Layout {
				if profile != "" && sl.Profile != profile {
					return ""
				}
				profile = sl.Profile
			}
		}
	}
	return profile
}

func setSelectorError(r *cluster.ClaimRequest, id, msg string) {
	if r.SelectorErrors == nil {
		r.SelectorErrors = map[string]string{}
	}
	r.SelectorErrors[id] = msg
}

// claimRequests converts a claim's device requests.
func claimRequests(in []resourcev1.DeviceRequest) []cluster.ClaimRequest {
	var out []cluster.ClaimRequest
	for _, r := range in {
		cr := cluster.ClaimRequest{Name: r.Name}
		if r.Exactly != nil {
			fill(&cr, r.Exactly.DeviceClassName, r.Exactly.AllocationMode, r.Exactly.Count, r.Exactly.Selectors, r.Exactly.Capacity)
			cr.Tolerations = Tolerations(r.Exactly.Tolerations)
		}
		for _, sub := range r.FirstAvailable {
			sr := cluster.ClaimRequest{Name: sub.Name}
			fill(&sr, sub.DeviceClassName, sub.AllocationMode, sub.Count, sub.Selectors, sub.Capacity)
			sr.Tolerations = Tolerations(sub.Tolerations)
			cr.FirstAvailable = append(cr.FirstAvailable, sr)
		}
		out = append(out, cr)
	}
	return out
}

func fill(cr *cluster.ClaimRequest, class string, mode resourcev1.DeviceAllocationMode, count int64, selectors []resourcev1.DeviceSelector, capacity *resourcev1.CapacityRequirements) {
	cr.DeviceClass = class
	if capacity != nil {
		for name, q := range capacity.Requests {
			if cr.Capacity == nil {
				cr.Capacity = map[string]cluster.Quantity{}
			}
			cr.Capacity[string(name)] = capacityQuantity(q)
		}
	}
	if mode == resourcev1.DeviceAllocationModeAll {
		cr.All = true
	} else {
		cr.Count = int(max(count, 1))
	}
	for _, s := range selectors {
		if s.CEL != nil {
			cr.Selectors = append(cr.Selectors, s.CEL.Expression)
		}
	}
}

// deviceCapacities converts a device's capacities, sorted by name, with
// their request policies (DRAConsumableCapacity).
func deviceCapacities(in map[resourcev1.QualifiedName]resourcev1.DeviceCapacity) []cluster.DeviceCapacity {
	var out []cluster.DeviceCapacity
	for _, name := range slices.Sorted(maps.Keys(in)) {
		c := in[name]
		dc := cluster.DeviceCapacity{Name: string(name), Value: capacityQuantity(c.Value)}
		if p := c.RequestPolicy; p != nil {
			dc.Policy = &cluster.CapacityPolicy{Default: quantityPtr(p.Default)}
			for _, v := range p.ValidValues {
				dc.Policy.ValidValues = append(dc.Policy.ValidValues, capacityQuantity(v))
			}
			if r := p.ValidRange; r != nil {
				dc.Policy.Min, dc.Policy.Max, dc.Policy.Step = quantityPtr(r.Min), quantityPtr(r.Max), quantityPtr(r.Step)
			}
		}
		out = append(out, dc)
	}
	return out
}

// capacityQuantity is a Kubernetes quantity in whole units, rounded up as the
// allocator's integer arithmetic reads it (Value).
func capacityQuantity(q resource.Quantity) cluster.Quantity {
	return cluster.Quantity(max(q.Value(), 0))
}

func quantityPtr(q *resource.Quantity) *cluster.Quantity {
	if q == nil {
		return nil
	}
	v := capacityQuantity(*q)
	return &v
}
