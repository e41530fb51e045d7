package demo

import (
	_ "embed"
	"fmt"
	"time"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/internal/util/yamldoc"
	"github.com/gpupack/gpupack/reclaim"
)

var (
	//go:embed reclaim.yaml
	reclaimYAML []byte
	//go:embed reclaim-policy.yaml
	reclaimPolicyYAML []byte
)

// The names of the reclaim files in messages.
const (
	ReclaimName       = "demo/reclaim.yaml"
	ReclaimPolicyName = "demo/reclaim-policy.yaml"
)

// ReclaimPolicy is the demo's reclaim policy file.
func ReclaimPolicy() []byte { return reclaimPolicyYAML }

type reclaimFile struct {
	Namespaces map[string]string `json:"namespaces"`
	Owners     []struct {
		Kind      reclaim.Kind `json:"kind"`
		Namespace string       `json:"namespace"`
		Name      string       `json:"name"`
		Replicas  *int32       `json:"replicas,omitempty"`
		Scaler    reclaim.Kind `json:"scaler,omitempty"`
		Pods      []string     `json:"pods"`
	} `json:"owners"`
}

// ReclaimInput is what reclaim reads of the demo world, as
// kube.ReadReclaim reads it of a live cluster: the bound GPU pods of s
// (the demo cluster), ready and created before the week, their owners
// (reclaim.yaml; a pod it does not list is a bare pod) and the namespaces'
// labels.
func ReclaimInput(s *cluster.Snapshot) ([]reclaim.PodState, map[string]*reclaim.Owner, map[string]string, error) {
	var f reclaimFile
	if _, err := yamldoc.Decode(reclaimYAML, ReclaimName, &f); err != nil {
		return nil, nil, nil, err
	}
	owners := map[string]*reclaim.Owner{}
	ownerOf := map[string]string{}
	for _, o := range f.Owners {
		ref := reclaim.Ref{Kind: o.Kind, APIVersion: apiVersions[o.Kind], Namespace: o.Namespace, Name: o.Name, UID: "demo-" + o.Namespace + "-" + o.Name}
		owner := &reclaim.Owner{Ref: ref, Replicas: o.Replicas}
		if o.Scaler != "" {
			owner.Scaler = &reclaim.Ref{Kind: o.Scaler, APIVersion: apiVersions[o.Scaler], Namespace: o.Namespace, Name: o.Name, UID: "demo-scaler-" + o.Name}
		}
		key := reclaim.OwnerKey(o.Kind, o.Namespace, o.Name)
		owners[key] = owner
		for _, p := range o.Pods {
			ownerOf[o.Namespace+"/"+p] = key
		}
	}
	var pods []reclaim.PodState
	created := Start.Add(-24 * time.Hour)
	for _, p := range s.Pods {
		if !p.Bound() || !p.WantsGPU() {
			continue
		}
		pods = append(pods, reclaim.PodState{Namespace: p.Namespace, Name: p.Name, UID: "demo-pod-" + p.Name, Node: p.NodeName,
			GPUs: p.HeldGPUs(), Created: created, Ready: true, Labels: p.Labels, Owner: ownerOf[p.Key()]})
		delete(ownerOf, p.Key())
	}
	for pod := range ownerOf {
		return nil, nil, nil, fmt.Errorf("%s: pod %s is not a bound GPU pod of %s", ReclaimName, pod, ClusterName)
	}
	return pods, owners, f.Namespaces, nil
}

var apiVersions = map[reclaim.Kind]string{
	reclaim.Deployment: "apps/v1", reclaim.StatefulSet: "apps/v1", reclaim.Job: "batch/v1",
	reclaim.Notebook: "kubeflow.org/v1", reclaim.Workload: "kueue.x-k8s.io/v1beta2",
	reclaim.ScaledObject: "keda.sh/v1alpha1", reclaim.HorizontalPodAutoscaler: "autoscaling/v2",
}
