// Package nvidiadra holds the words of NVIDIA's DRA driver for GPUs
// (github.com/NVIDIA/k8s-dra-driver-gpu) that gpupack writes: its
// DeviceClasses, the opaque sharing configuration a claim passes it
// (resource.nvidia.com/v1beta1 GpuConfig), and the ResourceClaims and
// ResourceClaimTemplates (resource.k8s.io/v1) that carry them. plan builds
// a DRA pool's objects with it, as it builds device plugin configs with
// package gpuoperator.
//
// Everything here follows the driver at commit 22407113 (v0.4.0-rc.1+14),
// the commit internal/source/kube reads the driver's ResourceSlices by:
//   - the driver name and attributes: cmd/gpu-kubelet-plugin/deviceinfo.go;
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
//
// nvidiadra imports only k8s.io/api and k8s.io/apimachinery types, never
// client-go, net/http or a CLI library.
package nvidiadra

import (
	"encoding/json"
	"fmt"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The driver, its DeviceClasses and the extended resource its whole-GPU
// class serves.
const (
	Driver         = "gpu.nvidia.com"
	ClassGPU       = "gpu.nvidia.com"
	ClassMIG       = "mig.nvidia.com"
	ResourceGPU    = "nvidia.com/gpu"
	ConfigAPI      = "resource.nvidia.com/v1beta1"
	KindGpuConfig  = "GpuConfig"
	resourceAPI    = "resource.k8s.io/v1"
	requestName    = "gpu"
	attrType       = "type"
	attrProfile    = "profile"
	typeGPU        = "gpu"
	typeMIG        = "mig"
	migResourceFmt = "nvidia.com/mig-%s"
)

// The sharing strategies and the time-slice interval gpupack writes
// (sharing.go: TimeSlicingStrategy, MpsStrategy, DefaultTimeSlice).
const (
	TimeSlicingStrategy = "TimeSlicing"
	MPSStrategy         = "MPS"
	DefaultTimeSlice    = "Default"
)

// GpuConfig mirrors the driver's GpuConfig (gpuconfig.go), the fields
// gpupack writes only.
type GpuConfig struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Sharing    *GpuSharing `json:"sharing,omitempty"`
}

// GpuSharing mirrors the driver's GpuSharing (sharing.go).
type GpuSharing struct {
	Strategy          string             `json:"strategy"`
	TimeSlicingConfig *TimeSlicingConfig `json:"timeSlicingConfig,omitempty"`
	MpsConfig         *MpsConfig         `json:"mpsConfig,omitempty"`
}

// TimeSlicingConfig mirrors the driver's TimeSlicingConfig (sharing.go).
type TimeSlicingConfig struct {
	Interval string `json:"interval,omitempty"`
}

// MpsConfig mirrors the driver's MpsConfig (sharing.go): the share of the
// GPU's threads each client may use, 0..100, and the device memory each
// client may pin.
type MpsConfig struct {
	DefaultActiveThreadPercentage  *int               `json:"defaultActiveThreadPercentage,omitempty"`
	DefaultPinnedDeviceMemoryLimit *resource.Quantity `json:"defaultPinnedDeviceMemoryLimit,omitempty"`
}

// TimeSlicing is the config that time-slices the claimed GPU among the
// pods that share the claim, at the driver's default interval.
func TimeSlicing() GpuConfig {
	return GpuConfig{APIVersion: ConfigAPI, Kind: KindGpuConfig,
		Sharing: &GpuSharing{Strategy: TimeSlicingStrategy, TimeSlicingConfig: &TimeSlicingConfig{Interval: DefaultTimeSlice}}}
}

// MPS is the config that runs the claimed GPU's pods as MPS clients, each
// limited to threadPercent of the threads and memoryMiB of pinned memory.
func MPS(threadPercent int, memoryMiB int64) GpuConfig {
	return GpuConfig{APIVersion: ConfigAPI, Kind: KindGpuConfig,
		Sharing: &GpuSharing{Strategy: MPSStrategy, MpsConfig: &MpsConfig{
			DefaultActiveThreadPercentage:  &threadPercent,
			DefaultPinnedDeviceMemoryLimit: resource.NewQuantity(memoryMiB<<20, resource.BinarySI)}}}
}

