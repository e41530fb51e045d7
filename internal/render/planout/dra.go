package planout

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/api/nvidiadra"
	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/plan"
)

// resourceAPI is the API version of the objects built here; requestName
// names the one device request of every claim gpupack writes.
const (
	resourceAPI = "resource.k8s.io/v1"
	requestName = "gpu"
)

// DRAObjects are the resource.k8s.io/v1 objects of a plan's DRA section,
// in the order they apply.
type DRAObjects struct {
	DeviceClasses  []resourcev1.DeviceClass
	Claims         []resourcev1.ResourceClaim
	ClaimTemplates []resourcev1.ResourceClaimTemplate
}

// DRAObjectsOf builds the objects of d: the driver's DeviceClasses with
// one per MIG profile, a ResourceClaim per shared claim and a
// ResourceClaimTemplate per MIG claim template.
func DRAObjectsOf(d *plan.DRAPlan) (DRAObjects, error) {
	out := DRAObjects{DeviceClasses: DeviceClasses(d.MIGProfiles)}
	for _, c := range d.Claims {
		claim, err := resourceClaim(c)
		if err != nil {
			return DRAObjects{}, fmt.Errorf("ResourceClaim %s/%s: %w", c.Namespace, c.Name, err)
		}
		out.Claims = append(out.Claims, claim)
	}
	for _, t := range d.ClaimTemplates {
		out.ClaimTemplates = append(out.ClaimTemplates, migClaimTemplate(t))
	}
	return out, nil
}

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

// sharingConfig is the driver config that shares the claimed GPU among the
// pods that reference c: time-sliced at the driver's default interval, or
// as MPS clients within c's limits.
func sharingConfig(c plan.SharedClaim) GpuConfig {
	s := &GpuSharing{Strategy: nvidiadra.TimeSlicingStrategy, TimeSlicingConfig: &TimeSlicingConfig{Interval: nvidiadra.DefaultTimeSlice}}
	if c.MPS != nil {
		s = &GpuSharing{Strategy: nvidiadra.MPSStrategy, MpsConfig: &MpsConfig{
			DefaultActiveThreadPercentage:  ptr.To(c.MPS.ThreadPercent),
			DefaultPinnedDeviceMemoryLimit: resource.NewQuantity(int64(c.MPS.PinnedMemory)<<20, resource.BinarySI)}}
	}
	return GpuConfig{APIVersion: nvidiadra.ConfigAPI, Kind: nvidiadra.KindGpuConfig, Sharing: s}
}

// selectorOf is a CEL selector on the driver's attributes.
func selectorOf(expr string) resourcev1.DeviceSelector {
	return resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}
}

func attr(name string) string {
	return fmt.Sprintf("device.attributes['%s'].%s", nvidiadra.Driver, name)
}

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
	typeIs := func(t string) string {
		return fmt.Sprintf("device.driver == '%s' && %s == '%s'", nvidiadra.Driver, attr(nvidiadra.AttributeType), t)
	}
	out := []resourcev1.DeviceClass{
		deviceClass(nvidiadra.ClassGPU, typeIs(nvidiadra.TypeGPU), nvidiadra.ResourceGPU),
		deviceClass(nvidiadra.ClassMIG, typeIs(nvidiadra.TypeMIG), ""),
	}
	for _, p := range profiles {
		out = append(out, deviceClass(nvidiadra.MIGClassName(p),
			fmt.Sprintf("%s && %s == '%s'", typeIs(nvidiadra.TypeMIG), attr(nvidiadra.AttributeProfile), p), nvidiadra.MIGResource(p)))
	}
	return out
}

// opaque is a claim's opaque config for the driver.
func opaque(c GpuConfig) (resourcev1.DeviceClaimConfiguration, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return resourcev1.DeviceClaimConfiguration{}, err
	}
	return resourcev1.DeviceClaimConfiguration{Requests: []string{requestName},
		DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: nvidiadra.Driver, Parameters: runtime.RawExtension{Raw: b}}}}, nil
}

// resourceClaim is the ResourceClaim for one whole GPU that c says: every
// pod that references it (pod.spec.resourceClaims[].resourceClaimName)
// shares that one GPU by c's method. Where c asks memory, its request asks
// that much of the device's memory capacity (capacity.requests,
// DRAConsumableCapacity), so that other claims may share the rest of a
// device that allows multiple allocations.
func resourceClaim(c plan.SharedClaim) (resourcev1.ResourceClaim, error) {
	cfg, err := opaque(sharingConfig(c))
	if err != nil {
		return resourcev1.ResourceClaim{}, err
	}
	request := &resourcev1.ExactDeviceRequest{DeviceClassName: nvidiadra.ClassGPU}
	if c.MemoryRequest > 0 {
		request.Capacity = &resourcev1.CapacityRequirements{
			Requests: map[resourcev1.QualifiedName]resource.Quantity{nvidiadra.CapacityMemory: *resource.NewQuantity(int64(c.MemoryRequest), resource.BinarySI)}}
	}
	return resourcev1.ResourceClaim{TypeMeta: metav1.TypeMeta{APIVersion: resourceAPI, Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: requestName, Exactly: request}},
			Config:   []resourcev1.DeviceClaimConfiguration{cfg}}}}, nil
}

