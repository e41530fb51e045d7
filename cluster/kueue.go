package cluster

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Kueue is what Kueue's objects (kueue.x-k8s.io/v1beta2) say about the
// admission of the snapshot's Workloads: the Workloads, LocalQueues,
// ClusterQueues and ResourceFlavors, as far as gpupack reads them. A
// snapshot without Kueue (not installed, or not read) has none (nil).
//
// Amounts are in Kueue's own integer units (sigs.k8s.io/kueue
// pkg/resources.ResourceValue): milli-CPU for cpu, the snapshot's CPU
// unit, and for every other resource its base unit: bytes of memory,
// whole GPUs, MIG slices or pods.
type Kueue struct {
	Workloads     []KueueWorkload     `json:"workloads,omitempty"`
	LocalQueues   []KueueLocalQueue   `json:"localQueues,omitempty"`
	ClusterQueues []KueueClusterQueue `json:"clusterQueues,omitempty"`
	// Flavors are the ResourceFlavors' names.
	Flavors []string `json:"flavors,omitempty"`
}

// KueueWorkload is one Workload: the unit Kueue admits, whose pods its
// admission gate holds until it reserves quota for it.
type KueueWorkload struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Queue is spec.queueName, a LocalQueue of the Workload's namespace.
	Queue string `json:"queue"`
	// Pods are the pods of the Workload's namespace that own it (its
	// metadata.ownerReferences of kind Pod): Kueue's pod integration
	// makes every gated pod of a Workload one of its owners.
	Pods []string `json:"pods,omitempty"`
	// Requests are what all of the Workload's pods ask for together, per
	// resource: status.resourceRequests where Kueue stated them, else
	// summed from spec.podSets (each pod set's count times its pod's
	// requests).
	Requests map[string]int64 `json:"requests"`
	// ClusterQueue is status.admission.clusterQueue: set once Kueue has
	// reserved quota for the Workload.
	ClusterQueue string `json:"clusterQueue,omitempty"`
	// Inactive: spec.active is false, so Kueue does not consider it.
	Inactive bool `json:"inactive,omitempty"`
	// Pending is the message of the QuotaReserved condition while it is
	// false: Kueue's own words on why it has not reserved quota.
	Pending string `json:"pending,omitempty"`
}

// Key is "namespace/name".
func (w *KueueWorkload) Key() string { return w.Namespace + "/" + w.Name }

// KueueLocalQueue is a LocalQueue: the namespace's name for a
// ClusterQueue.
type KueueLocalQueue struct {
	Namespace    string `json:"namespace"`
	Name         string `json:"name"`
	ClusterQueue string `json:"clusterQueue"`
	// StopPolicy is spec.stopPolicy: Hold or HoldAndDrain stop the queue
	// admitting; empty or None do not.
	StopPolicy string `json:"stopPolicy,omitempty"`
}

// KueueClusterQueue is a ClusterQueue: the quota of each flavor and
// resource it covers, and what its admitted Workloads hold of it.
type KueueClusterQueue struct {
	Name string `json:"name"`
	// Cohort is spec.cohortName: the ClusterQueues that lend one another
	// unused quota.
	Cohort     string `json:"cohort,omitempty"`
	StopPolicy string `json:"stopPolicy,omitempty"`
	// Active is the status' Active condition; nil when it states none.
	Active *KueueCondition `json:"active,omitempty"`
	// Quotas are spec.resourceGroups flattened, in the order Kueue tries
	// them: group by group, flavor by flavor.
	Quotas []KueueQuota `json:"quotas,omitempty"`
}

