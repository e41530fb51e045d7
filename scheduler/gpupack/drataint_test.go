package gpupack

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestDRAScoreCountsTolerated: a free device whose NoSchedule taint the
// pod's requests do not tolerate is not free for the pod, so a node whose
// only untainted GPU the pod would take scores as filled; a pod that
// tolerates the taint counts it free, and an effect None taint keeps
// nothing.
func TestDRAScoreCountsTolerated(t *testing.T) {
	a := gpuSlice("a", 1, "gpu-0", "gpu-1")
	a.Spec.Devices[0].Taints = []resourceapi.DeviceTaint{{Key: "gpu.nvidia.com/xid", Value: "79", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	b := gpuSlice("b", 1, "gpu-0", "gpu-1")
	b.Spec.Devices[0].Taints = []resourceapi.DeviceTaint{{Key: "audit", Effect: resourceapi.DeviceTaintEffectNone}}
	tolerant := claim("tolerant", 1)
	tolerant.Spec.Devices.Requests[0].Exactly.Tolerations = []resourceapi.DeviceToleration{{Key: "gpu.nvidia.com/xid", Operator: resourceapi.DeviceTolerationOpExists}}
	m := &fakeDRA{slices: []*resourceapi.ResourceSlice{a, b}, claims: fakeClaims{byName: map[string]*resourceapi.ResourceClaim{
		"ml/plain": claim("plain", 1), "ml/tolerant": tolerant,
	}}}
	pod := func(claimName string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: claimName}, Spec: v1.PodSpec{ResourceClaims: []v1.PodResourceClaim{
			{Name: "gpu", ResourceClaimName: ptr.To(claimName)}}}}
	}
	cases := map[string]struct {
		pod  *v1.Pod
		free map[string]int
		// score on a: 1 where its one tolerated GPU is the last free one.
		scoreA float64
	}{
		"untolerated taint: one free on a": {pod: pod("plain"), free: map[string]int{"a": 1, "b": 2}, scoreA: 1},
		"tolerated taint: both free on a":  {pod: pod("tolerant"), free: map[string]int{"a": 2, "b": 2}, scoreA: 0.5},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tols := draTolerations(tc.pod, m.ResourceClaims())
			nodes, err := draNodes(m, tols)
			if err != nil {
				t.Fatal(err)
			}
			for n, want := range tc.free {
				if nodes[n].free != want || nodes[n].total != 2 {
					t.Errorf("node %s: %+v, want %d free of 2", n, nodes[n], want)
				}
			}
			d := &draDemand{need: draNeed(tc.pod, m.ResourceClaims()), nodes: nodes, tolerations: tols}
			if got := d.score("a"); got != tc.scoreA {
				t.Errorf("score on a %v, want %v", got, tc.scoreA)
			}
		})
	}
}
