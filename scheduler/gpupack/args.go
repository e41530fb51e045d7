package gpupack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

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
				return Args{}, fmt.Errorf("%s args: %w (fields: policy, workloadPods)", Name, err)
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
