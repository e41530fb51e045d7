package usage

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestJudge(t *testing.T) {
	bursty := Pattern{Name: Bursty, MeanActivity: Known(0.12), IdleRatio: Known(0.78), DRAMActive: Known(0.1)}
	flat := Pattern{Name: FlatLow, MeanActivity: Known(0.2), IdleRatio: Known(0), DRAMActive: Known(0.1)}
	throttled := &Evidence{CPULimitCores: Known(4), CPUThrottledRatio: Known(0.41), CPUUsedCores: Known(3.9)}
	cases := map[string]struct {
		pattern  Pattern
		evidence *Evidence
		want     Bottleneck
		ok       bool
	}{
		"no activity: nothing to judge": {pattern: Pattern{Name: UnknownPattern}},
		"idle-held": {
			pattern: Pattern{Name: IdleHeld, MeanActivity: Known(0.01)},
			want:    Bottleneck{Verdict: IdleHeldVerdict, Pattern: IdleHeld, MeanActivity: Known(0.01), Change: Change{Kind: ReleaseGPU}},
			ok:      true,
		},
		"memory-bound before CPU throttling": {
			pattern:  Pattern{Name: MemoryBound, MeanActivity: Known(0.3), DRAMActive: Known(0.8)},
			evidence: throttled,
			want:     Bottleneck{Verdict: MemoryBoundVerdict, Pattern: MemoryBound, MeanActivity: Known(0.3), DRAMActive: Known(0.8), Evidence: *throttled, Change: Change{Kind: CutMemoryTraffic}},
			ok:       true,
		},
		"gpu-bound": {
			pattern: Pattern{Name: Busy, MeanActivity: Known(0.9)},
			want:    Bottleneck{Verdict: GPUBoundVerdict, Pattern: Busy, MeanActivity: Known(0.9), Change: Change{Kind: KeepGPU}},
			ok:      true,
		},
		"cpu-bound: 4 cores throttled 41% become 7": {
			pattern:  bursty,
			evidence: throttled,
			want: Bottleneck{Verdict: CPUBoundVerdict, Pattern: Bursty, MeanActivity: Known(0.12), IdleRatio: Known(0.78), DRAMActive: Known(0.1), Evidence: *throttled,
				Change: Change{Kind: RaiseCPULimit, FromCores: Known(4), ToCores: Known(7)}},
			ok: true,
		},
		"cpu-bound: a light throttle still raises by a core": {
			pattern:  bursty,
			evidence: &Evidence{CPULimitCores: Known(2), CPUThrottledRatio: Known(0.2)},
			want: Bottleneck{Verdict: CPUBoundVerdict, Pattern: Bursty, MeanActivity: Known(0.12), IdleRatio: Known(0.78), DRAMActive: Known(0.1),
				Evidence: Evidence{CPULimitCores: Known(2), CPUThrottledRatio: Known(0.2)}, Change: Change{Kind: RaiseCPULimit, FromCores: Known(2), ToCores: Known(3)}},
			ok: true,
		},
		"throttled below a fifth: not cpu-bound": {
			pattern:  flat,
			evidence: &Evidence{CPULimitCores: Known(8), CPUThrottledRatio: Known(0.19), NetworkReceiveBytesPerSecond: Known(0), DiskReadBytesPerSecond: Known(0), PCIeRxBytesPerSecond: Known(0), NVLinkRxBytesPerSecond: Known(0)},
			want: Bottleneck{Verdict: Undetermined, Pattern: FlatLow, MeanActivity: Known(0.2), IdleRatio: Known(0), DRAMActive: Known(0.1),
				Evidence: Evidence{CPULimitCores: Known(8), CPUThrottledRatio: Known(0.19), NetworkReceiveBytesPerSecond: Known(0), DiskReadBytesPerSecond: Known(0), PCIeRxBytesPerSecond: Known(0), NVLinkRxBytesPerSecond: Known(0)},
				Change:   Change{Kind: ExportEvidence}},
			ok: true,
		},
		"input-bound: the network read, not the PCIe copy that follows it": {
			pattern:  flat,
			evidence: &Evidence{NetworkReceiveBytesPerSecond: Known(1.8e8), PCIeRxBytesPerSecond: Known(1.9e8)},
			want: Bottleneck{Verdict: InputBoundVerdict, Pattern: FlatLow, MeanActivity: Known(0.2), IdleRatio: Known(0), DRAMActive: Known(0.1),
				Evidence: Evidence{NetworkReceiveBytesPerSecond: Known(1.8e8), PCIeRxBytesPerSecond: Known(1.9e8)}, Input: "network", Change: Change{Kind: StageDataLocally}},
			ok: true,
		},
		"input-bound: disk": {
			pattern:  flat,
			evidence: &Evidence{DiskReadBytesPerSecond: Known(2.5e8), NetworkReceiveBytesPerSecond: Known(2e6)},
			want: Bottleneck{Verdict: InputBoundVerdict, Pattern: FlatLow, MeanActivity: Known(0.2), IdleRatio: Known(0), DRAMActive: Known(0.1),
				Evidence: Evidence{DiskReadBytesPerSecond: Known(2.5e8), NetworkReceiveBytesPerSecond: Known(2e6)}, Input: "disk", Change: Change{Kind: FasterStorage}},
			ok: true,
		},
		"input-bound: PCIe far above any read": {
			pattern:  bursty,
			evidence: &Evidence{PCIeRxBytesPerSecond: Known(3.2e9), DiskReadBytesPerSecond: Known(1e8)},
			want: Bottleneck{Verdict: InputBoundVerdict, Pattern: Bursty, MeanActivity: Known(0.12), IdleRatio: Known(0.78), DRAMActive: Known(0.1),
				Evidence: Evidence{PCIeRxBytesPerSecond: Known(3.2e9), DiskReadBytesPerSecond: Known(1e8)}, Input: "pcie", Change: Change{Kind: OverlapTransfers}},
			ok: true,
		},
		"undetermined without evidence names what to export": {
			pattern: flat,
			want: Bottleneck{Verdict: Undetermined, Pattern: FlatLow, MeanActivity: Known(0.2), IdleRatio: Known(0), DRAMActive: Known(0.1),
				Change: Change{Kind: ExportEvidence, Missing: []string{CFSThrottledPeriods, CPUQuota, FSReadsBytes, NetworkReceiveBytes, PCIeRxBytes, NVLinkRxBytes}}},
			ok: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := Judge(tc.pattern, tc.evidence)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Judge (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJudgeBottlenecksCounts(t *testing.T) {
	r := &Report{Pods: []PodUsage{
		{Namespace: "a", Pod: "idle", Pattern: Pattern{Name: IdleHeld}},
		{Namespace: "a", Pod: "slow", Pattern: Pattern{Name: Bursty}},
		{Namespace: "a", Pod: "dark", Pattern: Pattern{Name: UnknownPattern}},
	}}
	r.JudgeBottlenecks([]Evidence{{Namespace: "a", Pod: "slow", CPULimitCores: Known(4), CPUThrottledRatio: Known(0.5)}})
	want := []VerdictCount{{IdleHeldVerdict, 1}, {CPUBoundVerdict, 1}}
	if diff := cmp.Diff(want, r.Bottlenecks); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	if r.Pods[2].Bottleneck != nil {
		t.Errorf("a pod without activity got a verdict: %+v", r.Pods[2].Bottleneck)
	}
}

func TestCompareWithField(t *testing.T) {
	r := &Report{}
	r.Cluster.AllocatedGPUSeconds = 1000
	r.Cluster.ActivityUnknownGPUSeconds = 200
	r.Cluster.ActiveGPUSeconds = Known(40)
	r.CompareWithField()
	if diff := cmp.Diff(&FieldComparison{ActiveOfAllocated: Known(0.05), Published: FieldAverage}, r.Field); diff != "" {
		t.Errorf("field (-want +got):\n%s", diff)
	}
	r.Cluster.ActiveGPUSeconds = Unknown
	r.CompareWithField()
	if r.Field.ActiveOfAllocated.Known() {
		t.Errorf("unknown activity gave %v", r.Field.ActiveOfAllocated)
	}
}

// TestMissingEvidenceShared checks that missingEvidence names exactly the
// unknown series, in order, and that an append to one pod's list (shared
// by the pods that lack the same series) never changes another's.
func TestMissingEvidenceShared(t *testing.T) {
	some := Evidence{CPUThrottledRatio: Known(0.1), CPULimitCores: Known(2), PCIeRxBytesPerSecond: Known(1e9)}
	got := missingEvidence(&some)
	if want := []string{FSReadsBytes, NetworkReceiveBytes, NVLinkRxBytes}; !slices.Equal(got, want) {
		t.Fatalf("missing %q, want %q", got, want)
	}
	_ = append(got, "appended")
	if again := missingEvidence(&some); len(again) != 3 || again[len(again)-1] != NVLinkRxBytes {
		t.Errorf("after an append to one list, another reads %q", again)
	}
	all := Evidence{CPUThrottledRatio: Known(0.1), CPULimitCores: Known(2), DiskReadBytesPerSecond: Known(1), NetworkReceiveBytesPerSecond: Known(1), PCIeRxBytesPerSecond: Known(1), NVLinkRxBytesPerSecond: Known(1)}
	if got := missingEvidence(&all); got != nil {
		t.Errorf("nothing missing gave %q, want nil", got)
	}
}
