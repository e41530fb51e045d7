package placement

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

const gi = cluster.Quantity(1 << 30)

func qp(q cluster.Quantity) *cluster.Quantity { return &q }

// sharedCap makes the node's DRA GPUs (from index first on) allow multiple
// allocations, with the capacities.
func (b *nodeBuilder) sharedCap(first int, caps ...cluster.DeviceCapacity) *nodeBuilder {
	for i := first; i < len(b.n.GPUs); i++ {
		g := &b.n.GPUs[i]
		g.Sharing = cluster.Fractional
		g.DRA.Shared, g.DRA.Capacity = true, caps
	}
	return b
}

// withCapacity is the request asking the capacities.
func withCapacity(r cluster.ClaimRequest, kv ...any) cluster.ClaimRequest {
	r.Capacity = map[string]cluster.Quantity{}
	for i := 0; i+1 < len(kv); i += 2 {
		r.Capacity[kv[i].(string)] = kv[i+1].(cluster.Quantity)
	}
	return r
}

// TestCapacityTake works the allocator's rules (structured/internal/
// incubating, CmpRequestOverCapacity, v0.37.2) case by case on one
// capacity of 80Gi.
func TestCapacityTake(t *testing.T) {
	memory := func(p *cluster.CapacityPolicy) []cluster.DeviceCapacity {
		return []cluster.DeviceCapacity{{Name: "memory", Value: 80 * gi, Policy: p}}
	}
	step := &cluster.CapacityPolicy{Default: qp(10 * gi), Min: qp(10 * gi), Max: qp(40 * gi), Step: qp(10 * gi)}
	values := &cluster.CapacityPolicy{ValidValues: []cluster.Quantity{20 * gi, 40 * gi}}
	cases := map[string]struct {
		caps []cluster.DeviceCapacity
		used cluster.Quantity
		req  map[string]cluster.Quantity
		take cluster.Quantity // when it fits
		// refusal is part of the shortfall's refusal; free its Free, for
		// a shortfall.
		short   bool
		refusal string
		free    cluster.Quantity
	}{
		"no policy: as asked":             {caps: memory(nil), req: map[string]cluster.Quantity{"memory": 10 * gi}, take: 10 * gi},
		"no policy, omitted: all of it":   {caps: memory(nil), take: 80 * gi},
		"no policy, omitted, some used":   {caps: memory(nil), used: 1, short: true, free: 80*gi - 1},
		"default when omitted":            {caps: memory(step), take: 10 * gi},
		"below min: min":                  {caps: memory(step), req: map[string]cluster.Quantity{"memory": 1}, take: 10 * gi},
		"rounded up to the next step":     {caps: memory(step), req: map[string]cluster.Quantity{"memory": 25 * gi}, take: 30 * gi},
		"on a step: as asked":             {caps: memory(step), req: map[string]cluster.Quantity{"memory": 40 * gi}, take: 40 * gi},
		"above max":                       {caps: memory(step), req: map[string]cluster.Quantity{"memory": 45 * gi}, short: true, refusal: "allows at most 40Gi"},
		"rounded past what is free":       {caps: memory(step), used: 55 * gi, req: map[string]cluster.Quantity{"memory": 21 * gi}, short: true, free: 25 * gi},
		"up to the next valid value":      {caps: memory(values), req: map[string]cluster.Quantity{"memory": 30 * gi}, take: 40 * gi},
		"above every valid value":         {caps: memory(values), req: map[string]cluster.Quantity{"memory": 50 * gi}, short: true, refusal: "allows only 20Gi, 40Gi"},
		"omitted, whole value not valid":  {caps: memory(values), short: true, refusal: "allows only 20Gi, 40Gi"},
		"a capacity the device lacks":     {caps: memory(nil), req: map[string]cluster.Quantity{"cores": 4}, short: true, refusal: "the device has no capacity cores"},
		"no capacity asked, none offered": {caps: nil, take: -1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var used []cluster.Quantity
			if tc.used > 0 {
				used = []cluster.Quantity{tc.used}
			}
			take, short, ok := capacityTake(tc.caps, used, nil, tc.req, nil, true)
			if tc.short {
				if ok {
					t.Fatalf("takes %v, want a shortfall", take)
				}
				if !strings.Contains(short.Refusal, tc.refusal) || (tc.refusal == "" && short.Refusal != "") || short.Free != tc.free && tc.refusal == "" {
					t.Errorf("shortfall %+v, want refusal %q, free %s", short, tc.refusal, tc.free)
				}
				return
			}
			if !ok {
				t.Fatalf("shortfall %+v (%s), want it to fit", short, short.String())
			}
			if tc.take < 0 {
				if len(take) != 0 {
					t.Errorf("takes %v, want nothing", take)
				}
				return
			}
			if diff := cmp.Diff([]cluster.Quantity{tc.take}, take); diff != "" {
				t.Errorf("take (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLargestAllowed(t *testing.T) {
	cases := map[string]struct {
		policy *cluster.CapacityPolicy
		limit  cluster.Quantity
		want   cluster.Quantity
		ok     bool
	}{
		"no policy":       {limit: 25 * gi, want: 25 * gi, ok: true},
		"down to a step":  {policy: &cluster.CapacityPolicy{Min: qp(10 * gi), Step: qp(10 * gi)}, limit: 25 * gi, want: 20 * gi, ok: true},
		"capped by max":   {policy: &cluster.CapacityPolicy{Min: qp(10 * gi), Max: qp(15 * gi)}, limit: 25 * gi, want: 15 * gi, ok: true},
		"below min":       {policy: &cluster.CapacityPolicy{Min: qp(10 * gi)}, limit: 5 * gi, ok: false},
		"a valid value":   {policy: &cluster.CapacityPolicy{ValidValues: []cluster.Quantity{20 * gi, 40 * gi}}, limit: 39 * gi, want: 20 * gi, ok: true},
		"no valid value":  {policy: &cluster.CapacityPolicy{ValidValues: []cluster.Quantity{20 * gi}}, limit: 19 * gi, ok: false},
		"nothing is free": {limit: 0, ok: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := LargestAllowed(&cluster.DeviceCapacity{Name: "memory", Value: 80 * gi, Policy: tc.policy}, tc.limit)
			if got != tc.want || ok != tc.ok {
				t.Errorf("LargestAllowed = %s, %v; want %s, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestFitClaimsCapacity: claims share a device by its memory capacity
// (rounded up by the request policy, summed over the allocations); one
// that does not fit what is left is refused with the capacity named, and
// one the policy does not allow is unresolvable.
func TestFitClaimsCapacity(t *testing.T) {
	policy := &cluster.CapacityPolicy{Default: qp(10 * gi), Min: qp(10 * gi), Max: qp(80 * gi), Step: qp(10 * gi)}
	n := makeNode("n").gpus("H100-80GB", 2, cluster.Exclusive, 0).dra(0, "gpu").
		sharedCap(0, cluster.DeviceCapacity{Name: "memory", Value: 80 * gi, Policy: policy}).obj()
	ask := func(name string, mem cluster.Quantity, accepts ...string) *cluster.Pod {
		r := exact("gpu", "gpu", 1, accepts...)
		if mem > 0 {
			r = withCapacity(r, "memory", mem)
		}
		return makePod(name).claim(name, r).obj()
	}
	// 45Gi rounds to 50Gi, 25Gi to 30Gi: gpu-0 is full.
	full := place(t, n, ask("a", 45*gi, "gpu-0"), ask("b", 25*gi, "gpu-0"))
	if diff := cmp.Diff([]cluster.Quantity{80 * gi}, full.GPUs[0].Consumed); diff != "" {
		t.Fatalf("gpu-0 consumed (-want +got):\n%s", diff)
	}
	if _, rs := Fit(demand(t, ask("c", 5*gi, "gpu-0", "gpu-1")), full); len(rs) > 0 {
		t.Errorf("gpu-1 is empty, yet: %v", rs)
	}

	cases := map[string]struct {
		pod          *cluster.Pod
		state        *NodeState
		code         Code
		unresolvable bool
		short        CapacityShortfall
	}{
		"too little left": {
			pod: ask("c", 5*gi, "gpu-0"), state: full, code: ClaimCapacityInsufficient,
			short: CapacityShortfall{Device: "gpu.nvidia.com/n/gpu-0", At: cluster.Device{GPU: 0, Slice: -1}, Capacity: "memory", Asked: 5 * gi, Requested: 10 * gi, Free: 0, Total: 80 * gi},
		},
		"omitted: the default": {
			pod: ask("c", 0, "gpu-0"), state: full, code: ClaimCapacityInsufficient,
			short: CapacityShortfall{Device: "gpu.nvidia.com/n/gpu-0", At: cluster.Device{GPU: 0, Slice: -1}, Capacity: "memory", Requested: 10 * gi, Total: 80 * gi},
		},
		"more than the device": {
			pod: ask("c", 90*gi, "gpu-0"), state: NewNodeState(n), code: ClaimCapacityInsufficient, unresolvable: true,
			short: CapacityShortfall{Device: "gpu.nvidia.com/n/gpu-0", At: cluster.Device{GPU: 0, Slice: -1}, Capacity: "memory", Asked: 90 * gi, Requested: 90 * gi, Free: 80 * gi, Total: 80 * gi,
				Refusal: "the request policy allows at most 80Gi"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := demand(t, tc.pod)
			_, rs := Fit(d, tc.state)
			if Fits(d, tc.state) {
				t.Errorf("Fits, but Fit gives %v", rs)
			}
			if len(rs) != 1 || rs[0].Code != tc.code || rs[0].Unresolvable != tc.unresolvable || rs[0].Message() != "cannot allocate all claims" {
				t.Fatalf("reasons %+v, want one %s (unresolvable %v) in the scheduler's words", rs, tc.code, tc.unresolvable)
			}
			if diff := cmp.Diff([]CapacityShortfall{tc.short}, rs[0].Claim.Capacity); diff != "" {
				t.Errorf("capacity shortfall (-want +got):\n%s", diff)
			}
			if rs[0].Resource != "memory" || !strings.Contains(rs[0].Detail, "capacity memory") {
				t.Errorf("reason %+v does not name the capacity", rs[0])
			}
		})
	}

	// Two requests of one pod on one shared device add up.
	two := makePod("p").claim("p", withCapacity(exact("a", "gpu", 1, "gpu-0"), "memory", 40*gi), withCapacity(exact("b", "gpu", 1, "gpu-0"), "memory", 50*gi)).obj()
	if _, rs := Fit(demand(t, two), NewNodeState(n)); len(rs) != 1 || rs[0].Code != ClaimCapacityInsufficient || rs[0].Claim.Request != "b" || rs[0].Claim.Capacity[0].Free != 40*gi {
		t.Errorf("40Gi then 50Gi of one 80Gi device: %+v, want request b refused with 40Gi free", rs)
	}
}

// TestStatesCountConsumedCapacity: the capacity that allocated claims
// consume is counted once per claim, for pods not bound yet too, and an
// amount that cannot be read is a warning.
func TestStatesCountConsumedCapacity(t *testing.T) {
	n := makeNode("n").gpus("H100-80GB", 1, cluster.Exclusive, 0).dra(0, "gpu").
		sharedCap(0, cluster.DeviceCapacity{Name: "memory", Value: 80 * gi}).obj()
	holds := func(pod, claim, node, memory string) *cluster.Pod {
		p := makePod(pod).obj()
		p.NodeName = node
		p.GPU = cluster.Request{Kind: cluster.GPUMemory, Memory: 1024}
		if node != "" {
			p.Devices = []cluster.Device{{GPU: 0, Slice: -1}}
		}
		p.Claims = []cluster.Claim{{Name: claim, PodClaim: "gpu", Allocated: []cluster.ClaimDevice{{Request: "gpu", Driver: "gpu.nvidia.com", Pool: "n", Device: "gpu-0", ShareID: claim,
			ConsumedCapacity: map[string]string{"memory": memory}}}}}
		return p
	}
	pods := []*cluster.Pod{
		holds("a", "shared", "n", "20Gi"), holds("b", "shared", "n", "20Gi"), // one claim, two pods
		holds("reserved", "r", "", "30Gi"), // allocated, not bound yet
		holds("odd", "odd", "n", "lots"),
	}
	s, err := cluster.NewSnapshot(gpu.Default(), []*cluster.Node{n}, pods)
	if err != nil {
		t.Fatal(err)
	}
	states, warnings, err := States(s)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]cluster.Quantity{50 * gi}, states[0].GPUs[0].Consumed); diff != "" {
		t.Errorf("consumed (-want +got):\n%s", diff)
	}
	found := false
	for _, w := range warnings {
		found = found || strings.Contains(w, `claim ml/odd: consumed capacity memory of device gpu.nvidia.com/n/gpu-0: "lots" is not a quantity`)
	}
	if !found {
		t.Errorf("no warning about the unreadable amount: %q", warnings)
	}
	// A key tells states with different consumption apart.
	other := states[0].Clone()
	other.GPUs[0].Consumed = addQuantities(other.GPUs[0].Consumed, []cluster.Quantity{gi})
	if string(states[0].AppendKey(nil)) == string(other.AppendKey(nil)) {
		t.Error("states that differ in consumed capacity have the same key")
	}
}

// BenchmarkFitsClaimsCapacity is Fits on a pod whose claim asks 30Gi of
// memory of 8 shared DRA GPUs, each half taken, with a request policy.
func BenchmarkFitsClaimsCapacity(b *testing.B) {
	policy := &cluster.CapacityPolicy{Default: qp(10 * gi), Min: qp(10 * gi), Step: qp(10 * gi)}
	n := makeNode("n").gpus("H100-80GB", 8, cluster.Exclusive, 0).dra(0, "gpu").
		sharedCap(0, cluster.DeviceCapacity{Name: "memory", Value: 80 * gi, Policy: policy}).obj()
	s := NewNodeState(n)
	for i := range s.GPUs {
		s.GPUs[i].Consumed = []cluster.Quantity{60 * gi}
	}
	s.GPUs[7].Consumed = []cluster.Quantity{40 * gi}
	d := demand(b, makePod("p").claim("c", withCapacity(exact("gpu", "gpu", 1, "gpu-0", "gpu-3", "gpu-7"), "memory", 25*gi)).obj())
	if !Fits(d, s) {
		b.Fatal("the pod does not fit gpu-7")
	}
	b.ReportAllocs()
	for b.Loop() {
		Fits(d, s)
	}
}
