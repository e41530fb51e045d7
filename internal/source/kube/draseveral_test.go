package kube_test

import (
	"math/bits"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/placement"
)

// TestBuildDRASeveralDevices: a bound pod whose claim holds two partitions
// of a partitionable H100, and one whose claim holds two MIG devices of
// different profiles of an A100, hold every one of them: the node's state
// counts both slices of each GPU, with no misfit and no warning.
func TestBuildDRASeveralDevices(t *testing.T) {
	h0, a1 := draH100Partitionable(0), draA100MIG(1)
	p1, _ := h0.Partitions.Profile("1g.10gb")
	p4, _ := h0.Partitions.Profile("4g.40gb")
	parts := draClaim("parts", testcluster.DeviceClassMIG, 2, "dra-1", h0.PartitionName(p4, 0), h0.PartitionName(p1, 4))
	migs := draClaim("migs", testcluster.DeviceClassMIG, 2, "dra-1", a1.MIG[0].DeviceName(1), a1.MIG[1].DeviceName(1))
	pods := []*corev1.Pod{draPod("parts", "dra-1", *parts), draPod("migs", "dra-1", *migs)}
	slices := testcluster.NVIDIASlices("dra-1", h0, a1)
	objs := &kube.DRAObjects{Classes: testcluster.NVIDIADeviceClasses(), Slices: slices, Claims: []*resourcev1.ResourceClaim{parts, migs}}
	st, err := kube.BuildDRA(gpu.Default(), []*corev1.Node{draNode("dra-1")}, pods, nil, objs)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range st.Warnings {
		if strings.Contains(w, "parts") || strings.Contains(w, "migs") {
			t.Errorf("warning %q", w)
		}
	}
	for _, p := range st.Snapshot.Pods {
		if len(p.Devices) != 2 {
			t.Errorf("pod %s holds %+v, want two devices", p.Name, p.Devices)
		}
	}
	states, warnings, err := placement.States(st.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) > 0 {
		t.Errorf("placement's warnings: %q", warnings)
	}
	for i, g := range states[0].GPUs {
		if n := bits.OnesCount64(g.UsedSlices); n != 2 || g.Holders != 1 {
			t.Errorf("GPU %d: %d slices taken by %d holders, want 2 by 1", i, n, g.Holders)
		}
	}
}
