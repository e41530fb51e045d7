package testcluster

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpupack/gpupack/api/nvidiadra"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/render/planout"
	"github.com/gpupack/gpupack/internal/source/kube"
)

// The DeviceClasses of NVIDIA's DRA driver for GPUs, as its Helm chart
// makes them (deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-*.yaml).
const (
	DeviceClassGPU = nvidiadra.ClassGPU
	DeviceClassMIG = nvidiadra.ClassMIG
)

// DRAGPU is one GPU that NVIDIA's DRA driver publishes: whole (MIG empty)
// or, in MIG mode, as its MIG devices only (static MIG).
type DRAGPU struct {
	// Minor is the GPU's device minor; the driver names the device gpu-<minor>.
	Minor int
	// Product is NVML's product name, e.g. "NVIDIA H100 80GB HBM3".
	Product      string
	Architecture string
	MemoryMiB    int64
	MIG          []DRAMIG
	// Shared publishes the whole GPU with allowMultipleAllocations.
	Shared bool
	// Taints are the device's taints.
	Taints []resourcev1.DeviceTaint
	// Partitions publishes the GPU with dynamic MIG (partitionable
	// devices): its counter set, the whole GPU consuming every counter,
	// and a MIG device for each profile and placement of the geometry
	// (see NVIDIASlices).
	Partitions *gpu.MIGGeometry
	// MemoryPolicy is the request policy of the whole GPU's memory
	// capacity (DRAConsumableCapacity), for a Shared GPU whose claims
	// share it by memory.
	MemoryPolicy *resourcev1.CapacityRequestPolicy
	// PCIeRoot, when set, is published as the standard attribute
	// resource.kubernetes.io/pcieRoot of the whole GPU or its MIG devices.
	PCIeRoot string
	// NUMANode, when set, is published as the standard attribute
	// resource.kubernetes.io/numaNode (an int) of the whole GPU or its MIG
	// devices.
	NUMANode *int64
}

// DRAMIG is one MIG device: its profile, NVML's GPU instance profile ID,
// its placement's start and its memory.
type DRAMIG struct {
	Profile   string
	ProfileID int
	Start     int
	MemoryMiB int64
}

// UUID is the GPU's UUID in the slices NVIDIASlice makes.
func (g DRAGPU) UUID(node string) string { return fmt.Sprintf("GPU-%s-%d", node, g.Minor) }

// DeviceName is the driver's name of the whole GPU.
func (g DRAGPU) DeviceName() string { return fmt.Sprintf("gpu-%d", g.Minor) }

// DeviceName is the driver's name of the MIG device on GPU minor:
// gpu-<minor>-mig-<profile without dots>-<profileID>-<start>.
func (m DRAMIG) DeviceName(minor int) string {
	return fmt.Sprintf("gpu-%d-mig-%s-%d-%d", minor, strings.ReplaceAll(m.Profile, ".", ""), m.ProfileID, m.Start)
}