// MIGResource is the extended resource of a MIG profile, as the device
// plugin names it (nvidia.com/mig-1g.10gb).
func MIGResource(profile string) string { return fmt.Sprintf(migResourceFmt, profile) }

// MIGClassName is the DeviceClass of one MIG profile, named as the
// driver's extended-resources demo names it (mig-1g-12gb.gpu.nvidia.com).
func MIGClassName(profile string) string {
	return "mig-" + dashed(profile) + "." + Driver
}

func dashed(profile string) string { return strings.ReplaceAll(profile, ".", "-") }

// selectorOf is a CEL selector on the driver's attributes.
func selectorOf(expr string) resourcev1.DeviceSelector {
	return resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}
}

func attr(name string) string { return fmt.Sprintf("device.attributes['%s'].%s", Driver, name) }

func deviceClass(name, expr, extended string) resourcev1.DeviceClass {
	c := resourcev1.DeviceClass{TypeMeta: metav1.TypeMeta{APIVersion: resourceAPI, Kind: "DeviceClass"}, ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{selectorOf(expr)}}}
	if extended != "" {
		c.Spec.ExtendedResourceName = &extended
	}
	return c
}

// DeviceClasses are the driver chart's two classes (whole GPUs, serving
// nvidia.com/gpu, so that manifests asking nvidia.com/gpu: 1 stay
// unchanged; MIG devices) and one class per MIG profile serving its
// device-plugin resource name (nvidia.com/mig-<profile>), so that requests
// rewritten to a MIG profile are served by DRA too.
func DeviceClasses(profiles []string) []resourcev1.DeviceClass {
	out := []resourcev1.DeviceClass{
		deviceClass(ClassGPU, fmt.Sprintf("device.driver == '%s' && %s == '%s'", Driver, attr(attrType), typeGPU), ResourceGPU),
		deviceClass(ClassMIG, fmt.Sprintf("device.driver == '%s' && %s == '%s'", Driver, attr(attrType), typeMIG), ""),
	}
	for _, p := range profiles {
		out = append(out, deviceClass(MIGClassName(p),
			fmt.Sprintf("device.driver == '%s' && %s == '%s' && %s == '%s'", Driver, attr(attrType), typeMIG, attr(attrProfile), p), MIGResource(p)))
	}
	return out
}

// Opaque is a claim's opaque config for the driver.
func (c GpuConfig) Opaque() (resourcev1.DeviceClaimConfiguration, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return resourcev1.DeviceClaimConfiguration{}, err
	}
	return resourcev1.DeviceClaimConfiguration{Requests: []string{requestName},
		DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: Driver, Parameters: runtime.RawExtension{Raw: b}}}}, nil
}

// SharedClaim is a ResourceClaim for one whole GPU with config c: every pod
// that references it (pod.spec.resourceClaims[].resourceClaimName) shares
// that one GPU as c says.
func SharedClaim(namespace, name string, c GpuConfig) (resourcev1.ResourceClaim, error) {
	cfg, err := c.Opaque()
	if err != nil {
		return resourcev1.ResourceClaim{}, err
	}
	return resourcev1.ResourceClaim{TypeMeta: metav1.TypeMeta{APIVersion: resourceAPI, Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: requestName, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: ClassGPU}}},
			Config:   []resourcev1.DeviceClaimConfiguration{cfg}}}}, nil
}

// MIGClaimTemplate is a ResourceClaimTemplate whose claims (one per pod)
// each get one MIG device of the profile.
func MIGClaimTemplate(namespace, name, profile string) resourcev1.ResourceClaimTemplate {
	return resourcev1.ResourceClaimTemplate{TypeMeta: metav1.TypeMeta{APIVersion: resourceAPI, Kind: "ResourceClaimTemplate"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: requestName, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: ClassMIG,
				Selectors: []resourcev1.DeviceSelector{selectorOf(fmt.Sprintf("%s == '%s'", attr(attrProfile), profile))}}}}}}}}
}
