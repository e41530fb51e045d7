package kube_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/placement"
)

// draH100Partitionable is an H100 that NVIDIA's driver publishes with
// dynamic MIG: a counter set, the whole GPU and every profile's placements.
func draH100Partitionable(minor int) testcluster.DRAGPU {
	g := draH100(minor)
	m, _ := gpu.Default().Lookup(g.Product)
	g.Partitions = m.MIG
	return g
}

// profileClaim is a pending claim for one MIG device of the profile.
func profileClaim(name, profile string) *resourcev1.ResourceClaim {
	c := draClaim(name, testcluster.DeviceClassMIG, 1, "")
	c.Spec.Devices.Requests[0].Exactly.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
		Expression: `device.attributes["gpu.nvidia.com"].profile == "` + profile + `"`}}}
	return c
}

// TestBuildDRAPartitionable: NVIDIA's dynamic MIG (a counter-set slice and
// a device slice per GPU) is read as partitionable GPUs with their counter
// set, whole device and partitions; claims holding partitions make their
// pods hold them, so placement counts the counters they consume; a claim
// whose devices the counters exclude gets ClaimCounterExhausted naming
// the counter, and the diagnosis names it with the nearest changes; a
// profile that still fits is placed; the snapshot file keeps it all.
func TestBuildDRAPartitionable(t *testing.T) {
	h0, h1 := draH100Partitionable(0), draH100Partitionable(1)
	geo := h0.Partitions
	p1, _ := geo.Profile("1g.10gb")
	p3, _ := geo.Profile("3g.40gb")
	p4, _ := geo.Profile("4g.40gb")
	big := draClaim("big", testcluster.DeviceClassMIG, 1, "dra-1", h0.PartitionName(p4, 0))
	tiny := draClaim("tiny", testcluster.DeviceClassMIG, 1, "dra-1", h0.PartitionName(p1, 4))
	whole := draClaim("whole", testcluster.DeviceClassGPU, 1, "dra-1", h1.DeviceName())
	medium, wide := profileClaim("medium", "3g.40gb"), draClaim("wide", testcluster.DeviceClassGPU, 1, "")
	pods := []*corev1.Pod{draPod("big", "dra-1", *big), draPod("tiny", "dra-1", *tiny), draPod("whole", "dra-1", *whole), draPod("medium", "", *medium), draPod("wide", "", *wide)}
	objs := &kube.DRAObjects{Classes: testcluster.NVIDIADeviceClasses(), Slices: testcluster.NVIDIASlices("dra-1", h0, h1),
		Claims: []*resourcev1.ResourceClaim{big, tiny, whole, medium, wide}}
	st, err := kube.BuildDRA(gpu.Default(), []*corev1.Node{draNode("dra-1")}, pods, nil, objs)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(st.Warnings, func(w string) bool { return strings.Contains(w, "counter") || strings.Contains(w, "Partitionable") }) {
		t.Errorf("warnings about counters, which are modelled: %q", st.Warnings)
	}
	n := st.Snapshot.Nodes[0]
	if len(n.GPUs) != 2 {
		t.Fatalf("dra-1 has %d GPUs, want 2; warnings: %q", len(n.GPUs), st.Warnings)
	}
	g := n.GPUs[0]
	if g.DRA.Device != "gpu-0" || len(g.DRA.Partitions) != 18 || len(g.DRA.CounterSets) != 1 || g.DRA.CounterSets[0].Name != h0.CounterSetName() ||
		g.DRA.CounterSets[0].Counters["memory-slice-7"] != 1 || !slices.Equal(g.DRA.Classes, []string{testcluster.DeviceClassGPU}) ||
		!slices.Equal(g.DRA.Partitions[0].Classes, []string{testcluster.DeviceClassMIG}) {
		t.Errorf("GPU 0 = %+v; want gpu-0 of class %s with counter set %s and 18 partitions of class %s", g.DRA, testcluster.DeviceClassGPU, h0.CounterSetName(), testcluster.DeviceClassMIG)
	}

	byName := map[string]*cluster.Pod{}
	for _, p := range st.Snapshot.Pods {
		byName[p.Name] = p
	}
	partition := func(p *cluster.Pod) string {
		if len(p.Devices) != 1 || p.Devices[0].Slice < 0 {
			return ""
		}
		return n.GPUs[p.Devices[0].GPU].DRA.Partitions[p.Devices[0].Slice].Device
	}
	if p := byName["big"]; p.GPU != (cluster.Request{Kind: cluster.MIGSlice, Profile: "4g.40gb"}) || partition(p) != h0.PartitionName(p4, 0) {
		t.Errorf("big: GPU %v, devices %+v; want partition %s", p.GPU, p.Devices, h0.PartitionName(p4, 0))
	}
	states, misfits, err := placement.States(st.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	if len(misfits) > 0 {
		t.Errorf("bound pods do not fit where their claims put them: %q", misfits)
	}
	s := states[0]
	if used := s.GPUs[0].UsedSlices; used != 1<<byName["big"].Devices[0].Slice|1<<byName["tiny"].Devices[0].Slice || s.GPUs[0].FreeMilli != 286 || s.GPUs[1].FreeMilli != 0 {
		t.Errorf("states = %+v; want GPU 0 with the two partitions held and 2/7 of its compute left, GPU 1 held whole", s.GPUs)
	}

	memory := g.DRA.CounterSets[0].Counters["memory"]
	left := memory - int64(p4.Memory)<<20 - int64(p1.Memory)<<20
	cases := map[string]struct {
		pod  string
		want placement.CounterShortfall
	}{
		// Both 3g.40gb placements of GPU 0 lack memory and multiprocessors
		// (and a memory slice each); on GPU 1 the whole GPU holds every
		// counter. Memory names first.
		"a partition": {pod: "medium", want: placement.CounterShortfall{GPU: 0, Set: h0.CounterSetName(), Counter: "memory", Needed: int64(p3.Memory) << 20, Left: left, Blocked: 2}},
		// The whole GPU 0 consumes every counter, which its partitions hold.
		"the whole GPU": {pod: "wide", want: placement.CounterShortfall{GPU: 0, Set: h0.CounterSetName(), Counter: "memory", Needed: memory, Left: left, Blocked: 1}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d, err := placement.NewDemand(byName[tc.pod], gpu.Default())
			if err != nil {
				t.Fatal(err)
			}
			_, rs := placement.Fit(d, s)
			if len(rs) != 1 || rs[0].Code != placement.ClaimCounterExhausted || rs[0].Claim.Counter == nil {
				t.Fatalf("reasons %v, want one %s", rs, placement.ClaimCounterExhausted)
			}
			if diff := cmp.Diff(tc.want, *rs[0].Claim.Counter); diff != "" {
				t.Errorf("counter (-want +got):\n%s", diff)
			}
		})
	}

	// Without the 1g.10gb, GPU 0 makes the 3g.40gb in memory slices 4-7.
	freed := placement.NewNodeState(n)
	for _, name := range []string{"big", "whole"} {
		d, err := placement.NewDemand(byName[name], gpu.Default())
		if err != nil {
			t.Fatal(err)
		}
		a, ok := placement.AssignmentAt(d, freed, byName[name].Devices)
		if !ok {
			t.Fatalf("%s does not take its devices %+v", name, byName[name].Devices)
		}
		freed.Assign(d, a)
	}
	d, err := placement.NewDemand(byName["medium"], gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	a, rs := placement.Fit(d, freed)
	if len(rs) > 0 || len(a.Devices) != 1 || g.DRA.Partitions[a.Devices[0].Slice].Device != h0.PartitionName(p3, 4) {
		t.Errorf("medium on GPU 0 without the 1g.10gb: %+v, reasons %v; want partition %s", a, rs, h0.PartitionName(p3, 4))
	}

	// The diagnosis names the claim, the request and the counter, reclaims
	// the fewest holders of GPU 0 and offers the largest profile it can
	// still make.
	rep, err := diagnose.Diagnose(st.Snapshot, nil)
	if err != nil {
		t.Fatal(err)
	}
	var f diagnose.Finding
	for _, x := range rep.Findings {
		if x.Pod == "ml/medium" {
			f = x
		}
	}
	want := []string{
		"claim medium, request gpu: on dra-1 GPU 0 the shared counter memory of counter set gpu-0-counter-set has " + strconv.FormatInt(left, 10) + " (" + gpu.MiB(left>>20).String() + ") left where a device of class mig.nvidia.com needs " + strconv.FormatInt(int64(p3.Memory)<<20, 10) + " (" + p3.Memory.String() + ")" +
			" (partitionable devices: the partitions and the whole GPU consume the same counters); held by ml/big, ml/tiny: reclaim 1 of them (least active first) and the claim can be allocated there",
		"or ask for the smaller profile 1g.20gb in place of 3g.40gb: dra-1 can make one now",
	}
	if f.Cause != diagnose.Allocation || !strings.HasPrefix(f.Summary, "0/1 nodes are available: 1 cannot allocate all claims.") {
		t.Errorf("medium: cause %s, summary %q; want %s and the DRA filter's line", f.Cause, f.Summary, diagnose.Allocation)
	}
	if diff := cmp.Diff(want, f.Fix); diff != "" {
		t.Errorf("medium's fixes (-want +got):\n%s", diff)
	}
	if r := f.Remedies[len(f.Remedies)-1]; r.Kind != diagnose.ClaimSpec || r.Patch == nil || !strings.Contains(string(r.Patch.Body), `profile == '1g.20gb'`) {
		t.Errorf("the last remedy %+v does not rewrite the claim's selector to 1g.20gb", r)
	}

	out, err := cluster.MarshalFile(st.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	again, err := cluster.ParseFile(out, "written", gpu.Default())
	if err != nil {
		t.Fatalf("re-reading: %v", err)
	}
	if diff := cmp.Diff(g.DRA, again.Nodes[0].GPUs[0].DRA); diff != "" {
		t.Errorf("the snapshot file changes GPU 0 (-read +file):\n%s", diff)
	}
}

// TestDiagnoseCountersTogether: a claim whose requests the counters of a
// node's only GPU cannot hold together, even free (a partition and the
// whole GPU), is a placement finding that names the counter.
func TestDiagnoseCountersTogether(t *testing.T) {
	both := profileClaim("both", "1g.10gb")
	whole := *draClaim("x", testcluster.DeviceClassGPU, 1, "").Spec.Devices.Requests[0].DeepCopy()
	whole.Name = "whole"
	both.Spec.Devices.Requests = append(both.Spec.Devices.Requests, whole)
	objs := &kube.DRAObjects{Classes: testcluster.NVIDIADeviceClasses(), Slices: testcluster.NVIDIASlices("solo", draH100Partitionable(0)),
		Claims: []*resourcev1.ResourceClaim{both}}
	st, err := kube.BuildDRA(gpu.Default(), []*corev1.Node{draNode("solo")}, []*corev1.Pod{draPod("both", "", *both)}, nil, objs)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := diagnose.Diagnose(st.Snapshot, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 1 {
		t.Fatalf("findings %+v, want one", rep.Findings)
	}
	f := rep.Findings[0]
	want := "claim both, request whole: on solo even free the shared counter memory of counter set gpu-0-counter-set (GPU 0) cannot hold what the pod's requests take together"
	if f.Cause != diagnose.Placement || len(f.Fix) == 0 || !strings.HasPrefix(f.Fix[0], want) {
		t.Errorf("cause %s, fix %q; want placement starting %q", f.Cause, f.Fix, want)
	}
}
