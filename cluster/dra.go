package cluster

import (
	"regexp"
	"strings"

	"github.com/gpupack/gpupack/gpu"
)

// DRADevice is the Dynamic Resource Allocation identity of a GPU offered
// through a ResourceSlice (resource.k8s.io/v1): the driver, pool and device
// that a ResourceClaim's allocation names. A GPU without it is offered by the
// device plugin.
type DRADevice struct {
	Driver string `json:"driver"`
	Pool   string `json:"pool"`
	// Device is the name of the whole-GPU device in the pool; empty for a
	// MIG GPU whose whole device is not offered (static MIG), whose slices
	// are named by SliceDevices.
	Device string `json:"device,omitempty"`
	// SliceDevices (MIG GPUs) names the DRA device of each slice of the
	// GPU's layout, by index in GPU.Layout.
	SliceDevices []string `json:"sliceDevices,omitempty"`
	// Classes are the DeviceClasses whose selectors select the device
	// (for a MIG GPU: its slices), sorted.
	Classes []string `json:"classes,omitempty"`
	// Shared: the device allows multiple allocations
	// (allowMultipleAllocations), so several claims may hold a share of it.
	Shared bool `json:"shared,omitempty"`
	// Product is the device's product name attribute as the driver
	// publishes it (NVIDIA's productName, e.g. "NVIDIA H100 80GB HBM3"),
	// which claims' selectors compare with; empty when unknown.
	Product string `json:"product,omitempty"`
	// CounterSets (a partitionable GPU, DRAPartitionableDevices) are the
	// shared counters its devices consume; Consumes is what the whole
	// device (Device) consumes of them, and Partitions are the devices
	// made on demand (dynamic MIG), which a pod's Device names by index
	// (Device.Slice). Optional in v1alpha2.
	CounterSets []CounterSet `json:"counterSets,omitempty"`
	Consumes    []CounterUse `json:"consumes,omitempty"`
	Partitions  []Partition  `json:"partitions,omitempty"`
	// Taints are the device taints of the GPU's device or of its slices
	// (DRADeviceTaints), from the ResourceSlice and from DeviceTaintRules,
	// each naming its device.
	Taints []DeviceTaint `json:"taints,omitempty"`
	// Capacity are the whole device's capacities (device.capacity), by
	// name, with their request policies; claims' capacity requests are
	// judged against them, and a shared device's claims consume them.
	Capacity []DeviceCapacity `json:"capacity,omitempty"`
}

// CapacityIndex is the index of the named capacity in Capacity, -1 when
// the device has none of that name.
func (d *DRADevice) CapacityIndex(name string) int {
	for i := range d.Capacity {
		if d.Capacity[i].Name == name {
			return i
		}
	}
	return -1
}

// Names lists the DRA device names behind the GPU: the whole device, the
// slices and the partitions.
func (d *DRADevice) Names() []string {
	var out []string
	if d.Device != "" {
		out = append(out, d.Device)
	}
	out = append(out, d.SliceDevices...)
	for _, p := range d.Partitions {
		out = append(out, p.Device)
	}
	return out
}

// Claim is a ResourceClaim that a pod uses (pod.spec.resourceClaims), with
// what it asks for and, once allocated, which devices it got.
type Claim struct {
	// Name is the ResourceClaim's name, in the pod's namespace; empty when
	// the claim of a template has not been created yet.
	Name string `json:"name,omitempty"`
	// PodClaim is the entry's name in pod.spec.resourceClaims; empty for
	// the claim of ExtendedResource.
	PodClaim string `json:"podClaim,omitempty"`
	// ExtendedResource (e.g. nvidia.com/gpu) is set on the claim that
	// serves a pod's extended-resource request through a DeviceClass's
	// extendedResourceName (the kube-scheduler makes it when it binds).
	ExtendedResource string `json:"extendedResource,omitempty"`
	// Template is the ResourceClaimTemplate the claim is made from, if any.
	Template string         `json:"template,omitempty"`
	Requests []ClaimRequest `json:"requests,omitempty"`
	// Constraints are the claim's spec.devices.constraints.
	Constraints []ClaimConstraint `json:"constraints,omitempty"`
	// Allocated holds the devices of the claim's allocation
	// (status.allocation.devices.results); empty while unallocated.
	Allocated []ClaimDevice `json:"allocated,omitempty"`
	// Missing: the ResourceClaim (or, while the claim is not made yet,
	// its ResourceClaimTemplate) does not exist, so no scheduler
	// considers the pod until it does.
	Missing bool `json:"missing,omitempty"`
}

