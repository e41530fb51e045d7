package nvidiadra

import (
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// CapacityMemory is the name of a GPU device's memory capacity, in bytes
// (cmd/gpu-kubelet-plugin/deviceinfo.go).
const CapacityMemory = "memory"

// RequestMemory makes the claim's request ask for that much of its
// device's memory capacity (capacity.requests, DRAConsumableCapacity of
// resource.k8s.io/v1), so that other claims may share the rest of a device
// that allows multiple allocations. The driver at the commit this package
// follows publishes no such device; the field is the upstream API's.
func RequestMemory(c *resourcev1.ResourceClaim, bytes int64) {
	c.Spec.Devices.Requests[0].Exactly.Capacity = &resourcev1.CapacityRequirements{
		Requests: map[resourcev1.QualifiedName]resource.Quantity{CapacityMemory: *resource.NewQuantity(bytes, resource.BinarySI)}}
}
