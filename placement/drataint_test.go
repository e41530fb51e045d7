package placement

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/cluster"
)

// deviceTaint taints the DRA device named (of the node's GPUs) with
// key=value and effect, added by rule (empty: in the slice).
func (b *nodeBuilder) deviceTaint(device, key, value, effect, rule string) *nodeBuilder {
	for i := range b.n.GPUs {
		if d := b.n.GPUs[i].DRA; d != nil && containsString(d.Names(), device) {
			d.Taints = append(d.Taints, cluster.DeviceTaint{Device: device, Key: key, Value: value, Effect: effect, Rule: rule})
		}
	}
	return b
}

func tolerating(r cluster.ClaimRequest, tols ...cluster.DeviceToleration) cluster.ClaimRequest {
	r.Tolerations = tols
	return r
}

// TestFitClaimsDeviceTaints works each case by hand on node n: a
// device-plugin H100 (GPU 0) and gpu-1, gpu-2 offered through DRA, of
// class gpu. A NoSchedule or NoExecute taint that the request does not
// tolerate keeps the device from it, as the allocator's
// taintPreventsAllocation does; the reason is the taint's when the devices
// it keeps would serve the request, else the shortfall's.
func TestFitClaimsDeviceTaints(t *testing.T) {
	xid := func(devices ...string) *cluster.Node {
		b := makeNode("n").gpus("H100-80GB", 3, cluster.Exclusive, 0).dra(1, "gpu")
		for _, d := range devices {
			b.deviceTaint(d, "gpu.nvidia.com/xid", "79", cluster.TaintEffectNoSchedule, "gpupack-unhealthy")
		}
		return b.obj()
	}
	both := exact("gpu", "gpu", 1, "gpu-1", "gpu-2")
	exists := cluster.DeviceToleration{Key: "gpu.nvidia.com/xid", Operator: cluster.TolerationOpExists}
	taint := cluster.DeviceTaint{Device: "gpu-1", Key: "gpu.nvidia.com/xid", Value: "79", Effect: cluster.TaintEffectNoSchedule, Rule: "gpupack-unhealthy"}
	untol := func(gpus ...int) []UntoleratedDevice {
		var out []UntoleratedDevice
		for _, g := range gpus {
			tt := taint
			tt.Device = "gpu-" + string(rune('0'+g))
			out = append(out, UntoleratedDevice{Device: cluster.Device{GPU: g, Slice: -1}, ID: "gpu.nvidia.com/n/" + tt.Device, Taint: tt})
		}
		return out
	}
	heldGPU2 := func(n *cluster.Node) *NodeState {
		return place(t, n, makePod("holder").claim("h", tolerating(exact("gpu", "gpu", 1, "gpu-2"), exists)).obj())
	}
	cases := map[string]struct {
		pod   *cluster.Pod
		state *NodeState
		// code is the reason's, empty when the pod fits (on devices).
		code    Code
		want    *ClaimShortfall
		devices []int
	}{
		"the untainted device": {
			pod: makePod("p").claim("c", both).obj(), state: NewNodeState(xid("gpu-1")), devices: []int{2},
		},
		"every free device tainted": {
			pod: makePod("p").claim("c", both).obj(), state: NewNodeState(xid("gpu-1", "gpu-2")), code: ClaimTaintNotTolerated,
			want: &ClaimShortfall{Claim: "c", Request: "gpu", Class: "gpu", Offered: 2, Accepted: 2, Needed: 1, Untolerated: untol(1, 2)},
		},
		"tolerated by Exists": {
			pod: makePod("p").claim("c", tolerating(both, exists)).obj(), state: NewNodeState(xid("gpu-1", "gpu-2")), devices: []int{1},
		},
		"tolerated by Equal and the effect": {
			pod:   makePod("p").claim("c", tolerating(both, cluster.DeviceToleration{Key: "gpu.nvidia.com/xid", Value: "79", Effect: cluster.TaintEffectNoSchedule})).obj(),
			state: NewNodeState(xid("gpu-1", "gpu-2")), devices: []int{1},
		},
		"a toleration of another effect": {
			pod:   makePod("p").claim("c", tolerating(both, cluster.DeviceToleration{Key: "gpu.nvidia.com/xid", Operator: cluster.TolerationOpExists, Effect: cluster.TaintEffectNoExecute})).obj(),
			state: NewNodeState(xid("gpu-1", "gpu-2")), code: ClaimTaintNotTolerated,
			want: &ClaimShortfall{Claim: "c", Request: "gpu", Class: "gpu", Offered: 2, Accepted: 2, Needed: 1, Untolerated: untol(1, 2)},
		},
		"effect None": {
			pod:   makePod("p").claim("c", both).obj(),
			state: NewNodeState(makeNode("n").gpus("H100-80GB", 3, cluster.Exclusive, 0).dra(1, "gpu").deviceTaint("gpu-1", "note", "", cluster.TaintEffectNone, "").obj()), devices: []int{1},
		},
		"the other device held": {
			pod: makePod("p").claim("c", both).obj(), state: heldGPU2(xid("gpu-1")), code: ClaimTaintNotTolerated,
			want: &ClaimShortfall{Claim: "c", Request: "gpu", Class: "gpu", Offered: 2, Accepted: 2, Needed: 1, Held: []cluster.Device{{GPU: 2, Slice: -1}}, Untolerated: untol(1)},
		},
		// Tolerating would still leave one device short: not the taint's.
		"too few even tolerated": {
			pod: makePod("p").claim("c", exact("gpu", "gpu", 2, "gpu-1", "gpu-2")).obj(), state: heldGPU2(xid("gpu-1")), code: ClaimUnallocatable,
			want: &ClaimShortfall{Claim: "c", Request: "gpu", Class: "gpu", Offered: 2, Accepted: 2, Needed: 2, Held: []cluster.Device{{GPU: 2, Slice: -1}}, Untolerated: untol(1)},
		},
		"all: one accepted device tainted": {
			pod: func() *cluster.Pod {
				r := exact("gpu", "gpu", 0, "gpu-1", "gpu-2")
				r.Count, r.All = 0, true
				return makePod("p").claim("c", r).obj()
			}(),
			state: NewNodeState(xid("gpu-1")), code: ClaimTaintNotTolerated,
			want: &ClaimShortfall{Claim: "c", Request: "gpu", Class: "gpu", Offered: 2, Accepted: 2, Free: 1, Needed: 2, All: true, Untolerated: untol(1)},
		},
		"firstAvailable: the tolerating alternative": {
			pod: makePod("p").claim("c", cluster.ClaimRequest{Name: "gpu", FirstAvailable: []cluster.ClaimRequest{
				exact("strict", "gpu", 1, "gpu-1", "gpu-2"), tolerating(exact("lenient", "gpu", 1, "gpu-1", "gpu-2"), exists)}}).obj(),
			state: NewNodeState(xid("gpu-1", "gpu-2")), devices: []int{1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := demand(t, tc.pod)
			a, rs := Fit(d, tc.state)
			if got := Fits(d, tc.state); got != (len(rs) == 0) {
				t.Errorf("Fits = %v, but Fit gives %v", got, rs)
			}
			if tc.code == "" {
				if len(rs) > 0 {
					t.Fatalf("reasons %v, want the pod to fit", rs)
				}
				var got []int
				for _, dev := range a.Devices {
					got = append(got, dev.GPU)
				}
				if diff := cmp.Diff(tc.devices, got); diff != "" {
					t.Errorf("devices taken (-want +got):\n%s", diff)
				}
				return
			}
			if len(rs) != 1 || rs[0].Code != tc.code {
				t.Fatalf("reasons %v, want one %s", rs, tc.code)
			}
			if diff := cmp.Diff(tc.want, rs[0].Claim); diff != "" {
				t.Errorf("shortfall (-want +got):\n%s", diff)
			}
			if rs[0].Message() != "cannot allocate all claims" {
				t.Errorf("message %q, want the scheduler's words", rs[0].Message())
			}
			if rs[0].Code == ClaimTaintNotTolerated && (rs[0].Unresolvable || !strings.Contains(rs[0].Detail, "device gpu.nvidia.com/n/gpu-1 has taint gpu.nvidia.com/xid=79:NoSchedule (DeviceTaintRule gpupack-unhealthy), which the request does not tolerate")) {
				t.Errorf("reason %+v: want a resolvable reason naming gpu-1's taint and its rule", rs[0])
			}
		})
	}
}

