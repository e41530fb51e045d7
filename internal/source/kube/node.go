package kube

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

// Resource and label names of NVIDIA's device plugin and GPU feature discovery.
const (
	ResourceGPU corev1.ResourceName = "nvidia.com/gpu"
	// ResourceGPUShared is the replicas of time-sliced or MPS GPUs when the
	// device plugin renames them (sharing.*.renameByDefault).
	ResourceGPUShared corev1.ResourceName = "nvidia.com/gpu.shared"
	ResourceMIGPrefix                     = "nvidia.com/mig-"

	LabelGPUProduct         = "nvidia.com/gpu.product"
	LabelGPUMemory          = "nvidia.com/gpu.memory" // MiB of one GPU
	LabelGPUCount           = "nvidia.com/gpu.count"
	LabelGPUReplicas        = "nvidia.com/gpu.replicas"
	LabelGPUSharingStrategy = "nvidia.com/gpu.sharing-strategy"
	LabelMIGStrategy        = "nvidia.com/mig.strategy"
	LabelMIGConfig          = "nvidia.com/mig.config"
)

const mib = 1 << 20

// IsGPUResource reports whether name is one of NVIDIA's GPU resources:
// whole GPUs (nvidia.com/gpu), their renamed replicas (nvidia.com/gpu.shared
// and any other nvidia.com/gpu.*) or MIG devices (nvidia.com/mig-<profile>).
func IsGPUResource(name corev1.ResourceName) bool {
	return name == ResourceGPU || strings.HasPrefix(string(name), ResourceMIGPrefix) || strings.HasPrefix(string(name), string(ResourceGPU)+".")
}

// convertNode builds the snapshot node; warnings say what of the node's GPUs
// could not be represented.
func convertNode(n *corev1.Node, c *gpu.Catalogue) (*cluster.Node, []string) {
	alloc := n.Status.Allocatable
	out := &cluster.Node{
		Name:          n.Name,
		Labels:        n.Labels,
		Unschedulable: n.Spec.Unschedulable,
	}
	if q, ok := alloc[corev1.ResourceCPU]; ok {
		out.CPU = gpu.CPUMilli(q.MilliValue())
	}
	if q, ok := alloc[corev1.ResourceMemory]; ok {
		out.Memory = gpu.MiB(q.Value() / mib)
	}
	if q, ok := alloc[corev1.ResourcePods]; ok {
		pods := int(q.Value())
		out.MaxPods = &pods
	}
	for _, t := range n.Spec.Taints {
		out.Taints = append(out.Taints, cluster.Taint{Key: t.Key, Value: t.Value, Effect: cluster.TaintEffect(t.Effect)})
	}
	gpus, warnings := nodeGPUs(n, c)
	out.GPUs = gpus
	for i := range out.GPUs {
		out.GPUs[i].Index = i
	}
	return out, warnings
}

// nodeGPUs reads the node's GPUs from its allocatable resources and labels.
func nodeGPUs(n *corev1.Node, c *gpu.Catalogue) ([]cluster.GPU, []string) {
	whole := quantity(n.Status.Allocatable, ResourceGPU)
	shared := quantity(n.Status.Allocatable, ResourceGPUShared)
	mig := map[string]int64{}
	for name, q := range n.Status.Allocatable {
		if profile, ok := strings.CutPrefix(string(name), ResourceMIGPrefix); ok && q.Value() > 0 {
			mig[profile] = q.Value()
		}
	}
	if whole == 0 && shared == 0 && len(mig) == 0 {
		return nil, nil
	}
	warn := func(format string, args ...any) []string {
		return []string{fmt.Sprintf("node %s: ", n.Name) + fmt.Sprintf(format, args...)}
	}
	model, memory, labelCount, warnings := nodeModel(n, c)

	if profile := singleMIGProfile(n.Labels, model); profile != nil && len(mig) == 0 {
		// Under the single strategy each nvidia.com/gpu is one MIG device;
		// the scheduler counts them as GPUs, and so does the snapshot.
		return repeatGPU(cluster.GPU{Model: model, Memory: profile.Memory, Sharing: cluster.Exclusive}, int(whole)), warnings
	}

	var gpus []cluster.GPU
	switch {
	case shared > 0:
		// Renamed replicas: the sharing labels describe them, and any
		// nvidia.com/gpu left on the node is whole GPUs.
		proto, count, w := sharedGPUs(n, model, memory, ResourceGPUShared, shared, labelCount)
		gpus = append(repeatGPU(cluster.GPU{Model: model, Memory: memory, Sharing: cluster.Exclusive}, int(whole)), repeatGPU(proto, count)...)
		warnings = append(warnings, w...)
	case whole > 0:
		proto, count, w := sharedGPUs(n, model, memory, ResourceGPU, whole, labelCount)
		gpus = repeatGPU(proto, count)
		warnings = append(warnings, w...)
	}
	if len(mig) > 0 {
		maxGPUs := 0 // unknown: as many as the layout needs
		if labelCount > 0 {
			maxGPUs = max(labelCount-len(gpus), 1)
		}
		layouts, left := migLayouts(model, mig, maxGPUs)
		for _, l := range layouts {
			gpus = append(gpus, cluster.GPU{Model: model, Memory: memory, Sharing: cluster.MIG, Layout: l})
		}
		for _, p := range slices.Sorted(maps.Keys(left)) {
			warnings = append(warnings, warn("%d %s%s devices fit no layout of its %d MIG GPUs (%s); they are left out", left[p], ResourceMIGPrefix, p, len(layouts), model.Name)...)
		}
	}
	return gpus, warnings
}

