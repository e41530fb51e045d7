package change

import (
	"context"
	"errors"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/plan"
)

// Actuator is what applying a change set reads and writes of the cluster.
// internal/actuator/kube implements it on the Kubernetes API; tests
// implement it in memory. Every write is one that the change records and
// can undo: node labels, annotations and spec.unschedulable, evictions
// through the Eviction API (never a delete), the configs' ConfigMaps (merged:
// entries of other names are kept), DeviceTaintRules and Events.
type Actuator interface {
	// Node reads a node and the unfinished pods bound to it, now.
	Node(ctx context.Context, name string) (NodeNow, error)
	// PatchNode changes a node's spec.unschedulable, labels and
	// annotations (a nil value removes the key).
	PatchNode(ctx context.Context, name string, p NodePatch) error
	// Evict asks the Eviction API to evict the pod with this UID; it
	// returns an error wrapping ErrBudget when a PodDisruptionBudget
	// refuses the eviction now.
	Evict(ctx context.Context, pod cluster.PodKey, uid string) error
	// EnsureConfigs writes the configs that a node's target labels name
	// into the ConfigMaps that mig-manager and the device plugin read,
	// keeping their other entries, and fails when an entry of the same
	// name holds a different config.
	EnsureConfigs(ctx context.Context, set *Set, n Node) error
	// TaintDevices puts the apply taint (NoSchedule) on these DRA devices
	// of the node; UntaintDevices removes every apply taint of the hash
	// from the node's devices.
	TaintDevices(ctx context.Context, hash, node string, devices []cluster.DRADeviceID) error
	UntaintDevices(ctx context.Context, hash, node string) error
	// EnsureTaintRule creates a DeviceTaintRule of the plan, and fails when
	// one of the same name says something else.
	EnsureTaintRule(ctx context.Context, r plan.DeviceTaintRule) error
	// Event records an Event on the node.
	Event(ctx context.Context, node string, warning bool, reason, message string)
	// Snapshot reads the whole cluster, to check that the pending pods a
	// change was for fit.
	Snapshot(ctx context.Context) (*cluster.Snapshot, error)
}

// ErrBudget is the Eviction API's refusal of an eviction that a
// PodDisruptionBudget does not allow now (HTTP 429).
var ErrBudget = errors.New("a PodDisruptionBudget does not allow the eviction now")

// NodeNow is a node as it is now.
type NodeNow struct {
	Labels        map[string]string
	Annotations   map[string]string
	Unschedulable bool
	Allocatable   map[string]int64
	Pods          []PodNow
}

// PodNow is an unfinished pod bound to the node.
type PodNow struct {
	Key cluster.PodKey
	UID string
	// Resource and Count are what it holds of the device plugin's GPU
	// resources (change.Resource); "" for none.
	Resource string
	Count    int
	// Deleting says the pod has a deletion timestamp: it is going.
	Deleting bool
}

// NodePatch is a change of a node; nil fields and maps change nothing.
type NodePatch struct {
	Unschedulable *bool
	Labels        map[string]*string
	Annotations   map[string]*string
}
