package testcluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/gpupack/gpupack/internal/source/kube"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// kwok manages the nodes that carry this annotation (see Start).
const (
	kwokNodeAnnotation      = "kwok.x-k8s.io/node"
	kwokNodeAnnotationValue = "fake"
)

// Resource and label names of NVIDIA's device plugin and GPU feature
// discovery, as internal/source/kube reads them.
const (
	ResourceGPU             = kube.ResourceGPU
	ResourceGPUShared       = kube.ResourceGPUShared
	LabelGPUProduct         = kube.LabelGPUProduct
	LabelGPUMemory          = kube.LabelGPUMemory
	LabelGPUCount           = kube.LabelGPUCount
	LabelGPUReplicas        = kube.LabelGPUReplicas
	LabelGPUSharingStrategy = kube.LabelGPUSharingStrategy
	LabelMIGConfig          = kube.LabelMIGConfig
	LabelMIGStrategy        = kube.LabelMIGStrategy
)

// ResourceMIG returns the resource name of a MIG profile under the mixed
// strategy, e.g. nvidia.com/mig-1g.10gb for "1g.10gb".
func ResourceMIG(profile string) corev1.ResourceName {
	return corev1.ResourceName(kube.ResourceMIGPrefix + profile)
}

// SharingStrategy is the value of the nvidia.com/gpu.sharing-strategy label.
type SharingStrategy string

// The sharing strategies of NVIDIA's device plugin.
const (
	SharingNone        SharingStrategy = "none"
	SharingTimeSlicing SharingStrategy = "time-slicing"
	SharingMPS         SharingStrategy = "mps"
)

// MIGStrategy is the value of the nvidia.com/mig.strategy label.
type MIGStrategy string

// The MIG strategies of NVIDIA's device plugin: under single, every GPU has
// the same MIG profile and each MIG device counts as one nvidia.com/gpu;
// under mixed, each profile is its own resource, nvidia.com/mig-<profile>.
const (
	MIGNone   MIGStrategy = "none"
	MIGSingle MIGStrategy = "single"
	MIGMixed  MIGStrategy = "mixed"
)

// The CPU, memory and pod capacity of every GPU node: ample, so that only
// GPUs decide where a pod fits.
var nodeBaseCapacity = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("128"),
	corev1.ResourceMemory: resource.MustParse("1Ti"),
	corev1.ResourcePods:   resource.MustParse("110"),
}

// GPUNode describes a fake GPU node as NVIDIA's device plugin and GPU feature
// discovery would advertise it.
type GPUNode struct {
	// Product is the GPU model, as GPU feature discovery writes it, e.g.
	// "NVIDIA-H100-80GB-HBM3". Required.
	Product string
	// MemoryMiB is the memory of one GPU. Required.
	MemoryMiB int64
	// GPUs is the number of physical GPUs. Required.
	GPUs int64
	// Sharing is how each GPU is shared; empty means SharingNone.
	Sharing SharingStrategy
	// Replicas is the number of replicas of each shared GPU, each advertised
	// as one nvidia.com/gpu; zero means 1. Above 1 it needs a Sharing
	// strategy other than none.
	Replicas int64
	// RenameByDefault advertises the replicas as nvidia.com/gpu.shared
	// instead, as the device plugin's sharing.*.renameByDefault does; it
	// needs a Sharing strategy other than none.
	RenameByDefault bool
	// MIG is the number of MIG devices of each profile on the whole node,
	// e.g. {"1g.10gb": 56} for eight H100s in all-1g.10gb. When set, every
	// GPU is in MIG mode, so no whole nvidia.com/gpu is advertised.
	MIG map[string]int64
	// MIGStrategy is how the device plugin advertises MIG devices; empty
	// means MIGMixed when MIG is set and MIGNone otherwise. MIGSingle needs
	// one profile. Without MIG devices, every strategy advertises whole GPUs.
	MIGStrategy MIGStrategy
	// MIGConfig is the mig-parted configuration, e.g. "all-1g.10gb";
	// required when MIG is set, "all-disabled" otherwise.
	MIGConfig string
	// Labels are added to the node's labels, e.g. a zone or a node pool.
	Labels map[string]string
	// Taints are the node's taints.
	Taints []corev1.Taint
}

// AddGPUNode creates a node that kwok manages, with the GPU resources and
// labels that spec describes, and waits until kwok has made it Ready.
func (c *Cluster) AddGPUNode(name string, spec GPUNode) *corev1.Node {
	c.t.Helper()
	node, err := spec.Object(name)
	if err != nil {
		c.t.Fatalf("testcluster: node %q: %v", name, err)
	}
	return c.addNode(node)
}

