package diagnose

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSchedulerCauses(t *testing.T) {
	cases := map[string]struct {
		message string
		want    []Cause
	}{
		"GPUs held, preemption could help": {
			message: "0/12 nodes are available: 2 node(s) had untolerated taint {gpu: reserved}, 10 Insufficient nvidia.com/gpu. preemption: 0/12 nodes are available: 10 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.",
			want:    []Cause{Allocation, Memory},
		},
		"kube-scheduler v1.37, verbatim": {
			message: "0/5 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/5 nodes are available: 2 No preemption victims found for incoming pod, 3 Preemption is not helpful for scheduling.",
			want:    []Cause{Allocation, Memory},
		},
		// The mission's case: zone b's time-sliced replicas are all taken
		// and zone a may not take more under maxSkew 1.
		"spread skew beside held GPUs": {
			message: "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't match pod topology spread constraints. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.",
			want:    []Cause{Allocation, Memory, Placement},
		},
		"spread skew only": {
			message: "0/2 nodes are available: 2 node(s) didn't match pod topology spread constraints. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.",
			want:    []Cause{Placement, Other},
		},
		"topology label missing": {
			message: "0/2 nodes are available: 2 node(s) didn't match pod topology spread constraints (missing required label). preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
			want:    []Cause{Placement, NoSuchHardware, Other},
		},
		"MIG slices held": {
			message: "0/3 nodes are available: 3 Insufficient nvidia.com/mig-3g.40gb. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.",
			want:    []Cause{Allocation, Memory},
		},
		"more GPUs than any node has": {
			message: "0/8 nodes are available: 8 Insufficient nvidia.com/gpu. preemption: 0/8 nodes are available: 8 Preemption is not helpful for scheduling.",
			want:    []Cause{NoSuchHardware, Placement, Memory},
		},
		"more GPUs than any node has, and rules exclude some": {
			message: "0/8 nodes are available: 2 node(s) had untolerated taint {gpu: reserved}, 6 Insufficient nvidia.com/gpu. preemption: 0/8 nodes are available: 8 Preemption is not helpful for scheduling.",
			want:    []Cause{Placement, NoSuchHardware, Memory, Other},
		},
		"selector and taints only": {
			message: "0/5 nodes are available: 3 node(s) didn't match Pod's node affinity/selector, 2 node(s) had untolerated taint {gpu: reserved}. preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling.",
			want:    []Cause{Placement, NoSuchHardware, Other},
		},
		"DRA claims, v1.37.2 verbatim": {
			message: "0/2 nodes are available: 2 cannot allocate all claims. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
			want:    []Cause{Allocation, Placement, Memory, NoSuchHardware},
		},
		"DRA claims and a taint": {
			message: "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 cannot allocate all claims. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
			want:    []Cause{Allocation, Placement, Memory, NoSuchHardware, Other},
		},
		"cordoned nodes and CPU": {
			message: "0/4 nodes are available: 1 node(s) were unschedulable, 3 Insufficient cpu.",
			want:    []Cause{Placement, NoSuchHardware, Other},
		},
		"CPU only": {
			message: "0/4 nodes are available: 4 Insufficient cpu.",
			want:    []Cause{Other},
		},
		"no nodes at all": {
			message: "0/0 nodes are available.",
			want:    []Cause{Other},
		},
		// Messages where several of gpupack's causes agree with the
		// scheduler: each of them must be read as agreeing.
		"the only node big enough has free GPUs but no CPU": {
			message: "0/3 nodes are available: 1 Insufficient cpu, 2 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.",
			want:    []Cause{Allocation, Memory, NoSuchHardware, Placement, Other},
		},
		"a MIG profile no layout offers, and a tainted node": {
			message: "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient nvidia.com/mig-1g.5gb. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
			want:    []Cause{Placement, NoSuchHardware, Memory, Other},
		},
		"the node's pod limit": {
			message: "0/2 nodes are available: 1 Too many pods, 1 Insufficient nvidia.com/gpu. preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling.",
			want:    []Cause{Allocation, Memory, NoSuchHardware, Placement, Other},
		},
		// Found by the differential test (internal/e2e): the rules hide
		// the nodes' hardware, and the only resolvable node may be the one
		// short of pods.
		"nodes excluded by rules only, hardware unseen": {
			message: "0/8 nodes are available: 8 node(s) didn't match Pod's node affinity/selector. preemption: 0/8 nodes are available: 8 Preemption is not helpful for scheduling.",
			want:    []Cause{Placement, NoSuchHardware, Other},
		},
		"a cordon, GPUs too few, and one node short of pods": {
			message: "0/8 nodes are available: 1 Too many pods, 1 node(s) were unschedulable, 6 Insufficient memory, 6 Insufficient nvidia.com/gpu, 7 Insufficient cpu. preemption: 0/8 nodes are available: 1 No preemption victims found for incoming pod, 7 Preemption is not helpful for scheduling.",
			want:    []Cause{Allocation, Memory, Placement, NoSuchHardware, Other},
		},
		"GPUs offered under another resource, and CPU too big": {
			message: "0/2 nodes are available: 1 Insufficient memory, 2 Insufficient nvidia.com/gpu. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
			want:    []Cause{NoSuchHardware, Placement, Memory, Other},
		},
		"CPU beyond the only node": {
			message: "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
			want:    []Cause{NoSuchHardware, Other},
		},
		"not a scheduler message": {
			message: "pod has unbound immediate PersistentVolumeClaims",
		},
		"gpupack's own summary line reads the same": {
			message: "0/5 nodes are available: 5 Insufficient nvidia.com/gpu.",
			want:    []Cause{Allocation, Memory},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, SchedulerCauses(tc.message)); diff != "" {
				t.Errorf("SchedulerCauses (-want +got):\n%s", diff)
			}
		})
	}
}

// TestImpliedCausesCrossNode: a node that the scheduler calls short of
// pods may also be excluded by a pod anti-affinity it checks later, so for
// a pod with such an exclusion placement is implied too.
func TestImpliedCausesCrossNode(t *testing.T) {
	// Verbatim from TestDiagnosisMatchesSchedulerPodRules, seed 11 case 0:
	// the node short of pods and GPUs is also in a zone whose pods' anti-
	// affinity selects the pod.
	msg := "0/4 nodes are available: 1 Insufficient nvidia.com/gpu, 1 Too many pods, 1 node(s) were unschedulable, 2 node(s) had untolerated taint(s). preemption: 0/4 nodes are available: 1 No preemption victims found for incoming pod, 3 Preemption is not helpful for scheduling."
	if diff := cmp.Diff([]Cause{Allocation, Memory}, ImpliedCauses(Finding{}, msg)); diff != "" {
		t.Errorf("without cross-node exclusions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Cause{Allocation, Memory, Placement}, ImpliedCauses(Finding{CrossNode: true}, msg)); diff != "" {
		t.Errorf("with them (-want +got):\n%s", diff)
	}
	if got := ImpliedCauses(Finding{CrossNode: true}, "not a message"); got != nil {
		t.Errorf("not a message: %v, want nil", got)
	}
}
