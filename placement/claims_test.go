package placement

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/cluster"
)

// dra offers the node's GPUs from index first on through NVIDIA's DRA
// driver, in pool pool: whole GPUs as gpu-<index>, MIG GPUs as one device
// per slice, gpu-<index>-s<slice>; class is the DeviceClass that selects
// them.
func (b *nodeBuilder) dra(first int, class string) *nodeBuilder {
	for i := first; i < len(b.n.GPUs); i++ {
		g := &b.n.GPUs[i]
		g.DRA = &cluster.DRADevice{Driver: "gpu.nvidia.com", Pool: b.n.Name, Classes: []string{class}}
		if g.Sharing == cluster.MIG {
			for j := range g.Layout {
				g.DRA.SliceDevices = append(g.DRA.SliceDevices, "gpu-"+string(rune('0'+i))+"-s"+string(rune('0'+j)))
			}
			continue
		}
		g.DRA.Device = "gpu-" + string(rune('0'+i))
	}
	return b
}

// claim gives the pod a pending ResourceClaim named name with the requests.
func (b *podBuilder) claim(name string, requests ...cluster.ClaimRequest) *podBuilder {
	b.p.Claims = append(b.p.Claims, cluster.Claim{Name: name, PodClaim: name, Requests: requests})
	if b.p.GPU.Kind == cluster.NoGPU {
		b.p.GPU = cluster.Request{Kind: cluster.WholeGPUs, Count: 1}
	}
	return b
}

// exact is an evaluated request for count devices of class that accepts
// the devices named (on pool n).
func exact(name, class string, count int, accepts ...string) cluster.ClaimRequest {
	r := cluster.ClaimRequest{Name: name, DeviceClass: class, Count: count, Evaluated: true}
	for _, a := range accepts {
		r.Accepts = append(r.Accepts, "gpu.nvidia.com/n/"+a)
	}
	return r
}

