package adviceout

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/usage"
)

func TestChange(t *testing.T) {
	cases := map[string]struct {
		b    usage.Bottleneck
		want string
	}{
		"cpu-bound": {
			b: usage.Bottleneck{IdleRatio: usage.Known(0.78), Evidence: usage.Evidence{CPULimitCores: usage.Known(4), CPUThrottledRatio: usage.Known(0.41), CPUUsedCores: usage.Known(3.9)},
				Change: usage.Change{Kind: usage.RaiseCPULimit, FromCores: usage.Known(4), ToCores: usage.Known(7)}},
			want: "raise the CPU limit from 4 to 7 cores: throttled 41% of CFS periods, using 3.9 of 4 cores while running, while the GPU idles 78% of the time",
		},
		"input-bound over NVLink": {
			b:    usage.Bottleneck{MeanActivity: usage.Known(0.12), Input: "nvlink", Evidence: usage.Evidence{NVLinkRxBytesPerSecond: usage.Known(2.5e10)}, Change: usage.Change{Kind: usage.OverlapTransfers}},
			want: "pin host memory and overlap copies with compute in larger batches: NVLink receive 25.0 GB/s while the GPU stays 12% active",
		},
		"undetermined, series missing": {
			b:    usage.Bottleneck{MeanActivity: usage.Known(0.2), Change: usage.Change{Kind: usage.ExportEvidence, Missing: []string{usage.CFSThrottledPeriods, usage.PCIeRxBytes}}},
			want: "export container_cpu_cfs_throttled_periods_total, DCGM_FI_PROF_PCIE_RX_BYTES: the GPU stays 20% active and nothing measured says why",
		},
		"undetermined, all quiet": {
			b:    usage.Bottleneck{MeanActivity: usage.Known(0.2), Change: usage.Change{Kind: usage.ExportEvidence}},
			want: "look at the application (tokenisation, locks, batch size): the GPU stays 20% active with neither CPU throttling nor input traffic",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Change(&tc.b)); diff != "" {
				t.Errorf("Change (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStartupFixAndField(t *testing.T) {
	f := usage.StartupFix{Workload: "serve/llm", Storage: usage.StorageImage, Kind: usage.WeightsOutOfImage, Starts: 3, SecondsPerStart: usage.Known(240), ImageBytes: usage.Known(14e9), GPUHoursPerMonth: usage.Known(0.8571)}
	want := "serve/llm: move the weights out of its 14.0 GB image into a node-local cache or an image volume: its pull takes 4m0s per start; 3 start(s) in the window, up to 0.86 GPU-hours a month freed"
	if diff := cmp.Diff(want, StartupFix(&f)); diff != "" {
		t.Errorf("StartupFix (-want +got):\n%s", diff)
	}
	field := &usage.FieldComparison{ActiveOfAllocated: usage.Known(0.153), Published: usage.FieldAverage}
	want = "this cluster: 15.3% of allocated GPU time active; the field: about 5% GPU utilisation on average across 23000 clusters (Cast AI, 2026 State of Kubernetes Optimization Report)"
	if diff := cmp.Diff(want, Field(field)); diff != "" {
		t.Errorf("Field (-want +got):\n%s", diff)
	}
}
