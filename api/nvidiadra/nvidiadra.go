// Package nvidiadra is the vocabulary of NVIDIA's DRA driver for GPUs
// (github.com/NVIDIA/k8s-dra-driver-gpu): its driver name, the attributes
// and capacities it publishes on a GPU's devices, its DeviceClasses, the
// extended resources they serve, and the words of the opaque sharing
// configuration a claim passes it (resource.nvidia.com/v1beta1 GpuConfig).
//
// The core (plan, cluster, placement, diagnose) may import it: it imports
// nothing but the standard library. The resource.k8s.io/v1 objects built
// from these words (DeviceClasses, ResourceClaims, ResourceClaimTemplates,
// DeviceTaintRules) are the edge's: package internal/render/planout builds them.
//
// Everything here follows the driver at commit 22407113 (v0.4.0-rc.1+14),
// the commit internal/source/kube reads the driver's ResourceSlices by:
//   - the driver name, attributes and capacities: cmd/gpu-kubelet-plugin/deviceinfo.go;
//   - the DeviceClasses: deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-{gpu,mig}.yaml,
//     and one class per MIG profile as demo/specs/extended-resources/mig-1g-12gb.yaml makes it;
//   - the opaque config: api/nvidia.com/resource/v1beta1/{api,gpuconfig,sharing}.go;
//   - claims that carry it: demo/specs/quickstart/v1/gpu-test-mps.yaml,
//     gpu-test6.yaml (time-slicing) and gpu-test4.yaml (MIG by profile).
//
// At that commit the driver's TimeSlicingSettings and MPSSupport feature
// gates are alpha and off by default: a claim with a sharing config fails
// to prepare until they are on. Its devices do not allow multiple
// allocations (no consumable capacity), so pods share a GPU only by
// referencing one ResourceClaim.
package nvidiadra

import "strings"

// The driver, its DeviceClasses and the extended resource its whole-GPU
// class serves.
const (
	Driver      = "gpu.nvidia.com"
	ClassGPU    = "gpu.nvidia.com"
	ClassMIG    = "mig.nvidia.com"
	ResourceGPU = "nvidia.com/gpu"
)

// The device attributes the driver's classes select by, and the values of
// AttributeType: a whole GPU or a MIG device.
const (
	AttributeType    = "type"
	AttributeProfile = "profile"
	TypeGPU          = "gpu"
	TypeMIG          = "mig"
)

// CapacityMemory is the name of a GPU device's memory capacity, in bytes.
const CapacityMemory = "memory"

// The opaque config's API version and kind, its sharing strategies, and
// the time-slice interval gpupack writes (sharing.go: TimeSlicingStrategy,
// MpsStrategy, DefaultTimeSlice).
const (
	ConfigAPI           = "resource.nvidia.com/v1beta1"
	KindGpuConfig       = "GpuConfig"
	TimeSlicingStrategy = "TimeSlicing"
	MPSStrategy         = "MPS"
	DefaultTimeSlice    = "Default"
)

// MIGResource is the extended resource of a MIG profile, as the device
// plugin names it (nvidia.com/mig-1g.10gb); the profile's DeviceClass
// serves it.
func MIGResource(profile string) string { return "nvidia.com/mig-" + profile }

// MIGClassName is the DeviceClass of one MIG profile, named as the
// driver's extended-resources demo names it (mig-1g-12gb.gpu.nvidia.com).
func MIGClassName(profile string) string {
	return "mig-" + strings.ReplaceAll(profile, ".", "-") + "." + Driver
}