// Ref is how a claim is named in reasons and findings: its
// ResourceClaim's name, else the pod's entry for it, else the extended
// resource it serves (a claim the scheduler makes only when it binds).
func (c *Claim) Ref() string {
	switch {
	case c.Name != "":
		return c.Name
	case c.PodClaim != "":
		return c.PodClaim
	}
	return c.ExtendedResource
}

// capacitySelector finds, in a CEL selector, a read of a device's capacity.
var capacitySelector = regexp.MustCompile(`\bdevice\s*\.\s*capacity\b`)

// ReadsCapacity reports whether a request's CEL selector reads the
// device's capacity (device.capacity, such as its memory), as opposed to
// only its attributes and driver: what the device holds, not what it is.
func ReadsCapacity(selector string) bool { return capacitySelector.MatchString(selector) }

// ClaimRequest is one request of a claim (spec.devices.requests): exactly
// one device class, or alternatives (firstAvailable) tried in order.
type ClaimRequest struct {
	Name        string `json:"name"`
	DeviceClass string `json:"deviceClass,omitempty"`
	// Count is the number of devices asked for (allocationMode
	// ExactCount); with All (allocationMode All) it is 0.
	Count int  `json:"count,omitempty"`
	All   bool `json:"all,omitempty"`
	// Selectors are the request's CEL selector expressions.
	Selectors []string `json:"selectors,omitempty"`
	// Tolerations are the device taints the request tolerates.
	Tolerations []DeviceToleration `json:"tolerations,omitempty"`
	// Capacity is the request's capacity.requests (DRAConsumableCapacity):
	// how much of each named capacity of a device it asks for.
	Capacity map[string]Quantity `json:"capacity,omitempty"`
	// FirstAvailable are the alternatives, in order of preference, each
	// with its own device class, count and selectors.
	FirstAvailable []ClaimRequest `json:"firstAvailable,omitempty"`
	// Evaluated: the loader judged the class and the selectors against
	// every DRA device of the snapshot with the kube-scheduler's own CEL
	// evaluator, and Accepts and SelectorErrors hold the answer (empty
	// Accepts: no device). A request that was not evaluated is judged as
	// the plain GPU request it stands for. With alternatives, each
	// alternative carries its own answer.
	Evaluated bool `json:"evaluated,omitempty"`
	// Accepts are the DeviceIDs that the class and the selectors select,
	// sorted.
	Accepts []string `json:"accepts,omitempty"`
	// SelectorErrors maps a DeviceID to the allocator's error when a
	// selector fails to evaluate on that device (a CEL runtime error): the
	// kube-scheduler aborts the pod's scheduling cycle with it.
	SelectorErrors map[string]string `json:"selectorErrors,omitempty"`
	// For a request whose selectors read the devices' capacity
	// (device.capacity, such as memory), as evaluated:
	// CapacityRejects are the DeviceIDs that the class and the other
	// selectors accept and a capacity selector rejects, and
	// CapacityAccepts those of the class that every capacity selector
	// accepts, whatever the others say; both sorted.
	CapacityRejects []string `json:"capacityRejects,omitempty"`
	CapacityAccepts []string `json:"capacityAccepts,omitempty"`
	// OthersRead: the request's class selects devices of another driver
	// than the GPUs' (a NIC), which gpupack does not allocate; Others are
	// those that the class and the selectors accept, read only so that a
	// constraint covering the request and GPU requests (matchAttribute
	// resource.kubernetes.io/numaNode) is judged with them.
	OthersRead bool          `json:"othersRead,omitempty"`
	Others     []OtherDevice `json:"others,omitempty"`
}

