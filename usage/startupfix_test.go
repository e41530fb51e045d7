package usage

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// phases makes a group's phase statistics: p50 seconds and GPU-seconds
// held per phase, by name.
func phases(p50, held map[string]float64) []PhaseStats {
	var out []PhaseStats
	for _, name := range Phases {
		ps := PhaseStats{Phase: name}
		if v, ok := p50[name]; ok {
			ps.Seconds.P50 = Known(v)
		}
		if v, ok := held[name]; ok {
			ps.HeldGPUSeconds = Known(v)
		}
		out = append(out, ps)
	}
	return out
}

func TestStartupFixes(t *testing.T) {
	week := 7 * 24 * time.Hour
	hostpath := StartupGroup{Key: StorageHostPath, Storage: StorageHostPath, Load: Percentiles{P50: Known(40)}}
	cases := map[string]struct {
		workload StartupGroup
		paths    []StartupGroup
		want     []StartupFix
	}{
		"weights in a 14 GB image, pulled at each of 3 starts on 2 GPUs": {
			workload: StartupGroup{Key: "serve/llm", Storage: StorageImage, Pods: 3, ImageBytes: Percentiles{P50: Known(14e9)},
				Phases: phases(map[string]float64{PhaseImagePull: 240}, map[string]float64{PhaseImagePull: 3 * 240 * 2})},
			want: []StartupFix{{Workload: "serve/llm", Storage: StorageImage, Kind: WeightsOutOfImage, Starts: 3, SecondsPerStart: Known(240), ImageBytes: Known(14e9),
				GPUHoursPerMonth: Known(round4(1440 * 30 / 7.0 / 3600))}},
		},
		"a small image holds no weights worth moving": {
			workload: StartupGroup{Key: "web/app", Storage: StorageImage, Pods: 3, ImageBytes: Percentiles{P50: Known(3e8)},
				Phases: phases(map[string]float64{PhaseImagePull: 20}, map[string]float64{PhaseImagePull: 60})},
		},
		"a download into an emptyDir at every start": {
			workload: StartupGroup{Key: "ml/finetune", Storage: StorageDownload, Pods: 1,
				Phases: phases(map[string]float64{PhaseInit: 427}, map[string]float64{PhaseInit: 427})},
			want: []StartupFix{{Workload: "ml/finetune", Storage: StorageDownload, Kind: CacheDownload, Starts: 1, SecondsPerStart: Known(427),
				GPUHoursPerMonth: Known(round4(427 * 30 / 7.0 / 3600))}},
		},
		"a CSI mount slower than the node-local cache: the excess share of the load": {
			workload: StartupGroup{Key: "ml/trainer", Storage: "csi/s3.csi.aws.com", Pods: 1, Load: Percentiles{P50: Known(240)},
				Phases: phases(nil, map[string]float64{PhaseToFirstUse: 0, PhaseFirstUseToReady: 240})},
			paths: []StartupGroup{hostpath},
			want: []StartupFix{{Workload: "ml/trainer", Storage: "csi/s3.csi.aws.com", Kind: NodeLocalCache, Starts: 1, SecondsPerStart: Known(200), Baseline: StorageHostPath, BaselineLoadSeconds: Known(40),
				GPUHoursPerMonth: Known(round4(200 * 30 / 7.0 / 3600))}},
		},
		"a PVC with no node-local load to compare with": {
			workload: StartupGroup{Key: "ml/trainer", Storage: "pvc/standard", Pods: 1, Load: Percentiles{P50: Known(240)},
				Phases: phases(nil, map[string]float64{PhaseFirstUseToReady: 240})},
		},
		"a PVC faster than the node-local cache": {
			workload: StartupGroup{Key: "ml/trainer", Storage: "pvc/fast-nvme", Pods: 1, Load: Percentiles{P50: Known(30)},
				Phases: phases(nil, map[string]float64{PhaseFirstUseToReady: 30})},
			paths: []StartupGroup{hostpath},
		},
		"held GPUs unknown: no figure to give": {
			workload: StartupGroup{Key: "ml/finetune", Storage: StorageDownload, Pods: 1, Phases: phases(map[string]float64{PhaseInit: 427}, nil)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := startupFixes([]StartupGroup{tc.workload}, tc.paths, week)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("startupFixes (-want +got):\n%s", diff)
			}
		})
	}
}