// TestFitClaimsSliceTaint: a taint on one MIG slice keeps that slice only.
func TestFitClaimsSliceTaint(t *testing.T) {
	b := makeNode("m").gpus("A100-40GB", 1, cluster.MIG, 0, "3g.20gb", "1g.5gb", "1g.5gb").dra(0, "mig")
	m := b.obj()
	var small []string
	for j, sl := range m.GPUs[0].Layout {
		if sl.Profile == "1g.5gb" {
			small = append(small, m.GPUs[0].DRA.SliceDevices[j])
		}
	}
	m = b.deviceTaint(small[0], "ecc", "", cluster.TaintEffectNoExecute, "").obj()
	r := cluster.ClaimRequest{Name: "mig", DeviceClass: "mig", Count: 1, Evaluated: true, Accepts: []string{"gpu.nvidia.com/m/" + small[0], "gpu.nvidia.com/m/" + small[1]}}
	a, rs := Fit(demand(t, makePod("p").claim("c", r).obj()), NewNodeState(m))
	if len(rs) > 0 || len(a.Devices) != 1 || m.GPUs[0].DRA.SliceDevices[a.Devices[0].Slice] != small[1] {
		t.Errorf("Fit = %+v, %v; want the untainted slice %s", a, rs, small[1])
	}
	r.Count = 2
	if _, rs = Fit(demand(t, makePod("p").claim("c", r).obj()), NewNodeState(m)); len(rs) != 1 || rs[0].Code != ClaimTaintNotTolerated || rs[0].Claim.Untolerated[0].Device.Slice < 0 {
		t.Errorf("two slices: %v, want the tainted slice named", rs)
	}
}

// BenchmarkFitsClaimsTainted is BenchmarkFitsClaims with every device
// tainted twice and the request tolerating one taint of each device.
func BenchmarkFitsClaimsTainted(b *testing.B) {
	nb := makeNode("n").gpus("H100-80GB", 8, cluster.Exclusive, 0).dra(0, "gpu")
	for i := range 8 {
		device := "gpu-" + string(rune('0'+i))
		nb.deviceTaint(device, "maintenance", "", cluster.TaintEffectNoSchedule, "")
		nb.deviceTaint(device, "audit", "", cluster.TaintEffectNone, "audit")
	}
	s := NewNodeState(nb.obj())
	r := tolerating(exact("gpu", "gpu", 2, "gpu-0", "gpu-3", "gpu-7"), cluster.DeviceToleration{Key: "maintenance", Operator: cluster.TolerationOpExists})
	d := demand(b, makePod("p").claim("c", r).obj())
	if !Fits(d, s) {
		b.Fatal("the tolerating pod does not fit")
	}
	b.ReportAllocs()
	for b.Loop() {
		Fits(d, s)
	}
}
