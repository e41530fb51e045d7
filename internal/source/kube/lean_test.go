package kube

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/gpu"
)

// fatPod is a GPU pod as a busy cluster's apiserver sends it: managed
// fields of three managers, kubectl's last-applied copy of its manifest,
// an environment, a command, probes and an ephemeral container, beside
// what gpupack reads (requests, selector, tolerations, volumes, gpupack's
// annotation, conditions, container statuses).
func fatPod(i int) *corev1.Pod {
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz"}}, PeriodSeconds: 10}
	var env []corev1.EnvVar
	for k := range 20 {
		env = append(env, corev1.EnvVar{Name: fmt.Sprintf("MODEL_SETTING_%d", k), Value: strings.Repeat("v", 40)})
	}
	var managed []metav1.ManagedFieldsEntry
	for _, m := range []string{"kubectl-client-side-apply", "kube-scheduler", "kubelet"} {
		managed = append(managed, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"main\"}":{".":{},"f:env":{},"f:image":{},"f:resources":{"f:limits":{".":{},"f:nvidia.com/gpu":{}}}}}},"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{".":{},"f:status":{}}}}}` + strings.Repeat(" ", 600))}})
	}
	now := metav1.NewTime(time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC))
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: fmt.Sprintf("trainer-%d", i), UID: "uid", CreationTimestamp: now,
			Labels:        map[string]string{"app": "trainer"},
			Annotations:   map[string]string{wellknown.AnnotationGPUMemory: "20Gi", lastApplied: strings.Repeat("{\"apiVersion\":\"v1\",\"kind\":\"Pod\"}", 60)},
			ManagedFields: managed, OwnerReferences: []metav1.OwnerReference{{Kind: "Job", Name: "trainer", UID: "job", Controller: new(true)}}},
		Spec: corev1.PodSpec{
			NodeName: "h100-1", SchedulerName: "default-scheduler", NodeSelector: map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
			Tolerations:    []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Volumes:        []corev1.Volume{{Name: "models", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "models"}}}},
			InitContainers: []corev1.Container{{Name: "fetch", Image: "fetch:1", Command: []string{"/fetch", "--all"}, Env: env}},
			Containers: []corev1.Container{{Name: "main", Image: "trainer:1", Command: []string{"python", "-m", "train"}, Args: []string{"--epochs", "10"},
				Env:           append(slices.Clone(env), corev1.EnvVar{Name: "XLA_PYTHON_CLIENT_MEM_FRACTION", Value: ".5"}),
				Resources:     corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1"), corev1.ResourceCPU: resource.MustParse("8")}, Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
				VolumeMounts:  []corev1.VolumeMount{{Name: "models", MountPath: "/models"}},
				LivenessProbe: probe, ReadinessProbe: probe, StartupProbe: probe}},
			EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox", Command: []string{"sh"}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &now,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now}, {Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}},
	}
}

// TestLeanObject: the transform drops managed fields, kubectl's
// last-applied copy, the environments (but for an engine's variables of a
// GPU container), probes, the commands of containers without GPUs and the
// ephemeral containers; is idempotent; and loses nothing that
// gpupack reads: the snapshot built and the start-up read from lean pods
// are those of the full ones.
func TestLeanObject(t *testing.T) {
	full := fatPod(0)
	lean, err := leanObject(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	p := lean.(*corev1.Pod)
	c := p.Spec.Containers[0]
	if p.ManagedFields != nil || p.Annotations[lastApplied] != "" || len(c.Env) != 1 || p.Spec.InitContainers[0].Command != nil ||
		c.LivenessProbe != nil || c.ReadinessProbe != nil || c.StartupProbe != nil || p.Spec.InitContainers[0].Env != nil || p.Spec.EphemeralContainers != nil {
		t.Errorf("the lean pod keeps what gpupack never reads: %+v", p)
	}
	again, _ := leanObject(p.DeepCopy())
	if !equality.Semantic.DeepEqual(p, again) {
		t.Errorf("leaning twice differs from once:\n%+v\n%+v", p, again)
	}
	node := makeNode("h100-1").gfd("NVIDIA-H100-80GB-HBM3", "81559", "8").alloc("nvidia.com/gpu", "8").obj()
	want, err := Build(gpu.Default(), []*corev1.Node{node}, []*corev1.Pod{full}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Build(gpu.Default(), []*corev1.Node{node}, []*corev1.Pod{p}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Snapshot.Pods) != 1 || want.Snapshot.Pods[0].Engine == nil {
		t.Fatalf("the full pod built %d pods, want 1 with the JAX engine its variable names", len(want.Snapshot.Pods))
	}
	if diff := cmp.Diff(want.Snapshot.Pods, got.Snapshot.Pods); diff != "" {
		t.Errorf("the snapshot's pods of the lean pod differ (-full +lean):\n%s", diff)
	}
	if diff := cmp.Diff(want.Warnings, got.Warnings); diff != "" {
		t.Errorf("the warnings of the lean pod differ (-full +lean):\n%s", diff)
	}
	class := func(string, string) string { return "fast-nvme" }
	wantStart := startups(map[string]*corev1.Pod{"ml/trainer-0": full}, nil, class)
	gotStart := startups(map[string]*corev1.Pod{"ml/trainer-0": p}, nil, class)
	if diff := cmp.Diff(wantStart, gotStart); diff != "" {
		t.Errorf("the start-up of the lean pod differs (-full +lean):\n%s", diff)
	}
}

// BenchmarkPodCacheMemory measures the heap that an informer's cache holds
// per pod of fatPod's shape, as the apiserver's JSON decodes it, with and
// without leanObject: the figures of docs/benchmarks.md
// (go test -run '^$' -bench PodCacheMemory -benchtime 1x ./internal/source/kube).
func BenchmarkPodCacheMemory(b *testing.B) {
	const pods = 2000
	raw := make([][]byte, pods)
	for i := range raw {
		var err error
		if raw[i], err = json.Marshal(fatPod(i)); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name      string
		transform func(any) (any, error)
	}{{"full", func(o any) (any, error) { return o, nil }}, {"lean", leanObject}} {
		b.Run(bc.name, func(b *testing.B) {
			var perPod float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				kept := make([]any, pods)
				for i, r := range raw {
					var p corev1.Pod
					if err := json.Unmarshal(r, &p); err != nil {
						b.Fatal(err)
					}
					o, err := bc.transform(&p)
					if err != nil {
						b.Fatal(err)
					}
					kept[i] = o
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perPod = float64(after.HeapAlloc-before.HeapAlloc) / pods
				runtime.KeepAlive(kept)
			}
			b.ReportMetric(perPod, "B/pod")
		})
	}
}
