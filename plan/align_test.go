package plan

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/usage"
)

const numaNode = "resource.kubernetes.io/numaNode"

// alignedWorld is a node dra-1 whose two H100s the DRA driver offers
// (gpu-0 on NUMA node 0, gpu-1 on 1), with a pod on gpu-0 whose claim
// asks a GPU and, when nicNUMA is not empty, a NIC of driver nic.dra.net
// (nic-0, on that NUMA node, held by the pod when held) on one NUMA node.
// With dra false the node's GPUs are the device plugin's.
func alignedWorld(t *testing.T, dra bool, nicNUMA string, held bool, labels map[string]string) *cluster.Snapshot {
	t.Helper()
	n := node("dra-1", "H100-80GB", 2, cluster.Exclusive, nil)
	if dra {
		for i := range n.GPUs {
			n.GPUs[i].DRA = &cluster.DRADevice{Driver: "gpu.nvidia.com", Pool: "dra-1", Device: []string{"gpu-0", "gpu-1"}[i], Classes: []string{"gpu.nvidia.com"}}
		}
	}
	p := pod("ml", "rank-0", "dra-1", 1, labels)
	claim := cluster.Claim{Name: "rank-0-rdma", Requests: []cluster.ClaimRequest{{Name: "gpu", DeviceClass: "gpu.nvidia.com", Count: 1}},
		Allocated: []cluster.ClaimDevice{{Request: "gpu", Driver: "gpu.nvidia.com", Pool: "dra-1", Device: "gpu-0"}}}
	if nicNUMA != "" {
		claim.Requests = append(claim.Requests, cluster.ClaimRequest{Name: "nic", DeviceClass: "nic.dra.net", Count: 1, Selectors: []string{"device.attributes['dra.net'].rdma == true"},
			OthersRead: true, Others: []cluster.OtherDevice{{ID: "dra.net/dra-1/nic-0", Node: "dra-1", Held: held}}})
		claim.Constraints = []cluster.ClaimConstraint{{MatchAttribute: numaNode, Evaluated: true, Values: map[string]string{
			"gpu.nvidia.com/dra-1/gpu-0": "int:0", "gpu.nvidia.com/dra-1/gpu-1": "int:1", "dra.net/dra-1/nic-0": "int:" + nicNUMA}}}
		if held {
			claim.Allocated = append(claim.Allocated, cluster.ClaimDevice{Request: "nic", Driver: "dra.net", Pool: "dra-1", Device: "nic-0"})
		}
	}
	p.Claims = []cluster.Claim{claim}
	s, err := cluster.NewSnapshot(gpu.Default(), []*cluster.Node{n}, []*cluster.Pod{p})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAlignedClaims: a workload whose claim keeps its GPU on one NUMA
// node with a NIC gets a MIG share through DRA only where the proof puts
// the MIG device on a GPU of the NIC's NUMA node; its claim template then
// asks the NIC as the claim did, with the constraint over both requests.
// Everywhere else it keeps its GPU (AlignedDevices): on the device
// plugin's GPUs, on time slices (one shared claim for all its pods), and
// where the proof's GPU is on another NUMA node than any free NIC.
func TestAlignedClaims(t *testing.T) {
	prod := map[string]string{"app": "rank", "app.kubernetes.io/component": "inference", "environment": "production"}
	aligned := &MIGClaimTemplate{Namespace: "ml", Name: "gpupack-rank-1g-10gb", Profile: "1g.10gb", MatchAttribute: numaNode,
		Aligned: []cluster.ClaimRequest{{Name: "nic", DeviceClass: "nic.dra.net", Count: 1, Selectors: []string{"device.attributes['dra.net'].rdma == true"}}}}
	for name, tc := range map[string]struct {
		dra      bool
		nicNUMA  string
		held     bool
		labels   map[string]string
		want     Code
		template *MIGClaimTemplate
		detail   string
	}{
		"MIG share beside the NIC it holds": {dra: true, nicNUMA: "0", held: true, labels: prod, want: NeedsIsolation, template: aligned},
		"MIG share beside a free NIC":       {dra: true, nicNUMA: "0", labels: prod, want: NeedsIsolation, template: aligned},
		"the only NIC on another NUMA node": {dra: true, nicNUMA: "1", labels: prod, want: AlignedDevices,
			detail: "its claim rank-0-rdma keeps its GPU with request nic of another driver's devices on one resource.kubernetes.io/numaNode; the proof puts pod ml/rank-0 on GPU 0 of dra-1 (resource.kubernetes.io/numaNode 0), where 1 more free device(s) of request nic with that value would be needed, so its GPUs stay"},
		"time slices would share one claim": {dra: true, nicNUMA: "0", held: true, want: AlignedDevices,
			detail: "its claim rank-0-rdma keeps its GPU with request nic of another driver's devices on one resource.kubernetes.io/numaNode; a shared claim of its pods would give all of them the other driver's devices of one claim; only a MIG device, whose claim template the plan writes with those devices and the constraint, keeps that alignment, so its GPUs stay"},
		"device plugin GPUs": {nicNUMA: "0", held: true, labels: prod, want: AlignedDevices,
			detail: "its claim rank-0-rdma keeps its GPU with request nic of another driver's devices on one resource.kubernetes.io/numaNode; its GPUs are offered by the device plugin, whose shares no claim aligns with that device, so its GPUs stay"},
		"no NIC: shared as usual": {dra: true, labels: prod, want: NeedsIsolation,
			template: &MIGClaimTemplate{Namespace: "ml", Name: "gpupack-rank-1g-10gb", Profile: "1g.10gb"}},
	} {
		t.Run(name, func(t *testing.T) {
			s := alignedWorld(t, tc.dra, tc.nicNUMA, tc.held, tc.labels)
			u := &usage.Facts{Window: 7 * 24 * time.Hour, Pods: map[string]usage.PodFacts{"ml/rank-0": obs(0.1, usage.Bursty, 6, 0.1)}}
			pl, err := Make(context.Background(), s, u, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			d := pl.Decisions[0]
			if d.Reason.Code != tc.want {
				t.Fatalf("decision %s (%s): %s; want %s", d.Action, d.Reason.Code, d.Reason.Detail, tc.want)
			}
			if tc.detail != "" {
				if diff := cmp.Diff(tc.detail, d.Reason.Detail); diff != "" {
					t.Errorf("reason (-want +got):\n%s", diff)
				}
				if d.Action != Keep || d.After.Resource != "nvidia.com/gpu" || d.After.ResourceClaimTemplate != "" || len(d.Risks) > 0 {
					t.Errorf("kept decision: action %s, after %+v, risks %v", d.Action, d.After, d.Risks)
				}
			}
			var got *MIGClaimTemplate
			if pl.DRA != nil && len(pl.DRA.ClaimTemplates) > 0 {
				got = &pl.DRA.ClaimTemplates[0]
			}
			if diff := cmp.Diff(tc.template, got); diff != "" {
				t.Errorf("claim template (-want +got):\n%s", diff)
			}
			if tc.template != nil && d.After.ResourceClaimTemplate != tc.template.Name {
				t.Errorf("after.resourceClaimTemplate = %q, want %q", d.After.ResourceClaimTemplate, tc.template.Name)
			}
		})
	}
}
