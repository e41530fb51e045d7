package placement

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/cluster"
)

// constrained adds a constraint on the attribute, with the values of the
// devices named (on pool n), to the pod's last claim.
func constrained(p *cluster.Pod, match bool, requests []string, values map[string]string) *cluster.Pod {
	k := cluster.ClaimConstraint{Requests: requests, Evaluated: true, Values: map[string]string{}}
	if match {
		k.MatchAttribute = "resource.kubernetes.io/pcieRoot"
	} else {
		k.DistinctAttribute = "resource.kubernetes.io/pcieRoot"
	}
	for d, v := range values {
		k.Values["gpu.nvidia.com/n/"+d] = "string:" + v
	}
	c := &p.Claims[len(p.Claims)-1]
	c.Constraints = append(c.Constraints, k)
	return p
}

// TestFitClaimConstraints: node n offers four H100s through DRA, gpu-0 and
// gpu-1 under PCIe root a, gpu-2 and gpu-3 under b; gpu-0 is held.
// Placement searches for devices that meet the claim's constraint where
// the first free ones do not, and names the constraint when none do.
func TestFitClaimConstraints(t *testing.T) {
	n := makeNode("n").gpus("H100-80GB", 4, cluster.Exclusive, 0).dra(0, "gpu").obj()
	all := []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"}
	roots := map[string]string{"gpu-0": "a", "gpu-1": "a", "gpu-2": "b", "gpu-3": "b"}
	held := place(t, n, makePod("holder").claim("h", exact("gpu", "gpu", 1, "gpu-0")).obj())
	cases := map[string]struct {
		pod     *cluster.Pod
		devices []int
		want    *ConstraintShortfall
	}{
		"match: the first free pair crosses roots, the search takes root b": {
			pod:     constrained(makePod("p").claim("c", exact("gpu", "gpu", 2, all...)).obj(), true, nil, roots),
			devices: []int{2, 3},
		},
		"match over two requests": {
			pod:     constrained(makePod("p").claim("c", exact("a", "gpu", 1, all...), exact("b", "gpu", 1, all...)).obj(), true, []string{"a", "b"}, roots),
			devices: []int{2, 3},
		},
		"match: three devices, at most two share a root": {
			pod:  constrained(makePod("p").claim("c", exact("gpu", "gpu", 3, all...)).obj(), true, nil, roots),
			want: &ConstraintShortfall{Claim: "c", Attribute: "resource.kubernetes.io/pcieRoot", Match: true, Needed: 3, Best: 2, BestValue: "string:b", Distinct: 2, Without: 0},
		},
		"match: a device without the attribute is never taken": {
			pod:  constrained(makePod("p").claim("c", exact("gpu", "gpu", 2, all...)).obj(), true, nil, map[string]string{"gpu-1": "a", "gpu-2": "b"}),
			want: &ConstraintShortfall{Claim: "c", Attribute: "resource.kubernetes.io/pcieRoot", Match: true, Needed: 2, Best: 1, BestValue: "string:a", Distinct: 2, Without: 1},
		},
		"match on a request the constraint does not cover is free": {
			pod:     constrained(makePod("p").claim("c", exact("a", "gpu", 2, all...), exact("b", "gpu", 1, all...)).obj(), true, []string{"a"}, roots),
			devices: []int{2, 3, 1},
		},
		"distinct: the first free pair shares root b, the search takes one of each": {
			pod:     constrained(makePod("p").claim("c", exact("gpu", "gpu", 2, all...)).obj(), false, nil, map[string]string{"gpu-1": "b", "gpu-2": "b", "gpu-3": "a"}),
			devices: []int{1, 3},
		},
		"distinct: three devices, two roots": {
			pod:  constrained(makePod("p").claim("c", exact("gpu", "gpu", 3, all...)).obj(), false, nil, roots),
			want: &ConstraintShortfall{Claim: "c", Attribute: "resource.kubernetes.io/pcieRoot", Needed: 3, Best: 2, BestValue: "string:b", Distinct: 2},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := demand(t, tc.pod)
			a, reasons := Fit(d, held)
			if got := Fits(d, held); got != (len(reasons) == 0) {
				t.Errorf("Fits = %v, but Fit gives %v", got, reasons)
			}
			if tc.want == nil {
				if len(reasons) > 0 {
					t.Fatalf("Fit: %v, want a fit", reasons)
				}
				var got []int
				for _, s := range a.Devices {
					got = append(got, s.GPU)
				}
				if diff := cmp.Diff(tc.devices, got); diff != "" {
					t.Errorf("devices (-want +got):\n%s", diff)
				}
				return
			}
			if len(reasons) != 1 || reasons[0].Code != ClaimConstraintUnsatisfied || reasons[0].Message() != "cannot allocate all claims" {
				t.Fatalf("Fit: %v, want one %s", reasons, ClaimConstraintUnsatisfied)
			}
			if diff := cmp.Diff(tc.want, reasons[0].Constraint); diff != "" {
				t.Errorf("constraint (-want +got):\n%s", diff)
			}
		})
	}
}

// BenchmarkFitsClaimsConstraint: a claim of four GPUs that must share a
// PCIe root on an 8-GPU node whose roots alternate, so the first free four
// break it and Fits searches the values (the second root serves).
func BenchmarkFitsClaimsConstraint(b *testing.B) {
	n := makeNode("n").gpus("H100-80GB", 8, cluster.Exclusive, 0).dra(0, "gpu").obj()
	all, roots := []string{}, map[string]string{}
	for i := range 8 {
		name := "gpu-" + string(rune('0'+i))
		all = append(all, name)
		roots[name] = string(rune('a' + i%2))
	}
	s := place(b, n, makePod("holder").claim("h", exact("gpu", "gpu", 1, "gpu-0")).obj())
	d := demand(b, constrained(makePod("p").claim("c", exact("gpu", "gpu", 4, all...)).obj(), true, nil, roots))
	if !Fits(d, s) {
		b.Fatal("the claim does not fit")
	}
	b.ReportAllocs()
	for b.Loop() {
		Fits(d, s)
	}
}
