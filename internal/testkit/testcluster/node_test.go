package testcluster

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gpupack/gpupack/internal/source/kube"
	corev1 "k8s.io/api/core/v1"
)

func TestGPUNodeNode(t *testing.T) {
	h100 := GPUNode{Product: "NVIDIA-H100-80GB-HBM3", MemoryMiB: 81559, GPUs: 8}
	cases := map[string]struct {
		spec       GPUNode
		wantGPU    map[corev1.ResourceName]string // GPU resources of capacity and allocatable
		wantLabels map[string]string              // GPU labels
		wantErr    bool
	}{
		"whole GPUs": {
			spec:    h100,
			wantGPU: map[corev1.ResourceName]string{ResourceGPU: "8"},
			wantLabels: map[string]string{
				LabelGPUProduct: "NVIDIA-H100-80GB-HBM3", LabelGPUMemory: "81559", LabelGPUCount: "8",
				LabelGPUReplicas: "1", LabelGPUSharingStrategy: "none", LabelMIGStrategy: "none", LabelMIGConfig: "all-disabled",
			},
		},
		"time-slicing": {
			spec:    GPUNode{Product: "NVIDIA-L4-SHARED", MemoryMiB: 23034, GPUs: 2, Sharing: SharingTimeSlicing, Replicas: 4},
			wantGPU: map[corev1.ResourceName]string{ResourceGPU: "8"},
			wantLabels: map[string]string{
				LabelGPUProduct: "NVIDIA-L4-SHARED", LabelGPUMemory: "23034", LabelGPUCount: "2",
				LabelGPUReplicas: "4", LabelGPUSharingStrategy: "time-slicing", LabelMIGStrategy: "none", LabelMIGConfig: "all-disabled",
			},
		},
		"MPS renamed to nvidia.com/gpu.shared": {
			spec:    GPUNode{Product: "NVIDIA-L4", MemoryMiB: 23034, GPUs: 2, Sharing: SharingMPS, Replicas: 3, RenameByDefault: true},
			wantGPU: map[corev1.ResourceName]string{ResourceGPUShared: "6"},
			wantLabels: map[string]string{
				LabelGPUProduct: "NVIDIA-L4", LabelGPUMemory: "23034", LabelGPUCount: "2",
				LabelGPUReplicas: "3", LabelGPUSharingStrategy: "mps", LabelMIGStrategy: "none", LabelMIGConfig: "all-disabled",
			},
		},
		"renamed without sharing": {
			spec:    func() GPUNode { s := h100; s.RenameByDefault = true; return s }(),
			wantErr: true,
		},
		"MIG mixed": {
			spec: func() GPUNode {
				s := h100
				s.MIG, s.MIGConfig = map[string]int64{"3g.40gb": 8, "4g.40gb": 8}, "all-balanced"
				return s
			}(),
			wantGPU: map[corev1.ResourceName]string{ResourceMIG("3g.40gb"): "8", ResourceMIG("4g.40gb"): "8"},
			wantLabels: map[string]string{
				LabelGPUProduct: "NVIDIA-H100-80GB-HBM3", LabelGPUMemory: "81559", LabelGPUCount: "8",
				LabelGPUReplicas: "1", LabelGPUSharingStrategy: "none", LabelMIGStrategy: "mixed", LabelMIGConfig: "all-balanced",
			},
		},
		"MIG single": {
			spec: func() GPUNode {
				s := h100
				s.MIG, s.MIGStrategy, s.MIGConfig = map[string]int64{"1g.10gb": 56}, MIGSingle, "all-1g.10gb"
				return s
			}(),
			wantGPU: map[corev1.ResourceName]string{ResourceGPU: "56"},
			wantLabels: map[string]string{
				LabelGPUProduct: "NVIDIA-H100-80GB-HBM3", LabelGPUMemory: "81559", LabelGPUCount: "8",
				LabelGPUReplicas: "1", LabelGPUSharingStrategy: "none", LabelMIGStrategy: "single", LabelMIGConfig: "all-1g.10gb",
			},
		},
		"replicas without sharing": {
			spec:    func() GPUNode { s := h100; s.Replicas = 4; return s }(),
			wantErr: true,
		},
		"MIG without config": {
			spec:    func() GPUNode { s := h100; s.MIG = map[string]int64{"1g.10gb": 56}; return s }(),
			wantErr: true,
		},
		"MIG single with two profiles": {
			spec: func() GPUNode {
				s := h100
				s.MIG, s.MIGStrategy, s.MIGConfig = map[string]int64{"3g.40gb": 8, "4g.40gb": 8}, MIGSingle, "all-balanced"
				return s
			}(),
			wantErr: true,
		},
		"no product": {
			spec:    GPUNode{MemoryMiB: 81559, GPUs: 8},
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			node, err := tc.spec.Object("gpu-0")
			if (err != nil) != tc.wantErr {
				t.Fatalf("node() error = %v, want an error: %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			for _, list := range []corev1.ResourceList{node.Status.Capacity, node.Status.Allocatable} {
				gotGPU := map[corev1.ResourceName]string{}
				for resourceName, q := range list {
					if resourceName == ResourceGPU || resourceName == ResourceGPUShared || strings.HasPrefix(string(resourceName), kube.ResourceMIGPrefix) {
						gotGPU[resourceName] = q.String()
					}
				}
				if diff := cmp.Diff(tc.wantGPU, gotGPU); diff != "" {
					t.Errorf("GPU resources (-want +got):\n%s", diff)
				}
			}
			gotLabels := map[string]string{}
			for key := range tc.wantLabels {
				gotLabels[key] = node.Labels[key]
			}
			if diff := cmp.Diff(tc.wantLabels, gotLabels); diff != "" {
				t.Errorf("GPU labels (-want +got):\n%s", diff)
			}
			if got := node.Annotations[kwokNodeAnnotation]; got != kwokNodeAnnotationValue {
				t.Errorf("annotation %s = %q, want %q", kwokNodeAnnotation, got, kwokNodeAnnotationValue)
			}
		})
	}
}
