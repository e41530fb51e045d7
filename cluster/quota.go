package cluster

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ResourceQuota is a namespace's ResourceQuota as its status states it:
// the hard limit and the usage of each resource it limits that counts GPUs
// (GPUResource), in whole units. A quota on other resources only is not
// kept.
type ResourceQuota struct {
	Namespace string           `json:"namespace"`
	Name      string           `json:"name"`
	Hard      map[string]int64 `json:"hard"`
	Used      map[string]int64 `json:"used,omitempty"`
}

// Key is "namespace/name".
func (q *ResourceQuota) Key() string { return q.Namespace + "/" + q.Name }

// Workload names the object that makes pods: its kind (ReplicaSet, Job,
// StatefulSet), namespace and name.
type Workload struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// QuotaRefusal is a workload whose controller could not create a pod
// because a ResourceQuota on GPUs was exceeded, as the controller's
// FailedCreate warning on the workload says: the quota, and the GPU
// resources the pod would have pushed over it with the amount it asked
// for, the quota's usage and its hard limit then, in whole units.
type QuotaRefusal struct {
	Workload Workload `json:"workload"`
	// Pod is the name the apiserver gave the pod it refused.
	Pod       string           `json:"pod"`
	Quota     string           `json:"quota"`
	Requested map[string]int64 `json:"requested"`
	Used      map[string]int64 `json:"used"`
	Limited   map[string]int64 `json:"limited"`
	// Count is how many times the controller was refused (the event's
	// count, at least 1).
	Count int `json:"count,omitempty"`
}

// Resources lists the GPU resources the refusal names, sorted.
func (r *QuotaRefusal) Resources() []string {
	var out []string
	for k := range r.Limited {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// GPUResource reports whether a quota's resource name counts GPUs: an
// NVIDIA GPU, shared-GPU replica or MIG slice resource, bare or as
// requests.<resource> or limits.<resource>.
func GPUResource(name string) bool {
	for _, prefix := range []string{"requests.", "limits."} {
		if rest, ok := strings.CutPrefix(name, prefix); ok {
			name = rest
			break
		}
	}
	return name == "nvidia.com/gpu" || name == "nvidia.com/gpu.shared" || strings.HasPrefix(name, "nvidia.com/mig-")
}

// The words of the apiserver's quota admission (k8s.io/apiserver,
// pkg/admission/plugin/resourcequota) and of the controllers' event
// (k8s.io/kubernetes, pkg/controller: "Error creating: %v"), as in
// Kubernetes v1.37:
//
//	Error creating: pods "train-df489f54b-m65js" is forbidden: exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=4, limited: requests.nvidia.com/gpu=4
const (
	quotaForbidden = " is forbidden: exceeded quota: "
	quotaRequested = ", requested: "
	quotaUsed      = ", used: "
	quotaLimited   = ", limited: "
)

// ParseQuotaExceeded reads the message of a FailedCreate event that a
// ResourceQuota refused; ok is false for any other message, or one that
// names no GPU resource. The resources that count no GPUs (memory, cpu)
// are left out, and so is a GPU amount that is not a whole number.
// Workload and Count are left for the caller.
func ParseQuotaExceeded(message string) (r QuotaRefusal, ok bool) {
	head, rest, found := strings.Cut(message, quotaForbidden)
	if !found {
		return QuotaRefusal{}, false
	}
	// head: ...pods "name"
	if i := strings.LastIndex(head, `pods "`); i >= 0 && strings.HasSuffix(head, `"`) {
		r.Pod = head[i+len(`pods "`) : len(head)-1]
	}
	var requested, used, limited string
	if r.Quota, rest, found = strings.Cut(rest, quotaRequested); !found || r.Quota == "" {
		return QuotaRefusal{}, false
	}
	if requested, rest, found = strings.Cut(rest, quotaUsed); !found {
		return QuotaRefusal{}, false
	}
	if used, limited, found = strings.Cut(rest, quotaLimited); !found {
		return QuotaRefusal{}, false
	}
	r.Requested, r.Used, r.Limited = gpuAmounts(requested), gpuAmounts(used), gpuAmounts(limited)
	if len(r.Limited) == 0 {
		return QuotaRefusal{}, false
	}
	for k := range r.Limited {
		if _, ok := r.Requested[k]; !ok {
			return QuotaRefusal{}, false
		}
		if _, ok := r.Used[k]; !ok {
			r.Used[k] = 0 // a quota with no usage yet lists none
		}
	}
	return r, true
}

// gpuAmounts reads "name=quantity,name=quantity" (the admission plugin's
// prettyPrint), keeping the GPU resources with whole amounts.
func gpuAmounts(list string) map[string]int64 {
	out := map[string]int64{}
	for _, part := range strings.Split(list, ",") {
		name, value, ok := strings.Cut(part, "=")
		if !ok || !GPUResource(name) {
			continue
		}
		if n, err := ParseCount(value); err == nil {
			out[name] = n
		}
	}
	return out
}

// countSuffixes are the decimal suffixes a whole-number quantity takes in
// its canonical form ("1k" for 1000).
var countSuffixes = []struct {
	suffix string
	mult   int64
}{{"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}}

// ParseCount reads a quantity that counts things (GPUs, pods) as
// Kubernetes writes it: "4", or with a decimal suffix, "2k".
func ParseCount(s string) (int64, error) {
	num, mult := s, int64(1)
	for _, u := range countSuffixes {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = v, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("count %q: want a non-negative whole number, such as \"4\"", s)
	}
	return n * mult, nil
}