// UnknownNVIDIAModel names the model of the GPUs of a node that advertises
// NVIDIA's resources but carries no label naming their model: they count,
// as an unlisted model with unknown memory, rather than vanish.
const UnknownNVIDIAModel = "unknown NVIDIA GPU"

// nodeModel finds the model of a node's GPUs, their memory and how many
// the node has (0: no label says): from GPU feature discovery's labels, or,
// without them, from the labels the managed clouds set (fromCloudLabels).
// A product the catalogue does not list still counts, as an unlisted model
// named by its label with the memory its label gives, and a warning says
// what is unknown; a node no label describes gets UnknownNVIDIAModel.
func nodeModel(n *corev1.Node, c *gpu.Catalogue) (*gpu.Model, gpu.MiB, int, []string) {
	warn := func(format string, args ...any) string {
		return fmt.Sprintf("node %s: ", n.Name) + fmt.Sprintf(format, args...)
	}
	labelMemory := gpu.MiB(0)
	if v, err := strconv.ParseInt(n.Labels[LabelGPUMemory], 10, 64); err == nil && v > 0 {
		labelMemory = gpu.MiB(v)
	}
	labelCount, _ := strconv.Atoi(n.Labels[LabelGPUCount])
	if product, ok := n.Labels[LabelGPUProduct]; ok {
		model, ok := c.Lookup(product)
		var warnings []string
		if !ok {
			model = c.Unlisted(product, labelMemory)
		}
		if model.Unlisted {
			memory := fmt.Sprintf("the %d MiB of its %s label", labelMemory, LabelGPUMemory)
			if labelMemory == 0 {
				memory = fmt.Sprintf("unknown memory (no %s label), so only whole-GPU requests fit them", LabelGPUMemory)
			}
			warnings = append(warnings, warn("GPU product %q (label %s) is not in gpupack's catalogue; its GPUs count with %s; their price and MIG geometry are unknown (add the model to a --catalogue file)", product, LabelGPUProduct, memory))
		}
		memory := model.Usable
		if labelMemory > 0 {
			memory = labelMemory
		}
		return model, memory, labelCount, warnings
	}
	cg, ok := fromCloudLabels(n.Labels, c)
	if !ok {
		return c.Unlisted(UnknownNVIDIAModel, 0), 0, labelCount, []string{warn("advertises GPUs but has no %s label (is GPU feature discovery installed?) and no cloud label or instance type names its GPU model (%s, %s, %s, %s); its GPUs count as %q with unknown memory, price and MIG geometry, so only whole-GPU requests fit them (install GPU feature discovery, or label the node with %s)", LabelGPUProduct, LabelGKEAccelerator, LabelEKSAutoGPUName, LabelKarpenterGPUName, LabelInstanceType, UnknownNVIDIAModel, LabelGPUProduct)}
	}
	memory := cg.model.Usable
	if cg.model.Unlisted {
		memory = cg.memory
	}
	note := ""
	if cg.model.Unlisted {
		note = "; the model is not in gpupack's catalogue, so its price and MIG geometry are unknown (add it to a --catalogue file)"
		if memory == 0 {
			note += " and only whole-GPU requests fit its GPUs (memory unknown)"
		}
	}
	return cg.model, memory, cg.count, []string{warn("no GPU feature discovery labels; inferred %s%s", strings.Join(cg.inferred, ", "), note)}
}