// NVIDIASlice is the ResourceSlice that NVIDIA's DRA driver publishes for
// the node's GPUs (pool named after the node, generation 1, one slice), with
// the attributes and capacity of its cmd/gpu-kubelet-plugin (deviceinfo.go,
// mig.go): type, uuid, productName, architecture, and for MIG devices
// profile and parentUUID; memory in bytes.
func NVIDIASlice(node string, gpus ...DRAGPU) *resourcev1.ResourceSlice {
	str := func(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: ptr.To(s)} }
	memory := func(mib int64) map[resourcev1.QualifiedName]resourcev1.DeviceCapacity {
		return map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: *resource.NewQuantity(mib<<20, resource.BinarySI)}}
	}
	var devices []resourcev1.Device
	for _, g := range gpus {
		arch := g.Architecture
		if arch == "" {
			arch = "Hopper"
		}
		if len(g.MIG) == 0 {
			d := resourcev1.Device{
				Name: g.DeviceName(),
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
					"type": str("gpu"), "uuid": str(g.UUID(node)), "productName": str(g.Product), "architecture": str(arch),
				},
				Capacity: memory(g.MemoryMiB),
				Taints:   g.Taints,
			}
			if g.PCIeRoot != "" {
				d.Attributes["resource.kubernetes.io/pcieRoot"] = str(g.PCIeRoot)
			}
			if g.NUMANode != nil {
				d.Attributes["resource.kubernetes.io/numaNode"] = resourcev1.DeviceAttribute{IntValue: g.NUMANode}
			}
			if g.MemoryPolicy != nil {
				c := d.Capacity["memory"]
				c.RequestPolicy = g.MemoryPolicy
				d.Capacity["memory"] = c
			}
			if g.Shared {
				d.AllowMultipleAllocations = ptr.To(true)
			}
			devices = append(devices, d)
			continue
		}
		for i, m := range g.MIG {
			d := resourcev1.Device{
				Name: m.DeviceName(g.Minor),
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
					"type": str("mig"), "uuid": str(fmt.Sprintf("MIG-%s-%d-%d", node, g.Minor, i)), "parentUUID": str(g.UUID(node)),
					"profile": str(m.Profile), "productName": str(g.Product), "architecture": str(arch),
				},
				Capacity: memory(m.MemoryMiB),
			}
			// A MIG device sits where its GPU does.
			if g.PCIeRoot != "" {
				d.Attributes["resource.kubernetes.io/pcieRoot"] = str(g.PCIeRoot)
			}
			if g.NUMANode != nil {
				d.Attributes["resource.kubernetes.io/numaNode"] = resourcev1.DeviceAttribute{IntValue: g.NUMANode}
			}
			devices = append(devices, d)
		}
	}
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + kube.DriverNVIDIAGPU},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   kube.DriverNVIDIAGPU,
			Pool:     resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(node),
			Devices:  devices,
		},
	}
}

// NVIDIADeviceClasses are the driver's DeviceClasses gpu.nvidia.com (whole
// GPUs, serving the extended resource nvidia.com/gpu) and mig.nvidia.com,
// as package planout writes them for a plan.
func NVIDIADeviceClasses() []*resourcev1.DeviceClass {
	var out []*resourcev1.DeviceClass
	for _, c := range planout.DeviceClasses(nil) {
		out = append(out, &c)
	}
	return out
}

// AddDRANode creates a kwok node with CPU and memory but no device-plugin
// GPUs, waits until it is Ready, and publishes the ResourceSlices of
// NVIDIA's DRA driver for its GPUs. No driver runs: the kube-scheduler
// allocates claims from the slice alone.
func (c *Cluster) AddDRANode(name string, gpus ...DRAGPU) *corev1.Node {
	c.t.Helper()
	node := c.addNode(&corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{kwokNodeAnnotation: kwokNodeAnnotationValue}},
		Status:     corev1.NodeStatus{Capacity: nodeBaseCapacity.DeepCopy(), Allocatable: nodeBaseCapacity.DeepCopy()},
	})
	for _, s := range NVIDIASlices(name, gpus...) {
		if _, err := c.client.ResourceV1().ResourceSlices().Create(c.t.Context(), s, metav1.CreateOptions{}); err != nil {
			c.t.Fatalf("testcluster: publish the ResourceSlice %s of node %q: %v", s.Name, name, err)
		}
	}
	return node
}

// CreateDeviceClasses creates the DeviceClasses, such as
// NVIDIADeviceClasses(), failing the test on the first refused.
func (c *Cluster) CreateDeviceClasses(classes ...*resourcev1.DeviceClass) {
	c.t.Helper()
	for _, dc := range classes {
		if _, err := c.client.ResourceV1().DeviceClasses().Create(c.t.Context(), dc, metav1.CreateOptions{}); err != nil {
			c.t.Fatalf("testcluster: create DeviceClass %s: %v", dc.Name, err)
		}
	}
}
