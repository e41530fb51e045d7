package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/gpu"
	actuator "github.com/gpupack/gpupack/internal/actuator/kube"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/gpusim"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/reclaim"
	"github.com/gpupack/gpupack/usage"
)

const reclaimNS = "ml"

// reclaimPolicy: every class idle for an hour, a second of grace; the
// notebook class gives its owner a notice of 3 s, the others none.
const reclaimPolicy = `apiVersion: gpupack.io/v1alpha1
kind: ReclaimPolicy
namespaces: [ml]
classes:
  notebook: {idleFor: 1h, grace: 1s, notice: 3s}
  inference: {idleFor: 1h, grace: 1s, notice: "0"}
  training: {idleFor: 1h, grace: 1s, notice: "0"}
maxPerRun: 20
maxPerNamespace: 20
`

// TestReclaim: a real apiserver and controller-manager (deployment,
// replicaset, statefulset, job, disruption and HPA controllers), KEDA's
// and Kueue's CRDs and Kubeflow's Notebook, and a real Prometheus holding
// three hours of fake-dcgm's series of the pods: every owner kind idle,
// beside a busy Deployment, an exempted one and one still starting.
// reclaim lists each idle owner with the action its kind allows, notifies
// the notebook's owner (annotation, Event, webhook), refuses an approval
// for evidence that changed, pauses every owner through its own switch,
// keeps a ledger whose measured saving is the accounting of the hours
// after, and restore puts back replicas, annotations and flags with
// nothing lost.
func TestReclaim(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	c.AddGPUNode("gpu-a", testcluster.GPUNode{Product: "NVIDIA-H100-80GB-HBM3", MemoryMiB: 81559, GPUs: 16})
	c.InstallKueueCRDs()
	c.InstallNeighbourCRDs()
	c.CreateNamespace(reclaimNS)
	c.CreateNamespace("gpupack")
	client, dyn := c.Client(), c.Dynamic()
	labelNamespace(t, client, reclaimNS, wellknown.LabelReclaim, wellknown.ReclaimEnabled)

	w := makeReclaimWorld(t, client, dyn)
	prom := w.history(t, client)
	time.Sleep(2 * time.Second) // every pod past the policy's grace of 1 s
	policy := t.TempDir() + "/policy.yaml"
	if err := os.WriteFile(policy, []byte(reclaimPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"reclaim", "--kubeconfig", c.Kubeconfig(), "--prometheus", prom.URL, "--policy", policy, "--ledger", "gpupack/ledger", "--format", "json"}

	// The dry run: one candidate per idle owner, each with its action.
	set := reclaimSet(t, args...)
	want := map[string]reclaim.Action{
		"Deployment ml/chat": reclaim.ScaleToZero, "Deployment ml/hpa-app": reclaim.ScaleToZero, "Deployment ml/serve": reclaim.PauseKEDA,
		"Notebook ml/nb": reclaim.StopNotebook, "Job ml/train": reclaim.SuspendJob, "Workload ml/job-sweep": reclaim.DeactivateWorkload, "Pod ml/dev": reclaim.Evict,
	}
	got := map[string]reclaim.Action{}
	for _, cand := range set.Candidates {
		got[cand.Owner.String()] = cand.Action
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("candidates %v, want %v; skipped %+v", got, want, set.Skipped)
	}
	for _, cand := range set.Candidates {
		if cpu := cand.Evidence.CPUCores; cpu == nil || math.Abs(*cpu-0.05) > 0.01 {
			t.Errorf("%s: CPU use %v, want cAdvisor's 0.05 cores", cand.Owner, cpu)
		}
		if cand.Evidence.CostPerDay == nil || *cand.Evidence.CostPerDay <= 0 {
			t.Errorf("%s: no cost a day from the catalogue's H100 price", cand.Owner)
		}
	}
	skipped := map[string]string{}
	for _, s := range set.Skipped {
		skipped[s.Owner.String()] = s.Reason
	}
	for owner, reason := range map[string]string{"Deployment ml/busy": reclaim.SkipActive, "Deployment ml/exempt": reclaim.SkipExempt,
		"Deployment ml/starting": reclaim.SkipStarting, "Deployment ml/cruncher": reclaim.SkipCPUBusy} {
		if skipped[owner] != reason {
			t.Errorf("%s: skipped %q, want %q (all: %v)", owner, skipped[owner], reason, skipped)
		}
	}

	// --notify: the notebook's owner gets its notice, by annotation, Event
	// and webhook; training and inference have no notice period.
	hook := newHookRecorder(t)
	var out bytes.Buffer
	if err := newRoot(t, &out, append(args, "--notify", "--notify-webhook", hook.srv.URL+"/notice?token=secret")...).Execute(); err != nil {
		t.Fatalf("reclaim --notify: %v\n%s", err, out.String())
	}
	nb := getObject(t, dyn, kube.NotebookResource, "nb")
	if _, ok := nb.GetAnnotations()[wellknown.AnnotationReclaimNotice]; !ok {
		t.Errorf("the Notebook has no notice: %v", nb.GetAnnotations())
	}
	// The bare pod is interactive too (class notebook): noticed as well.
	if posts := strings.Join(hook.bodies(), "\n"); strings.Count(posts, `"kind":"gpupack.io/reclaim-notice"`) != 2 || !strings.Contains(posts, `"name":"nb"`) || !strings.Contains(posts, `"name":"dev"`) {
		t.Errorf("webhook posts: %v", posts)
	}
	waitEvent(t, client, "nb", "GPUPackReclaimNotice")

	// An approval of evidence that changed is refused: dev is recreated
	// (a new UID) after the dry run.
	old := reclaimSet(t, args...).Hash
	w.recreateDev(t, client)
	if err := newRoot(t, &out, append(args, "--approve", old)...).Execute(); err == nil || !strings.Contains(err.Error(), "changed since the dry run") {
		t.Fatalf("an approval of changed evidence must be refused: %v\n%s", err, out.String())
	}
	// The recreated pod is another candidate: its notice is given anew.
	if err := newRoot(t, &out, append(args, "--notify")...).Execute(); err != nil {
		t.Fatalf("reclaim --notify: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), `"notified"`) || strings.Count(strings.Join(hook.bodies(), ""), `"name":"dev"`) != 2 {
		t.Errorf("the recreated pod was not notified again: %s", out.String())
	}
	time.Sleep(3 * time.Second) // the notices run out

	// --approve acts on every due candidate, after re-checking each.
	before := w.snapshot(t, client, dyn)
	set = reclaimSet(t, args...)
	if err := newRoot(t, &out, append(args, "--approve", set.Hash, "--approved-by", "alice")...).Execute(); err != nil {
		t.Fatalf("reclaim --approve: %v\n%s", err, out.String())
	}
	var run struct{ Outcome app.ReclaimOutcome }
	if err := json.Unmarshal(out.Bytes(), &run); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	records := map[string]reclaim.Record{}
	for _, r := range run.Outcome.Records {
		records[r.Owner.String()] = r
		if r.Outcome != reclaim.OutcomeReclaimed || r.ApprovedBy != "alice" {
			t.Errorf("%s: %s by %s (%s)", r.Owner, r.Outcome, r.ApprovedBy, r.Reason)
		}
	}
	if len(records) != len(want) {
		t.Fatalf("%d records, want %d: %s", len(records), len(want), out.String()[max(0, len(out.String())-3000):])
	}
	w.checkPaused(t, client, dyn)

	// The ledger measures each action from the accounting of the hours
	// after it: what the pods still held, and the rest freed.
	var ledger struct {
		Entries []app.LedgerEntry
		Totals  app.LedgerTotals
	}
	if err := newRoot(t, &out, "reclaim", "--kubeconfig", c.Kubeconfig(), "--prometheus", prom.URL, "--ledger", "gpupack/ledger", "--show-ledger", "--format", "json").Execute(); err != nil {
		t.Fatalf("--show-ledger: %v\n%s", err, out.String())
	}
	if err := json.Unmarshal(out.Bytes(), &ledger); err != nil {
		t.Fatal(err)
	}
	checkLedger(t, prom.URL, ledger.Entries, ledger.Totals)

	// restore puts each restorable owner back as it was.
	for owner, r := range records {
		err := newRoot(t, &out, "restore", r.ID, "--kubeconfig", c.Kubeconfig(), "--prometheus", prom.URL, "--ledger", "gpupack/ledger", "--restored-by", "bob").Execute()
		if r.Restorable != (err == nil) {
			t.Errorf("restore %s (%s): %v\n%s", r.ID, owner, err, out.String())
		}
	}
	w.checkRestored(t, client, dyn, before)
}

// reclaimWorld is the test's workloads.
type reclaimWorld struct {
	pods []*corev1.Pod // every running GPU pod, with its activity below
	busy map[string]bool
}

func makeReclaimWorld(t *testing.T, client kubernetes.Interface, dyn dynamic.Interface) *reclaimWorld {
	ctx := t.Context()
	for _, name := range []string{"chat", "busy", "serve", "hpa-app", "exempt", "starting", "cruncher"} {
		d := reclaimDeployment(name)
		if name == "exempt" {
			d.Labels = map[string]string{wellknown.LabelReclaim: wellknown.ReclaimNever}
		}
		if _, err := client.AppsV1().Deployments(reclaimNS).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createUnstructured(t, dyn, kube.ScaledObjectResource, `{apiVersion: keda.sh/v1alpha1, kind: ScaledObject, metadata: {name: serve, namespace: ml},
  spec: {scaleTargetRef: {name: serve}, minReplicaCount: 1, maxReplicaCount: 4,
    triggers: [{type: prometheus, metadata: {serverAddress: "http://prometheus:9090", query: "sum(queue_depth)", threshold: "8"}}]}}`)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: reclaimNS, Name: "hpa-app"}, Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "hpa-app"}, MinReplicas: ptr.To(int32(1)), MaxReplicas: 3,
		Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(int32(80))}}}}}}
	if _, err := client.AutoscalingV2().HorizontalPodAutoscalers(reclaimNS).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The Notebook owns its StatefulSet, as Kubeflow's controller makes it,
	// and a PVC holds its workspace.
	nb := createUnstructured(t, dyn, kube.NotebookResource, `{apiVersion: kubeflow.org/v1, kind: Notebook, metadata: {name: nb, namespace: ml},
  spec: {template: {spec: {containers: [{name: nb, image: "kubeflownotebookswg/jupyter-pytorch-cuda:v1.10.0"}]}}}}`)
	sts := reclaimStatefulSet("nb")
	sts.OwnerReferences = []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "Notebook", Name: "nb", UID: nb.GetUID(), Controller: ptr.To(true)}}
	if _, err := client.AppsV1().StatefulSets(reclaimNS).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: reclaimNS, Name: "workspace-nb"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}}}
	if _, err := client.CoreV1().PersistentVolumeClaims(reclaimNS).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A Job, and a Job that Kueue manages through its Workload.
	for _, name := range []string{"train", "sweep"} {
		if _, err := client.BatchV1().Jobs(reclaimNS).Create(ctx, reclaimJob(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	sweep, err := client.BatchV1().Jobs(reclaimNS).Get(ctx, "sweep", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createUnstructured(t, dyn, kube.WorkloadResource, fmt.Sprintf(`{apiVersion: kueue.x-k8s.io/v1beta2, kind: Workload, metadata: {name: job-sweep, namespace: ml,
  ownerReferences: [{apiVersion: batch/v1, kind: Job, name: sweep, uid: %s, controller: true}]},
  spec: {queueName: research, podSets: [{name: main, count: 1, template: {spec: {containers: [{name: main, image: "busybox"}]}}}]}}`, sweep.UID))
	// A bare pod that someone started by hand.
	if _, err := client.CoreV1().Pods(reclaimNS).Create(ctx, reclaimPod("dev"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w := &reclaimWorld{busy: map[string]bool{"busy": true}}
	w.pods = waitRunning(t, client, 11)
	// One pod has started but is not ready yet (kwok's ready stage does
	// not run again once the condition exists).
	for _, p := range w.pods {
		if strings.HasPrefix(p.Name, "starting-") {
			setReady(t, client, p, false)
		}
	}
	return w
}

// history backfills three hours of DCGM series of the world's pods into
// a new Prometheus, ending now: the busy Deployment's pod at 70%, every
// other pod idle.
func (w *reclaimWorld) history(t *testing.T, client kubernetes.Interface) *testcluster.Prometheus {
	var doc strings.Builder
	doc.WriteString("duration: 3h\nnodes:\n  - {name: gpu-a, model: H100-80GB, gpus: 16}\npods:\n")
	for i, p := range w.pods {
		activity := "{pattern: idle}"
		if w.busy[strings.SplitN(p.Name, "-", 2)[0]] {
			activity = "{pattern: constant, level: 0.7}"
		}
		fmt.Fprintf(&doc, "  - {namespace: %s, name: %s, node: gpu-a, gpu: %d, memoryMiB: 4000, activity: %s}\n", p.Namespace, p.Name, i, activity)
	}
	sc, err := gpusim.Parse([]byte(doc.String()), "reclaim scenario", gpu.Default())
	if err != nil {
		t.Fatalf("%v\n%s", err, doc.String())
	}
	start := time.Now().Add(-3 * time.Hour).Truncate(time.Minute)
	prom := testcluster.FleetHistory(t, sc, start, 30*time.Second, gpusim.Faults{})
	// cAdvisor's CPU counter of each pod's container, as the kubelet
	// exposes it: the cruncher's GPU idles while it works two cores.
	file := t.TempDir() + "/cadvisor.om"
	var om strings.Builder
	om.WriteString("# HELP container_cpu_usage_seconds Cumulative cpu time consumed in seconds.\n# TYPE container_cpu_usage_seconds counter\n")
	for _, p := range w.pods {
		cores := 0.05
		if strings.HasPrefix(p.Name, "cruncher-") {
			cores = 2
		}
		for ts := time.Duration(0); ts < 3*time.Hour; ts += 30 * time.Second {
			fmt.Fprintf(&om, "container_cpu_usage_seconds_total{container=\"cuda\",id=\"/kubepods/pod%s/cuda\",image=\"nvcr.io/nvidia/cuda:12.9.1-base-ubuntu24.04\",name=\"cuda\",namespace=%q,pod=%q} %g %d\n",
				p.UID, p.Namespace, p.Name, cores*ts.Seconds(), start.Add(ts).Unix())
		}
	}
	om.WriteString("# EOF\n")
	if err := os.WriteFile(file, []byte(om.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	prom.Stop()
	testcluster.Backfill(t, prom.DataDir(), file, 0)
	prom.Restart()
	return prom
}

// recreateDev deletes the bare pod and creates it again: same name, new UID.
func (w *reclaimWorld) recreateDev(t *testing.T, client kubernetes.Interface) {
	ctx := t.Context()
	// A graceful delete, which kwok finalizes: a forced one races kwok's
	// own delete of the old pod, which would take the new one by name.
	if err := client.CoreV1().Pods(reclaimNS).Delete(ctx, "dev", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "dev to go", func(ctx context.Context) (bool, string, error) {
		_, err := client.CoreV1().Pods(reclaimNS).Get(ctx, "dev", metav1.GetOptions{})
		return err != nil, fmt.Sprint(err), nil
	})
	if _, err := client.CoreV1().Pods(reclaimNS).Create(ctx, reclaimPod("dev"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, client, 11)
	time.Sleep(2 * time.Second) // past the grace
}

// ownerState is what restore must put back.
type ownerState struct {
	replicas    map[string]int32
	annotations map[string]map[string]string
	suspend     bool
	active      any
}

func (w *reclaimWorld) snapshot(t *testing.T, client kubernetes.Interface, dyn dynamic.Interface) ownerState {
	s := ownerState{replicas: map[string]int32{}, annotations: map[string]map[string]string{}}
	for _, name := range []string{"chat", "busy", "serve", "hpa-app", "exempt", "starting", "cruncher"} {
		d, err := client.AppsV1().Deployments(reclaimNS).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.replicas[name] = *d.Spec.Replicas
		s.annotations["Deployment/"+name] = userAnnotations(d.Annotations)
	}
	s.annotations["ScaledObject/serve"] = userAnnotations(getObject(t, dyn, kube.ScaledObjectResource, "serve").GetAnnotations())
	s.annotations["Notebook/nb"] = userAnnotations(getObject(t, dyn, kube.NotebookResource, "nb").GetAnnotations())
	job, err := client.BatchV1().Jobs(reclaimNS).Get(t.Context(), "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.suspend = job.Spec.Suspend != nil && *job.Spec.Suspend
	s.active, _, _ = unstructured.NestedFieldNoCopy(getObject(t, dyn, kube.WorkloadResource, "job-sweep").Object, "spec", "active")
	return s
}

// userAnnotations drops the annotations that controllers keep for
// themselves (deployment.kubernetes.io/revision) and gpupack's notice.
func userAnnotations(a map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		if !strings.HasPrefix(k, "deployment.kubernetes.io/") && k != wellknown.AnnotationReclaimNotice {
			out[k] = v
		}
	}
	return out
}

func (w *reclaimWorld) checkPaused(t *testing.T, client kubernetes.Interface, dyn dynamic.Interface) {
	ctx := t.Context()
	for _, name := range []string{"chat", "hpa-app"} {
		d, err := client.AppsV1().Deployments(reclaimNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if *d.Spec.Replicas != 0 || d.Annotations[wellknown.AnnotationReclaimed] == "" {
			t.Errorf("Deployment %s: replicas %d, record %q", name, *d.Spec.Replicas, d.Annotations[wellknown.AnnotationReclaimed])
		}
	}
	// The HPA controller stops scaling a target at zero replicas.
	poll(t, "the HPA to stop scaling hpa-app at 0", func(ctx context.Context) (bool, string, error) {
		h, err := client.AutoscalingV2().HorizontalPodAutoscalers(reclaimNS).Get(ctx, "hpa-app", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		for _, c := range h.Status.Conditions {
			if c.Type == autoscalingv2.ScalingActive && c.Status == corev1.ConditionFalse && c.Reason == "ScalingDisabled" {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%+v", h.Status.Conditions), nil
	})
	if v := getObject(t, dyn, kube.ScaledObjectResource, "serve").GetAnnotations()[actuator.KEDAPausedReplicas]; v != "0" {
		t.Errorf("ScaledObject serve: paused-replicas %q", v)
	}
	if _, ok := getObject(t, dyn, kube.NotebookResource, "nb").GetAnnotations()[actuator.NotebookStopped]; !ok {
		t.Errorf("Notebook nb is not stopped")
	}
	if job, err := client.BatchV1().Jobs(reclaimNS).Get(ctx, "train", metav1.GetOptions{}); err != nil || job.Spec.Suspend == nil || !*job.Spec.Suspend {
		t.Errorf("Job train not suspended: %v", err)
	}
	if active, _, _ := unstructured.NestedBool(getObject(t, dyn, kube.WorkloadResource, "job-sweep").Object, "spec", "active"); active {
		t.Errorf("Workload job-sweep still active")
	}
	poll(t, "the idle pods to stop", func(ctx context.Context) (bool, string, error) {
		pods, err := client.CoreV1().Pods(reclaimNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		var left []string
		for _, p := range pods.Items {
			name := p.Name
			if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			for _, stopped := range []string{"chat-", "hpa-app-", "train-", "dev"} {
				if strings.HasPrefix(name, stopped) {
					left = append(left, name)
				}
			}
		}
		return len(left) == 0, strings.Join(left, ", "), nil
	})
}

func (w *reclaimWorld) checkRestored(t *testing.T, client kubernetes.Interface, dyn dynamic.Interface, before ownerState) {
	after := w.snapshot(t, client, dyn)
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("after restore\n%+v\nwant as before\n%+v", after, before)
	}
	if _, err := client.CoreV1().PersistentVolumeClaims(reclaimNS).Get(t.Context(), "workspace-nb", metav1.GetOptions{}); err != nil {
		t.Errorf("the notebook's PVC: %v", err)
	}
	so := getObject(t, dyn, kube.ScaledObjectResource, "serve")
	if _, found, _ := unstructured.NestedInt64(so.Object, "spec", "initialCooldownPeriod"); found {
		t.Logf("initialCooldownPeriod set on restore")
	}
	// The scaled Deployments run their replicas again.
	for _, name := range []string{"chat", "hpa-app"} {
		poll(t, name+" to run again", func(ctx context.Context) (bool, string, error) {
			d, err := client.AppsV1().Deployments(reclaimNS).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			return d.Status.ReadyReplicas == 1, fmt.Sprintf("%+v", d.Status), nil
		})
	}
}

// checkLedger checks each measured entry against the accounting of its
// hours: the pods' allocation after the action is what they still held.
func checkLedger(t *testing.T, promURL string, entries []app.LedgerEntry, totals app.LedgerTotals) {
	measured := 0
	for _, e := range entries {
		if !e.Restorable && e.Action != reclaim.Evict {
			t.Errorf("%s: only an eviction is not restorable", e.ID)
		}
		if e.Measured == nil {
			t.Errorf("%s: not measured: %s", e.ID, e.MeasureError)
			continue
		}
		measured++
		m := e.Measured
		r, err := app.Measure(t.Context(), app.Measurement{Prometheus: promURL, Window: usageWindow(m.From, m.To)})
		if err != nil {
			t.Fatal(err)
		}
		var held float64
		for _, p := range r.Pods {
			if slices.ContainsFunc(e.Pods, func(q reclaim.PodRef) bool { return q.Key() == p.Key() }) {
				held += p.AllocatedGPUSeconds.Hours()
			}
		}
		checkHours(t, e.ID+" still held", m.StillHeldGPUHrs, held)
		checkHours(t, e.ID+" freed", m.FreedGPUHours, max(m.PredictedGPUHrs-held, 0))
		checkHours(t, e.ID+" predicted", m.PredictedGPUHrs, e.Predicted.GPUs*m.To.Sub(m.From).Hours())
	}
	if totals.Measured != measured || totals.Records != len(entries) {
		t.Errorf("totals %+v for %d entries, %d measured", totals, len(entries), measured)
	}
}

// hookRecorder is the notice webhook's receiver.
type hookRecorder struct {
	srv   *httptest.Server
	mu    sync.Mutex
	posts []string
}

func newHookRecorder(t *testing.T) *hookRecorder {
	h := &hookRecorder{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.posts = append(h.posts, string(b))
		h.mu.Unlock()
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookRecorder) bodies() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.posts...)
}

func reclaimSet(t *testing.T, args ...string) *reclaim.Set {
	t.Helper()
	var out bytes.Buffer
	if err := newRoot(t, &out, args...).Execute(); err != nil {
		t.Fatalf("reclaim: %v\n%s", err, out.String())
	}
	var s reclaim.Set
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	return &s
}

func reclaimTemplate(name string) corev1.PodTemplateSpec {
	p := makePod(reclaimNS, "").gpus(resourceGPU, 1).obj()
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}, Spec: p.Spec}
}

func reclaimDeployment(name string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: reclaimNS, Name: name}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}, Template: reclaimTemplate(name)}}
}

func reclaimStatefulSet(name string) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: reclaimNS, Name: name}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To(int32(1)), ServiceName: name, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}, Template: reclaimTemplate(name)}}
}

