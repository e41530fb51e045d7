package gpupack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
)

// Args are the plugin's arguments in the KubeSchedulerConfiguration
// (pluginConfig[].args of the plugin named Name). Unknown fields are errors.
type Args struct {
	// Policy is the placement policy that scores nodes: one of
	// placement.Policies(); default "gpupack".
	Policy string `json:"policy,omitempty"`
	// WorkloadPods is how many of the most recent GPU pods form the workload
	// that fragmentation is measured against (fgd and gpupack); default 5000.
	WorkloadPods int `json:"workloadPods,omitempty"`
	// Catalogue is the path of a GPU catalogue file (the format of
	// gpupack's gpu/catalogue.yaml, e.g. mounted from a ConfigMap) whose
	// models extend or override the built-in ones; "" for the built-in
	// catalogue alone. GPUs of products neither lists still count, by the
	// labels of their nodes (internal/source/kube).
	Catalogue string `json:"catalogue,omitempty"`
}

// defaultWorkloadPods bounds the memory of the workload window while keeping
// enough pods for a stable distribution.
const defaultWorkloadPods = 5000

// decodeArgs reads and validates the plugin's arguments, naming the field at
// fault.
func decodeArgs(obj runtime.Object) (Args, error) {
	args := Args{Policy: placement.DefaultPolicy, WorkloadPods: defaultWorkloadPods}
	if obj != nil {
		raw, ok := obj.(*runtime.Unknown)
		if !ok {
			return Args{}, fmt.Errorf("%s args: want runtime.Unknown, got %T", Name, obj)
		}
		if len(raw.Raw) > 0 {
			dec := json.NewDecoder(bytes.NewReader(raw.Raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&args); err != nil {
				return Args{}, fmt.Errorf("%s args: %w (fields: policy, workloadPods, catalogue)", Name, err)
			}
		}
	}
	if !slices.Contains(placement.Policies(), args.Policy) {
		return Args{}, fmt.Errorf("%s args: policy: unknown policy %q (want one of %s)", Name, args.Policy, strings.Join(placement.Policies(), ", "))
	}
	if args.WorkloadPods < 1 {
		return Args{}, fmt.Errorf("%s args: workloadPods: %d (want at least 1)", Name, args.WorkloadPods)
	}
	return args, nil
}

// loadCatalogue returns the built-in catalogue, extended by the file the
// args name.
func loadCatalogue(args Args) (*gpu.Catalogue, error) {
	if args.Catalogue == "" {
		return gpu.Default(), nil
	}
	data, err := os.ReadFile(args.Catalogue)
	if err != nil {
		return nil, fmt.Errorf("%s args: catalogue: %w", Name, err)
	}
	c, err := gpu.Default().Extend(data, args.Catalogue)
	if err != nil {
		return nil, fmt.Errorf("%s args: catalogue: %w", Name, err)
	}
	return c, nil
}
