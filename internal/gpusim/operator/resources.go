package operator

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpupack/gpupack/api/gpuoperator"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/plan"
)

// Devices is what a node's GPUs hold: the GPUs with MIG disabled, and the
// MIG devices of the GPUs with MIG enabled, by profile.
type Devices struct {
	Whole int64
	MIG   map[string]int64
}

// MIGDevices returns the devices that a mig-parted configuration's groups
// give a node of gpus GPUs of model (nil: a model the catalogue does not
// list). mig-parted applies each group to the GPUs it selects and fails
// when a GPU cannot hold its group's devices (pkg/mig/reconfigure and
// cmd/nvidia-mig-parted/apply of NVIDIA/mig-parted); the stand-in fails
// likewise when MIG is enabled on a model without MIG, or when a group's
// devices do not fit one GPU of the model. It is stricter than mig-parted
// in one way: every GPU must be selected by exactly one group, where
// mig-parted leaves a GPU that no group selects as it is, so that a plan
// which forgets a GPU fails in tests.
func MIGDevices(model *gpu.Model, gpus int, groups []gpuoperator.MIGDeviceConfig) (Devices, error) {
	d := Devices{MIG: map[string]int64{}}
	selectedBy := make([]int, gpus)
	for i := range selectedBy {
		selectedBy[i] = -1
	}
	for gi, g := range groups {
		indices, err := g.GPUs(gpus)
		if err != nil {
			return Devices{}, fmt.Errorf("group %d: %w", gi, err)
		}
		for _, j := range indices {
			if selectedBy[j] >= 0 {
				return Devices{}, fmt.Errorf("GPU %d is selected by groups %d and %d; select each GPU once", j, selectedBy[j], gi)
			}
			selectedBy[j] = gi
		}
		if !g.MIGEnabled {
			d.Whole += int64(len(indices))
			continue
		}
		if err := fitsOneGPU(model, g.MIGDevices); err != nil {
			return Devices{}, fmt.Errorf("group %d: %w", gi, err)
		}
		for profile, n := range g.MIGDevices {
			if n > 0 {
				d.MIG[profile] += int64(n * len(indices))
			}
		}
	}
	if j := slices.Index(selectedBy, -1); j >= 0 {
		return Devices{}, fmt.Errorf("GPU %d of %d is selected by no group; the stand-in wants every GPU named", j, gpus)
	}
	return d, nil
}

// fitsOneGPU says why the MIG devices cannot be laid out on one GPU of
// model, or nil.
func fitsOneGPU(model *gpu.Model, devices map[string]int) error {
	switch {
	case model == nil:
		return fmt.Errorf("MIG is enabled on a GPU model the catalogue does not list")
	case model.MIG == nil:
		return fmt.Errorf("MIG is enabled on %s, which has no MIG", model.Name)
	}
	var profiles []string
	for _, p := range slices.Sorted(maps.Keys(devices)) {
		for range devices[p] {
			profiles = append(profiles, p)
		}
	}
	if _, err := model.MIG.Fit(profiles); err != nil {
		return fmt.Errorf("mig-devices %v on one %s: %w", devices, model.Name, err)
	}
	return nil
}

// Sharing is how NVIDIA's device plugin shares each whole GPU: the
// strategy GPU feature discovery writes in nvidia.com/gpu.sharing-strategy,
// the replicas of each GPU, and whether they are advertised as
// nvidia.com/gpu.shared instead of nvidia.com/gpu.
type Sharing struct {
	Strategy string
	Replicas int64
	Renamed  bool
}

// The sharing strategies, as GPU feature discovery names them.
const (
	StrategyNone        = "none"
	StrategyTimeSlicing = "time-slicing"
	StrategyMPS         = "mps"
)

// noSharing is the device plugin's default: each GPU advertised once.
var noSharing = Sharing{Strategy: StrategyNone, Replicas: 1}

// SharingOf returns the sharing of a device plugin configuration, checked
// as the device plugin reads one (api/config/v1/sharing.go and
// replicas.go of NVIDIA/k8s-device-plugin): MPS takes precedence over
// time-slicing, a sharing section names at least one resource, and
// replicas are at least 2. The stand-in shares whole GPUs only: a
// replicated resource other than nvidia.com/gpu, or of devices other than
// "all", is an error.
func SharingOf(c plan.DevicePluginConfig) (Sharing, error) {
	if c.Version != "v1" {
		return Sharing{}, fmt.Errorf("device plugin configuration version %q, want \"v1\"", c.Version)
	}
	if c.Sharing == nil {
		return noSharing, nil
	}
	strategy, r := StrategyTimeSlicing, c.Sharing.TimeSlicing
	if c.Sharing.MPS != nil {
		strategy, r = StrategyMPS, c.Sharing.MPS
	}
	if r == nil {
		return noSharing, nil
	}
	if len(r.Resources) != 1 {
		return Sharing{}, fmt.Errorf("sharing.%s names %d resources; the stand-in replicates exactly one, %s", strategy, len(r.Resources), kube.ResourceGPU)
	}
	res := r.Resources[0]
	switch {
	case corev1.ResourceName(res.Name) != kube.ResourceGPU:
		return Sharing{}, fmt.Errorf("sharing.%s replicates %s; the stand-in replicates only %s", strategy, res.Name, kube.ResourceGPU)
	case res.Devices != "" && res.Devices != "all":
		return Sharing{}, fmt.Errorf("sharing.%s devices %q; the device plugin shares \"all\"", strategy, res.Devices)
	case res.Replicas < 2:
		return Sharing{}, fmt.Errorf("sharing.%s replicas %d: the device plugin wants at least 2", strategy, res.Replicas)
	}
	return Sharing{Strategy: strategy, Replicas: int64(res.Replicas), Renamed: r.RenameByDefault}, nil
}

// Resources returns the extended resources the device plugin advertises
// for the devices shared so, under the mixed MIG strategy: each MIG
// profile as nvidia.com/mig-<profile>, and the whole GPUs times their
// replicas as nvidia.com/gpu, or as nvidia.com/gpu.shared when renamed
// (nvidia.com/gpu is then 0, and not advertised when there are none).
func Resources(d Devices, s Sharing) map[corev1.ResourceName]int64 {
	out := map[corev1.ResourceName]int64{kube.ResourceGPU: d.Whole * s.Replicas}
	if s.Renamed {
		out[kube.ResourceGPU] = 0
		out[kube.ResourceGPUShared] = d.Whole * s.Replicas
	}
	for profile, n := range d.MIG {
		out[corev1.ResourceName(kube.ResourceMIGPrefix+profile)] = n
	}
	return out
}

// sharedProductSuffix is what GPU feature discovery appends to the product
// label of a shared GPU that is not renamed (internal/lm/resource.go of
// NVIDIA/k8s-device-plugin).
const sharedProductSuffix = "-SHARED"

// featureLabels returns the labels GPU feature discovery writes for
// sharing s on a node whose product label is product: the replicas, the
// strategy (none below 2 replicas), and the product with -SHARED when the
// replicas are shared under the name nvidia.com/gpu.
func featureLabels(s Sharing, product string) map[string]string {
	strategy := s.Strategy
	if s.Replicas < 2 {
		strategy = StrategyNone
	}
	product = strings.TrimSuffix(product, sharedProductSuffix)
	if s.Replicas > 1 && !s.Renamed {
		product += sharedProductSuffix
	}
	return map[string]string{
		kube.LabelGPUReplicas:        strconv.FormatInt(s.Replicas, 10),
		kube.LabelGPUSharingStrategy: strategy,
		kube.LabelGPUProduct:         product,
	}
}