// KueueCondition is a status condition: whether it holds, and why.
type KueueCondition struct {
	Status  bool   `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// KueueQuota is one flavor's quota of one resource in a ClusterQueue, and
// its reservation.
type KueueQuota struct {
	// Group is the index of the resource group in spec.resourceGroups;
	// a Workload's resources of one group take one flavor together.
	Group    int    `json:"group"`
	Flavor   string `json:"flavor"`
	Resource string `json:"resource"`
	Nominal  int64  `json:"nominal"`
	// BorrowingLimit and LendingLimit are nil when unset: no limit.
	BorrowingLimit *int64 `json:"borrowingLimit,omitempty"`
	LendingLimit   *int64 `json:"lendingLimit,omitempty"`
	// Reserved is status.flavorsReservation's total: the quota that
	// Workloads hold (admitted, or reserved while admission checks run).
	// Nil when the status does not state it: unknown, not 0.
	Reserved *int64 `json:"reserved,omitempty"`
}

// Stopped reports whether a stopPolicy stops a queue admitting.
func Stopped(stopPolicy string) bool {
	return stopPolicy != "" && stopPolicy != "None"
}

// Workload returns the Workload whose pods include the pod, or nil.
func (k *Kueue) Workload(p *Pod) *KueueWorkload {
	if k == nil {
		return nil
	}
	for i := range k.Workloads {
		w := &k.Workloads[i]
		if w.Namespace == p.Namespace && slices.Contains(w.Pods, p.Name) {
			return w
		}
	}
	return nil
}

// LocalQueue returns the named LocalQueue, or nil.
func (k *Kueue) LocalQueue(namespace, name string) *KueueLocalQueue {
	if k == nil {
		return nil
	}
	for i := range k.LocalQueues {
		if q := &k.LocalQueues[i]; q.Namespace == namespace && q.Name == name {
			return q
		}
	}
	return nil
}

// ClusterQueue returns the named ClusterQueue, or nil.
func (k *Kueue) ClusterQueue(name string) *KueueClusterQueue {
	if k == nil {
		return nil
	}
	for i := range k.ClusterQueues {
		if q := &k.ClusterQueues[i]; q.Name == name {
			return q
		}
	}
	return nil
}

// KueueQueueLabel is the label that names a pod's LocalQueue for Kueue's
// pod integration (sigs.k8s.io/kueue pkg/controller/constants.QueueLabel).
const KueueQueueLabel = "kueue.x-k8s.io/queue-name"

// memoryLike reports whether Kueue counts the resource in bytes (memory,
// ephemeral storage, huge pages).
func memoryLike(resource string) bool {
	return resource == "memory" || resource == "ephemeral-storage" || strings.HasPrefix(resource, "hugepages-")
}

// FormatKueueAmount writes an amount of the resource in Kueue's units as
// the shortest exact Kubernetes quantity: "500m" or "4" CPUs, "64Gi" of
// memory, "3" GPUs.
func FormatKueueAmount(resource string, v int64) string {
	switch {
	case resource == "cpu":
		if v%1000 == 0 {
			return strconv.FormatInt(v/1000, 10)
		}
		return strconv.FormatInt(v, 10) + "m"
	case memoryLike(resource) && v != 0:
		for _, u := range []struct {
			suffix string
			size   int64
		}{{"Pi", 1 << 50}, {"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
			if v%u.size == 0 {
				return strconv.FormatInt(v/u.size, 10) + u.suffix
			}
		}
	}
	return strconv.FormatInt(v, 10)
}

// MaxKueueAmount bounds every amount gpupack keeps: far above any real
// quota (2^62 bytes is 4 EiB), low enough that a sum of two never
// overflows.
const MaxKueueAmount int64 = math.MaxInt64 / 2

// check validates the Kueue section of a snapshot file: names given,
// amounts not negative and not absurd.
func (k *Kueue) check() error {
	amounts := func(where string, m map[string]int64) error {
		for r, v := range m {
			if r == "" {
				return fmt.Errorf("%s: empty resource name", where)
			}
			if err := checkKueueAmount(v); err != nil {
				return fmt.Errorf("%s[%s]: %w", where, r, err)
			}
		}
		return nil
	}
	for i, w := range k.Workloads {
		if w.Namespace == "" || w.Name == "" {
			return fmt.Errorf("kueue.workloads[%d]: give the Workload's namespace and name", i)
		}
		if err := amounts(fmt.Sprintf("kueue.workloads[%d] (%s).requests", i, w.Key()), w.Requests); err != nil {
			return err
		}
	}
	for i, q := range k.LocalQueues {
		if q.Namespace == "" || q.Name == "" {
			return fmt.Errorf("kueue.localQueues[%d]: give the LocalQueue's namespace and name", i)
		}
	}
	for i, q := range k.ClusterQueues {
		if q.Name == "" {
			return fmt.Errorf("kueue.clusterQueues[%d]: give the ClusterQueue's name", i)
		}
		for j, x := range q.Quotas {
			where := fmt.Sprintf("kueue.clusterQueues[%d] (%s).quotas[%d]", i, q.Name, j)
			if x.Flavor == "" || x.Resource == "" {
				return fmt.Errorf("%s: give the flavor and the resource", where)
			}
			if x.Group < 0 {
				return fmt.Errorf("%s.group: %d is negative", where, x.Group)
			}
			for _, v := range []*int64{&x.Nominal, x.BorrowingLimit, x.LendingLimit, x.Reserved} {
				if v == nil {
					continue
				}
				if err := checkKueueAmount(*v); err != nil {
					return fmt.Errorf("%s: %w", where, err)
				}
			}
		}
	}
	return nil
}

func checkKueueAmount(v int64) error {
	switch {
	case v < 0:
		return fmt.Errorf("amount %d is negative", v)
	case v > MaxKueueAmount:
		return fmt.Errorf("amount %d is absurdly large (limit %d)", v, MaxKueueAmount)
	}
	return nil
}