// addNode creates the node and waits until kwok has made it Ready.
func (c *Cluster) addNode(node *corev1.Node) *corev1.Node {
	c.t.Helper()
	name := node.Name
	ctx := c.t.Context()
	nodes := c.client.CoreV1().Nodes()
	if _, err := nodes.Create(ctx, node, metav1.CreateOptions{}); err != nil {
		c.t.Fatalf("testcluster: create node %q: %v", name, err)
	}
	var ready *corev1.Node
	err := wait.PollUntilContextTimeout(ctx, pollInterval, c.timeout, true, func(ctx context.Context) (bool, error) {
		n, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ready = n
		return nodeReady(n), nil
	})
	if err != nil {
		c.t.Fatalf("testcluster: node %q not Ready after %v (kwok's log is printed below): %v", name, c.timeout, err)
	}
	return ready
}

// Object builds the Node object that AddGPUNode creates, or says which field
// of spec is invalid; for tests that create many nodes at once without waiting
// for each to become Ready.
func (spec GPUNode) Object(name string) (*corev1.Node, error) {
	if spec.Product == "" || spec.MemoryMiB <= 0 || spec.GPUs <= 0 {
		return nil, fmt.Errorf("need a Product, MemoryMiB and GPUs, got %q, %d MiB, %d GPUs", spec.Product, spec.MemoryMiB, spec.GPUs)
	}
	sharing, replicas := spec.Sharing, spec.Replicas
	if sharing == "" {
		sharing = SharingNone
	}
	if replicas == 0 {
		replicas = 1
	}
	if replicas < 1 || (replicas > 1) == (sharing == SharingNone) {
		return nil, fmt.Errorf("sharing %q with %d replicas: replicas above 1 need a sharing strategy, and a sharing strategy needs them", sharing, replicas)
	}
	migStrategy, migConfig := spec.MIGStrategy, spec.MIGConfig
	if migStrategy == "" {
		migStrategy = MIGNone
		if len(spec.MIG) > 0 {
			migStrategy = MIGMixed
		}
	}
	if len(spec.MIG) == 0 && migConfig == "" {
		migConfig = "all-disabled"
	}

	if spec.RenameByDefault && (sharing == SharingNone || len(spec.MIG) > 0) {
		return nil, fmt.Errorf("RenameByDefault renames the replicas of shared whole GPUs: it needs a sharing strategy and no MIG devices")
	}
	capacity := nodeBaseCapacity.DeepCopy()
	switch {
	case spec.RenameByDefault:
		capacity[ResourceGPUShared] = *resource.NewQuantity(spec.GPUs*replicas, resource.DecimalSI)
	case migStrategy != MIGNone && migStrategy != MIGSingle && migStrategy != MIGMixed:
		return nil, fmt.Errorf("unknown MIG strategy %q", migStrategy)
	case len(spec.MIG) == 0:
		// Without MIG devices every strategy advertises whole GPUs.
		capacity[ResourceGPU] = *resource.NewQuantity(spec.GPUs*replicas, resource.DecimalSI)
	case migStrategy == MIGNone || migConfig == "":
		return nil, fmt.Errorf("MIG devices %v need a MIG strategy other than none and a MIGConfig, got %q and %q", spec.MIG, migStrategy, migConfig)
	case migStrategy == MIGSingle:
		if len(spec.MIG) != 1 {
			return nil, fmt.Errorf("MIG strategy single needs exactly one profile, got %v", slices.Sorted(maps.Keys(spec.MIG)))
		}
		for _, devices := range spec.MIG {
			capacity[ResourceGPU] = *resource.NewQuantity(devices*replicas, resource.DecimalSI)
		}
	default: // MIGMixed
		for profile, devices := range spec.MIG {
			capacity[ResourceMIG(profile)] = *resource.NewQuantity(devices*replicas, resource.DecimalSI)
		}
	}

	labels := map[string]string{
		corev1.LabelHostname:    name,
		corev1.LabelOSStable:    "linux",
		corev1.LabelArchStable:  "amd64",
		"type":                  "kwok",
		LabelGPUProduct:         spec.Product,
		LabelGPUMemory:          strconv.FormatInt(spec.MemoryMiB, 10),
		LabelGPUCount:           strconv.FormatInt(spec.GPUs, 10),
		LabelGPUReplicas:        strconv.FormatInt(replicas, 10),
		LabelGPUSharingStrategy: string(sharing),
		LabelMIGStrategy:        string(migStrategy),
		LabelMIGConfig:          migConfig,
	}
	maps.Copy(labels, spec.Labels)

	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      labels,
			Annotations: map[string]string{kwokNodeAnnotation: kwokNodeAnnotationValue},
		},
		Spec: corev1.NodeSpec{Taints: spec.Taints},
		// kwok's node-initialize stage keeps the capacity and allocatable it finds.
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity.DeepCopy()},
	}, nil
}

// nodeReady reports whether the node's Ready condition is True.
func nodeReady(node *corev1.Node) bool {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}