// TestFitClaims works each case by hand. Node n has a device-plugin H100
// (GPU 0) and two H100s offered through DRA, gpu-1 and gpu-2, of class
// gpu; node m is an A100 in MIG (3g.20gb, 1g.5gb, 1g.5gb) offered as three
// devices of class mig.
func TestFitClaims(t *testing.T) {
	n := makeNode("n").gpus("H100-80GB", 3, cluster.Exclusive, 0).dra(1, "gpu").obj()
	idle := NewNodeState(n)
	gpu1Held := place(t, n, makePod("holder").claim("h", exact("gpu", "gpu", 1, "gpu-1")).obj())
	if gpu1Held.GPUs[1].Holders != 1 {
		t.Fatalf("setup: the holder's claim took %+v, want gpu-1", gpu1Held.GPUs)
	}
	bothHeld := place(t, n, makePod("h1").claim("h1", exact("gpu", "gpu", 2, "gpu-1", "gpu-2")).obj())
	alt := func(name string, alts ...cluster.ClaimRequest) cluster.ClaimRequest {
		return cluster.ClaimRequest{Name: name, FirstAvailable: alts}
	}
	all := func(accepts ...string) cluster.ClaimRequest {
		r := exact("gpu", "gpu", 0, accepts...)
		r.Count, r.All = 0, true
		return r
	}
	short := func(req string, offered, accepted, free, needed int, held ...int) *ClaimShortfall {
		sf := &ClaimShortfall{Claim: "c", Request: req, Class: "gpu", Offered: offered, Accepted: accepted, Free: free, Needed: needed}
		for _, g := range held {
			sf.Held = append(sf.Held, cluster.Device{GPU: g, Slice: -1})
		}
		return sf
	}
	cases := map[string]struct {
		pod   *cluster.Pod
		state *NodeState
		// want is the claim shortfall, nil when the pod fits; devices the
		// GPUs it then takes.
		want         *ClaimShortfall
		unresolvable bool
		devices      []int
	}{
		"selector accepts nothing": {
			pod: makePod("p").claim("c", exact("gpu", "gpu", 1)).obj(), state: idle,
			want: short("gpu", 2, 0, 0, 1), unresolvable: true,
		},
		"count too large": {
			pod: makePod("p").claim("c", exact("gpu", "gpu", 3, "gpu-1", "gpu-2")).obj(), state: idle,
			want: short("gpu", 2, 2, 2, 3), unresolvable: true,
		},
		// The device-plugin H100 is free, but no claim can take it.
		"all accepted devices held": {
			pod: makePod("p").claim("c", exact("gpu", "gpu", 1, "gpu-1", "gpu-2")).obj(), state: bothHeld,
			want: short("gpu", 2, 2, 0, 1, 1, 2),
		},
		"the free one accepted": {
			pod: makePod("p").claim("c", exact("gpu", "gpu", 1, "gpu-1", "gpu-2")).obj(), state: gpu1Held, devices: []int{2},
		},
		"two requests take distinct devices": {
			pod: makePod("p").claim("c", exact("a", "gpu", 1, "gpu-1", "gpu-2"), exact("b", "gpu", 1, "gpu-1", "gpu-2")).obj(), state: idle, devices: []int{1, 2},
		},
		"a later request finds the earlier's device taken": {
			pod: makePod("p").claim("c", exact("a", "gpu", 1, "gpu-2"), exact("b", "gpu", 1, "gpu-2")).obj(), state: idle,
			want: short("b", 2, 1, 0, 1),
		},
		"all: every accepted device free": {
			pod: makePod("p").claim("c", all("gpu-1", "gpu-2")).obj(), state: idle, devices: []int{1, 2},
		},
		"all: one accepted device held": {
			pod: makePod("p").claim("c", all("gpu-1", "gpu-2")).obj(), state: gpu1Held,
			want: &ClaimShortfall{Claim: "c", Request: "gpu", Class: "gpu", Offered: 2, Accepted: 2, Free: 1, Needed: 2, All: true, Held: []cluster.Device{{GPU: 1, Slice: -1}}},
		},
		"all: nothing accepted": {
			pod: makePod("p").claim("c", all()).obj(), state: idle,
			want: &ClaimShortfall{Claim: "c", Request: "gpu", Class: "gpu", Offered: 2, Needed: 1, All: true}, unresolvable: true,
		},
		"firstAvailable: the second alternative": {
			pod: makePod("p").claim("c", alt("gpu", exact("big", "gpu", 4, "gpu-1", "gpu-2"), exact("small", "gpu", 1, "gpu-1", "gpu-2"))).obj(), state: gpu1Held, devices: []int{2},
		},
		"firstAvailable: every alternative fails": {
			pod: makePod("p").claim("c", alt("gpu", exact("big", "gpu", 4, "gpu-1", "gpu-2"), exact("small", "gpu", 1, "gpu-1"))).obj(), state: gpu1Held,
			want: func() *ClaimShortfall {
				sf := short("gpu/big", 2, 2, 1, 4, 1)
				sf.Alternatives = []ClaimShortfall{*short("gpu/big", 2, 2, 1, 4, 1), *short("gpu/small", 2, 1, 0, 1, 1)}
				return sf
			}(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := demand(t, tc.pod)
			a, rs := Fit(d, tc.state)
			if got := Fits(d, tc.state); got != (len(rs) == 0) {
				t.Errorf("Fits = %v, but Fit gives %v", got, rs)
			}
			if tc.want == nil {
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
			if len(rs) != 1 || rs[0].Code != ClaimUnallocatable {
				t.Fatalf("reasons %v, want one %s", rs, ClaimUnallocatable)
			}
			if diff := cmp.Diff(tc.want, rs[0].Claim); diff != "" {
				t.Errorf("shortfall (-want +got):\n%s", diff)
			}
			if rs[0].Unresolvable != tc.unresolvable || rs[0].Message() != "cannot allocate all claims" {
				t.Errorf("reason %+v: want unresolvable %v and the scheduler's words", rs[0], tc.unresolvable)
			}
		})
	}
}

// TestFitClaimsOther: MIG slices as devices, a selector error, a missing
// claim, a request that was not evaluated, node-level reasons kept.
func TestFitClaimsOther(t *testing.T) {
	m := makeNode("m").gpus("A100-40GB", 1, cluster.MIG, 0, "3g.20gb", "1g.5gb", "1g.5gb").dra(0, "mig").obj()
	slice := func(j int) string { return m.GPUs[0].DRA.SliceDevices[j] }
	small := func() cluster.ClaimRequest {
		r := cluster.ClaimRequest{Name: "mig", DeviceClass: "mig", Count: 1, Evaluated: true}
		for j, sl := range m.GPUs[0].Layout {
			if sl.Profile == "1g.5gb" {
				r.Accepts = append(r.Accepts, "gpu.nvidia.com/m/"+slice(j))
			}
		}
		return r
	}
	one := place(t, m, makePod("a").claim("a", small()).obj())
	if _, rs := Fit(demand(t, makePod("b").claim("b", small()).obj()), one); len(rs) > 0 {
		t.Errorf("the second 1g.5gb slice is free, yet: %v", rs)
	}
	two := place(t, m, makePod("a").claim("a", small()).obj(), makePod("b").claim("b", small()).obj())
	_, rs := Fit(demand(t, makePod("c").claim("c", small()).obj()), two)
	if len(rs) != 1 || rs[0].Claim == nil || rs[0].Claim.Free != 0 || rs[0].Claim.Accepted != 2 || rs[0].Claim.Offered != 3 || len(rs[0].Claim.Held) != 2 {
		t.Errorf("both 1g.5gb slices held: %v (%+v); want 3 offered, 2 accepted, none free, 2 held", rs, rs[0].Claim)
	}

	// The selector fails on the 3g.20gb slice: the allocator meets it
	// while it is free, not once it is held (in use is checked first).
	broken := small()
	broken.SelectorErrors = map[string]string{"gpu.nvidia.com/m/" + slice(0): "claim ml/c: selector #0 on device gpu.nvidia.com/m/" + slice(0) + ": CEL runtime error: no such key: x"}
	_, rs = Fit(demand(t, makePod("c").claim("c", broken).obj()), NewNodeState(m))
	if len(rs) != 1 || rs[0].Code != ClaimSelectorError || rs[0].Message() != broken.SelectorErrors["gpu.nvidia.com/m/"+slice(0)] {
		t.Errorf("selector error: %v, want the allocator's error", rs)
	}
	big := NewNodeState(m)
	big.Assign(demand(t, makePod("x").mig("3g.20gb").obj()), Assignment{Devices: []DeviceShare{{GPU: 0, Slice: 0}}})
	if _, rs = Fit(demand(t, makePod("c").claim("c", broken).obj()), big); len(rs) > 0 {
		t.Errorf("selector error on a held device: %v, want the pod to fit a free 1g.5gb slice", rs)
	}
	all := broken
	all.Count, all.All = 0, true
	if _, rs = Fit(demand(t, makePod("c").claim("c", all).obj()), big); len(rs) != 1 || rs[0].Code != ClaimSelectorError {
		t.Errorf("All with a selector error on a held device: %v, want the error (All evaluates every device)", rs)
	}

	missing := makePod("c").obj()
	missing.Claims = []cluster.Claim{{PodClaim: "gpu", Template: "gone", Missing: true}}
	_, rs = Fit(demand(t, missing), NewNodeState(m))
	if len(rs) != 1 || rs[0].Code != ClaimNotFound || rs[0].Detail != "the pod's template gone does not exist" {
		t.Errorf("missing claim: %v", rs)
	}

	// Not evaluated (a snapshot written before): judged as the GPU
	// request it stands for, on any GPU.
	plain := makePod("c").whole(1).obj()
	plain.Claims = []cluster.Claim{{Name: "c", PodClaim: "c", Requests: []cluster.ClaimRequest{{Name: "gpu", DeviceClass: "gpu", Count: 1}}}}
	h := makeNode("h").gpus("H100-80GB", 1, cluster.Exclusive, 0).obj()
	if _, rs := Fit(demand(t, plain), NewNodeState(h)); len(rs) > 0 {
		t.Errorf("an unevaluated claim on a device-plugin GPU: %v, want it judged as 1 GPU", rs)
	}

	tainted := makeNode("m").gpus("A100-40GB", 1, cluster.MIG, 0, "3g.20gb", "1g.5gb", "1g.5gb").dra(0, "mig").taint("k", "v").obj()
	_, rs = Fit(demand(t, makePod("c").claim("c", small()).obj()), NewNodeState(tainted))
	if len(rs) != 1 || rs[0].Code != TaintNotTolerated {
		t.Errorf("tainted node: %v, want the taint alone", rs)
	}
}

// BenchmarkFitsNoClaims is Fits on a pod without claims: the claims hook
// must cost it nothing (0 allocations).
func BenchmarkFitsNoClaims(b *testing.B) {
	n := makeNode("n").gpus("H100-80GB", 8, cluster.Exclusive, 0).obj()
	s := NewNodeState(n)
	d := demand(b, makePod("p").whole(2).obj())
	b.ReportAllocs()
	for b.Loop() {
		Fits(d, s)
	}
}

// BenchmarkFitsClaims is Fits on a pod with one claim over 8 DRA GPUs.
func BenchmarkFitsClaims(b *testing.B) {
	n := makeNode("n").gpus("H100-80GB", 8, cluster.Exclusive, 0).dra(0, "gpu").obj()
	s := NewNodeState(n)
	d := demand(b, makePod("p").claim("c", exact("gpu", "gpu", 2, "gpu-0", "gpu-3", "gpu-7")).obj())
	b.ReportAllocs()
	for b.Loop() {
		Fits(d, s)
	}
}