// OtherDevice is a device of another driver than the GPUs' that a
// request accepts: its DeviceID, its node, and whether a claim's
// allocation holds it.
type OtherDevice struct {
	ID   string `json:"id"`
	Node string `json:"node"`
	Held bool   `json:"held,omitempty"`
}

// ClaimConstraint is one of a claim's spec.devices.constraints: the
// devices allocated for the named requests (all the claim's requests when
// empty; "request" names all its subrequests, "request/subrequest" one)
// must all have the attribute, with one value (MatchAttribute) or each a
// different value (DistinctAttribute).
type ClaimConstraint struct {
	Requests          []string `json:"requests,omitempty"`
	MatchAttribute    string   `json:"matchAttribute,omitempty"`
	DistinctAttribute string   `json:"distinctAttribute,omitempty"`
	// Values are the attribute's value on each device the claim's
	// requests accept, by DeviceID, typed as the allocator compares them
	// ("string:x", "int:3", "bool:true", "version:1.2.3"); a device
	// without the attribute is absent. Evaluated: the loader read them.
	Evaluated bool              `json:"evaluated,omitempty"`
	Values    map[string]string `json:"values,omitempty"`
}

// Attribute is the constrained attribute's name.
func (c *ClaimConstraint) Attribute() string {
	if c.MatchAttribute != "" {
		return c.MatchAttribute
	}
	return c.DistinctAttribute
}

// Applies reports whether the constraint covers the request named
// "request" or "request/subrequest", as the allocator matches names.
func (c *ClaimConstraint) Applies(request string) bool {
	if len(c.Requests) == 0 {
		return true
	}
	base, _, _ := strings.Cut(request, "/")
	for _, r := range c.Requests {
		if r == request || r == base {
			return true
		}
	}
	return false
}

// Alternatives are the requests to try in order: the alternatives of a
// request with firstAvailable, else the request itself.
func (r *ClaimRequest) Alternatives() []ClaimRequest {
	if len(r.FirstAvailable) > 0 {
		return r.FirstAvailable
	}
	return []ClaimRequest{*r}
}

// ClaimDevice is one device of a claim's allocation.
type ClaimDevice struct {
	// Request names the claim's request (or "request/subrequest").
	Request string `json:"request"`
	Driver  string `json:"driver"`
	Pool    string `json:"pool"`
	Device  string `json:"device"`
	// ShareID is set when the device allows multiple allocations and this
	// allocation is one share of it.
	ShareID string `json:"shareID,omitempty"`
	// ConsumedCapacity is the capacity this share holds, by capacity name
	// (e.g. memory: 10Gi), as Kubernetes quantities.
	ConsumedCapacity map[string]string `json:"consumedCapacity,omitempty"`
}

// DeviceID is "driver/pool/device", the identity of a DRA device: the
// text form of its DRADeviceID.
func DeviceID(driver, pool, device string) string {
	return NewDRADeviceID(driver, pool, device).String()
}

// ID is the allocated device's DeviceID.
func (d ClaimDevice) ID() string { return DeviceID(d.Driver, d.Pool, d.Device) }

// UsesDRA reports whether the pod uses ResourceClaims.
func (p *Pod) UsesDRA() bool { return len(p.Claims) > 0 }

// InLayout orders names, given for profiles (names[i] is an instance of
// profiles[i]), as the slices of layout, which gpu.MIGGeometry.Fit made of
// those profiles and may have reordered: each slice takes the first name not
// yet taken of its profile.
func InLayout(profiles, names []string, layout gpu.Layout) []string {
	taken := make([]bool, len(names))
	out := make([]string, len(layout))
	for i, sl := range layout {
		for j, p := range profiles {
			if p == sl.Profile && !taken[j] && j < len(names) {
				taken[j] = true
				out[i] = names[j]
				break
			}
		}
	}
	return out
}