// sharedGPUs reads the GPUs behind allocatable resource (nvidia.com/gpu or
// nvidia.com/gpu.shared), shared by time-slicing or MPS when the labels say
// so: the allocatable count is GPUs x replicas. The renamed resource is
// always shared; without a strategy label it is taken as time-slicing.
func sharedGPUs(n *corev1.Node, model *gpu.Model, memory gpu.MiB, resource corev1.ResourceName, whole int64, labelCount int) (cluster.GPU, int, []string) {
	proto := cluster.GPU{Model: model, Memory: memory, Sharing: cluster.Exclusive, SharedResource: resource == ResourceGPUShared}
	strategy, replicasLabel := sharingLabels(n.Labels)
	switch strategy {
	case "time-slicing":
		proto.Sharing = cluster.TimeSliced
	case "mps":
		proto.Sharing = cluster.MPS
	default:
		if !proto.SharedResource {
			return proto, int(whole), nil
		}
		proto.Sharing = cluster.TimeSliced
	}
	replicas, err := strconv.ParseInt(replicasLabel, 10, 64)
	if err != nil || replicas < 1 {
		replicas = 1
		if labelCount > 0 && whole%int64(labelCount) == 0 {
			replicas = whole / int64(labelCount)
		}
	}
	proto.Replicas = int(replicas)
	count := whole / replicas
	var warnings []string
	if rest := whole % replicas; rest != 0 {
		warnings = append(warnings, fmt.Sprintf("node %s: allocatable %s %d is not a multiple of %d replicas; the %d extra replicas are left out", n.Name, resource, whole, replicas, rest))
	}
	return proto, int(count), warnings
}

// singleMIGProfile returns the MIG profile of a node under the single
// strategy, read from the product label's "-MIG-<profile>" suffix or from a
// mig.config of the form "all-<profile>"; nil otherwise.
func singleMIGProfile(labels map[string]string, model *gpu.Model) *gpu.Profile {
	if model.MIG == nil {
		return nil
	}
	if size, ok := labels[LabelGKEGPUPartitionSize]; ok {
		// GKE's partitioned GPUs: each nvidia.com/gpu is one instance of
		// the partition size.
		if p, ok := model.MIG.Profile(size); ok {
			return &p
		}
		return nil
	}
	if labels[LabelMIGStrategy] != "single" {
		return nil
	}
	candidates := []string{strings.TrimPrefix(labels[LabelMIGConfig], "all-")}
	if _, suffix, ok := strings.Cut(labels[LabelGPUProduct], "-MIG-"); ok {
		candidates = append([]string{suffix}, candidates...)
	}
	for _, name := range candidates {
		if p, ok := model.MIG.Profile(name); ok {
			return &p
		}
	}
	return nil
}

// migLayouts lays out MIG instances, counted per profile over a whole node,
// on at most maxGPUs GPUs (0: no limit) by first-fit decreasing: the largest
// instances first, each on the first GPU where gpu.MIGGeometry.Fit still
// finds a placement for the GPU's instances and the new one. It returns the
// layouts and the instances, per profile, that fit nowhere.
func migLayouts(model *gpu.Model, counts map[string]int64, maxGPUs int) ([]gpu.Layout, map[string]int64) {
	left := map[string]int64{}
	if model.MIG == nil {
		maps.Copy(left, counts)
		return nil, left
	}
	var instances []gpu.Profile
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		p, ok := model.MIG.Profile(name)
		if !ok {
			left[name] = counts[name]
			continue
		}
		for range counts[name] {
			instances = append(instances, p)
		}
	}
	slices.SortStableFunc(instances, func(a, b gpu.Profile) int {
		if a.Slots != b.Slots {
			return b.Slots - a.Slots
		}
		return b.Compute - a.Compute
	})
	var sets [][]string
	var layouts []gpu.Layout
	for _, p := range instances {
		placed := false
		for i := range sets {
			if l, err := model.MIG.Fit(append(slices.Clone(sets[i]), p.Name)); err == nil {
				sets[i], layouts[i] = append(sets[i], p.Name), l
				placed = true
				break
			}
		}
		if placed {
			continue
		}
		if maxGPUs > 0 && len(sets) == maxGPUs {
			left[p.Name]++
			continue
		}
		l, _ := model.MIG.Fit([]string{p.Name}) // a profile of the model always fits an empty GPU
		sets, layouts = append(sets, []string{p.Name}), append(layouts, l)
	}
	return layouts, left
}

func repeatGPU(proto cluster.GPU, n int) []cluster.GPU {
	out := make([]cluster.GPU, n)
	for i := range out {
		out[i] = proto
	}
	return out
}

// quantity returns the whole-number value of a resource in the list, 0 when absent.
func quantity(list corev1.ResourceList, name corev1.ResourceName) int64 {
	if q, ok := list[name]; ok {
		return q.Value()
	}
	return 0
}