func reclaimJob(name string) *batchv1.Job {
	tmpl := reclaimTemplate(name)
	tmpl.Labels[testcluster.LabelKeepsRunning] = "true"
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: reclaimNS, Name: name}, Spec: batchv1.JobSpec{Template: tmpl}}
}

func reclaimPod(name string) *corev1.Pod {
	p := makePod(reclaimNS, name).gpus(resourceGPU, 1).obj()
	p.Labels = map[string]string{"app": name}
	return p
}

// waitRunning waits until n GPU pods of the namespace run, and returns
// them sorted by name.
func waitRunning(t *testing.T, client kubernetes.Interface, n int) []*corev1.Pod {
	t.Helper()
	var out []*corev1.Pod
	poll(t, fmt.Sprintf("%d pods to run", n), func(ctx context.Context) (bool, string, error) {
		pods, err := client.CoreV1().Pods(reclaimNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		out = out[:0]
		var states []string
		for i := range pods.Items {
			p := &pods.Items[i]
			states = append(states, p.Name+"="+string(p.Status.Phase))
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				out = append(out, p)
			}
		}
		return len(out) == n, strings.Join(states, " "), nil
	})
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func setReady(t *testing.T, client kubernetes.Interface, p *corev1.Pod, ready bool) {
	t.Helper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	cur, err := client.CoreV1().Pods(p.Namespace).Get(t.Context(), p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range cur.Status.Conditions {
		if cur.Status.Conditions[i].Type == corev1.PodReady {
			cur.Status.Conditions[i].Status = status
		}
	}
	if _, err := client.CoreV1().Pods(p.Namespace).UpdateStatus(t.Context(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func labelNamespace(t *testing.T, client kubernetes.Interface, ns, key, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	if _, err := client.CoreV1().Namespaces().Patch(t.Context(), ns, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createUnstructured(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, doc string) *unstructured.Unstructured {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	created, err := dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(t.Context(), u, metav1.CreateOptions{FieldValidation: "Strict"})
	if err != nil {
		t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return created
}

func getObject(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := dyn.Resource(gvr).Namespace(reclaimNS).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func waitEvent(t *testing.T, client kubernetes.Interface, name, reason string) {
	t.Helper()
	poll(t, "Event "+reason+" on "+name, func(ctx context.Context) (bool, string, error) {
		evs, err := client.CoreV1().Events(reclaimNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		var seen []string
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason {
				return true, "", nil
			}
			seen = append(seen, e.InvolvedObject.Name+":"+e.Reason)
		}
		return false, strings.Join(seen, " "), nil
	})
}

func usageWindow(from, to time.Time) usage.Window {
	return usage.Window{Start: from, End: to, Step: usage.DefaultStep(to.Sub(from))}
}

// checkHours allows the 4 decimals that the ledger rounds GPU-hours to.
func checkHours(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-4+1e-6*want {
		t.Errorf("%s: %.5f GPU-hours, want %.5f", what, got, want)
	}
}
