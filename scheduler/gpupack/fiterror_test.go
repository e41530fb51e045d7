package gpupack

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/gpupack/gpupack/diagnose"
)

// upstreamMessage is the FailedScheduling message that kube-scheduler's own
// code words for the per-node filter statuses: framework.FitError.Error
// with the message DefaultPreemption's PostFilter adds when it finds no
// candidate, for pods of one priority (no victims on nodes preemption might
// help, the rest absent: "Preemption is not helpful for scheduling").
func upstreamMessage(statuses []diagnose.NodeStatus) string {
	filter := framework.NewDefaultNodeToStatus()
	preemption := framework.NewDefaultNodeToStatus()
	for i, st := range statuses {
		name := fmt.Sprintf("node-%d", i)
		code := fwk.Unschedulable
		if st.Unresolvable {
			code = fwk.UnschedulableAndUnresolvable
		}
		filter.Set(name, fwk.NewStatus(code, st.Reasons...))
		if code == fwk.Unschedulable {
			preemption.Set(name, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "No preemption victims found for incoming pod"))
		}
	}
	preemption.SetAbsentNodesStatus(fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "Preemption is not helpful for scheduling"))
	post := &framework.FitError{NumAllNodes: len(statuses), Diagnosis: framework.Diagnosis{NodeToStatus: preemption}}
	fe := &framework.FitError{NumAllNodes: len(statuses), Diagnosis: framework.Diagnosis{NodeToStatus: filter, PostFilterMsg: "preemption: " + post.Error()}}
	return fe.Error()
}

// TestFitErrorMessageIsUpstream checks diagnose's scheduler line against
// kube-scheduler's own formatting for random per-node statuses, with
// enough nodes that counts of two digits sort as strings do.
func TestFitErrorMessageIsUpstream(t *testing.T) {
	statuses := []diagnose.NodeStatus{
		{Reasons: []string{"node(s) were unschedulable"}, Unresolvable: true},
		{Reasons: []string{"node(s) had untolerated taint(s)"}, Unresolvable: true},
		{Reasons: []string{"node(s) didn't match Pod's node affinity/selector"}, Unresolvable: true},
		{Reasons: []string{"Insufficient nvidia.com/gpu"}},
		{Reasons: []string{"Insufficient nvidia.com/gpu"}, Unresolvable: true},
		{Reasons: []string{"Insufficient cpu", "Insufficient nvidia.com/gpu"}},
		{Reasons: []string{"Insufficient nvidia.com/mig-3g.40gb"}},
		{Reasons: []string{"Insufficient memory", "Insufficient nvidia.com/gpu.shared"}, Unresolvable: true},
	}
	r := rand.New(rand.NewPCG(11, 10))
	for i := range 200 {
		nodes := make([]diagnose.NodeStatus, 1+r.IntN(30))
		for j := range nodes {
			nodes[j] = statuses[r.IntN(len(statuses))]
		}
		if diff := cmp.Diff(upstreamMessage(nodes), diagnose.FitErrorMessage(nodes)); diff != "" {
			t.Fatalf("case %d, %d nodes (-upstream +diagnose):\n%s", i, len(nodes), diff)
		}
	}
}
