package difftest

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
)

// Regression is one pending pod on which gpupack's scheduler line and the
// real kube-scheduler's message differed, with the objects of its case as
// the control plane held them, so that a test can replay it without one.
type Regression struct {
	Seed  uint64 `json:"seed"`
	Index int    `json:"index"`
	// Pod is the pending pod, "namespace/name".
	Pod string `json:"pod"`
	// Scheduler is the kube-scheduler's FailedScheduling message; Gpupack
	// what gpupack computed when the case was found.
	Scheduler string `json:"scheduler"`
	Gpupack   string `json:"gpupack"`
	// Why says what was wrong, once fixed.
	Why   string         `json:"why,omitempty"`
	Nodes []*corev1.Node `json:"nodes"`
	Pods  []*corev1.Pod  `json:"pods"`
}

// Dump writes the regression as YAML, for a mismatch's log and for
// testdata/regressions.
func (r *Regression) Dump() string {
	data, err := yaml.Marshal(r)
	if err != nil {
		return fmt.Sprintf("difftest: cannot write the regression of %s: %v", r.Pod, err)
	}
	return string(data)
}

// ReadRegression reads a regression file that Dump wrote.
func ReadRegression(data []byte, name string) (*Regression, error) {
	var r Regression
	if err := yaml.UnmarshalStrict(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if r.Pod == "" || r.Scheduler == "" || len(r.Nodes) == 0 {
		return nil, fmt.Errorf("%s: a regression needs pod, scheduler and nodes", name)
	}
	return &r, nil
}

// State is the live loader's view of the case's objects, the pending pods
// given (those the control plane still holds pending) in place of the
// case's own.
func (cs *Case) State(c *gpu.Catalogue, pending []*corev1.Pod) (*kube.State, error) {
	if pending == nil {
		pending = cs.Pending
	}
	pods := append(append([]*corev1.Pod{}, cs.Bound...), pending...)
	return kube.Build(c, cs.Nodes, pods, nil)
}