// migClaimTemplate is the ResourceClaimTemplate whose claims (one per pod)
// each get one MIG device of t's profile. Where t aligns it with another
// driver's devices, the claims also ask those devices as the workload's
// claim did, and a matchAttribute constraint over the MIG request and
// theirs keeps them on one value of the attribute (a NIC on the MIG
// device's NUMA node).
func migClaimTemplate(t plan.MIGClaimTemplate) resourcev1.ResourceClaimTemplate {
	devices := resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: requestName, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: nvidiadra.ClassMIG,
		Selectors: []resourcev1.DeviceSelector{selectorOf(fmt.Sprintf("%s == '%s'", attr(nvidiadra.AttributeProfile), t.Profile))}}}}}
	if len(t.Aligned) > 0 {
		covered := []string{requestName}
		for _, r := range t.Aligned {
			devices.Requests = append(devices.Requests, deviceRequest(r))
			covered = append(covered, r.Name)
		}
		attribute := resourcev1.FullyQualifiedName(t.MatchAttribute)
		devices.Constraints = []resourcev1.DeviceConstraint{{Requests: covered, MatchAttribute: &attribute}}
	}
	return resourcev1.ResourceClaimTemplate{TypeMeta: metav1.TypeMeta{APIVersion: resourceAPI, Kind: "ResourceClaimTemplate"},
		ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: t.Name},
		Spec:       resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: devices}}}
}

// deviceRequest writes a request read from a claim back as the claim
// asked it: exactly one class, or its alternatives in order.
func deviceRequest(r cluster.ClaimRequest) resourcev1.DeviceRequest {
	if len(r.FirstAvailable) == 0 {
		return resourcev1.DeviceRequest{Name: r.Name, Exactly: exactRequest(r)}
	}
	out := resourcev1.DeviceRequest{Name: r.Name}
	for _, alt := range r.FirstAvailable {
		e := exactRequest(alt)
		out.FirstAvailable = append(out.FirstAvailable, resourcev1.DeviceSubRequest{Name: alt.Name, DeviceClassName: e.DeviceClassName,
			Selectors: e.Selectors, AllocationMode: e.AllocationMode, Count: e.Count, Tolerations: e.Tolerations, Capacity: e.Capacity})
	}
	return out
}

func exactRequest(r cluster.ClaimRequest) *resourcev1.ExactDeviceRequest {
	e := &resourcev1.ExactDeviceRequest{DeviceClassName: r.DeviceClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: int64(max(1, r.Count))}
	if r.All {
		e.AllocationMode, e.Count = resourcev1.DeviceAllocationModeAll, 0
	}
	for _, expr := range r.Selectors {
		e.Selectors = append(e.Selectors, selectorOf(expr))
	}
	for _, t := range r.Tolerations {
		e.Tolerations = append(e.Tolerations, resourcev1.DeviceToleration{Key: t.Key, Operator: resourcev1.DeviceTolerationOperator(cmp.Or(t.Operator, string(resourcev1.DeviceTolerationOpEqual))),
			Value: t.Value, Effect: resourcev1.DeviceTaintEffect(t.Effect)})
	}
	if len(r.Capacity) > 0 {
		e.Capacity = &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{}}
		for name, q := range r.Capacity {
			e.Capacity.Requests[resourcev1.QualifiedName(name)] = *resource.NewQuantity(int64(q), resource.BinarySI)
		}
	}
	return e
}

// deviceTaintRule is the DeviceTaintRule r says: a NoSchedule taint
// gpupack.io/xid=<XID> on the one device it selects.
func deviceTaintRule(r plan.DeviceTaintRule) resourcev1.DeviceTaintRule {
	return resourcev1.DeviceTaintRule{
		TypeMeta:   metav1.TypeMeta{APIVersion: resourceAPI, Kind: "DeviceTaintRule"},
		ObjectMeta: metav1.ObjectMeta{Name: r.Name},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To(r.Driver), Pool: ptr.To(r.Pool), Device: ptr.To(r.Device)},
			Taint:          resourcev1.DeviceTaint{Key: wellknown.TaintXID, Value: strconv.Itoa(r.XID), Effect: resourcev1.DeviceTaintEffectNoSchedule},
		},
	}
}

// draManifests renders the plan's DRA objects as one multi-document YAML
// file (FileDRA), in the order they apply: DeviceClasses, ResourceClaims,
// ResourceClaimTemplates. It is empty when no pool's GPUs are offered
// through DRA.
func draManifests(p *plan.Plan) ([]byte, error) {
	if p.DRA == nil {
		return nil, nil
	}
	objs, err := DRAObjectsOf(p.DRA)
	if err != nil {
		return nil, err
	}
	var docs []any
	for i := range objs.DeviceClasses {
		docs = append(docs, &objs.DeviceClasses[i])
	}
	for i := range objs.Claims {
		docs = append(docs, &objs.Claims[i])
	}
	for i := range objs.ClaimTemplates {
		docs = append(docs, &objs.ClaimTemplates[i])
	}
	return yamlDocuments(docs)
}

// taintRuleManifests renders the plan's DeviceTaintRules as one
// multi-document YAML file (FileDRATaintRules); empty when no DRA GPU is
// unhealthy.
func taintRuleManifests(p *plan.Plan) ([]byte, error) {
	var docs []any
	for _, r := range p.TaintRules {
		obj := deviceTaintRule(r)
		// Without the empty status a DeviceTaintRule would print.
		docs = append(docs, struct {
			metav1.TypeMeta `json:",inline"`
			Metadata        metav1.ObjectMeta              `json:"metadata"`
			Spec            resourcev1.DeviceTaintRuleSpec `json:"spec"`
		}{obj.TypeMeta, obj.ObjectMeta, obj.Spec})
	}
	return yamlDocuments(docs)
}

// yamlDocuments marshals each object as a YAML document, joined by "---".
func yamlDocuments(objs []any) ([]byte, error) {
	docs := make([]string, 0, len(objs))
	for _, obj := range objs {
		b, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		docs = append(docs, string(b))
	}
	return []byte(strings.Join(docs, "---\n")), nil
}
