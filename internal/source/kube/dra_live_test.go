package kube_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/placement"
	"github.com/gpupack/gpupack/usage"
)

// TestLiveDRA publishes ResourceSlices of NVIDIA's DRA driver's shape (whole
// GPUs and MIG devices) for kwok nodes, creates its DeviceClasses and pods
// with claims (from a template, by name, and through the extended resource
// nvidia.com/gpu), lets the real kube-scheduler allocate them, and checks
// that Load, the Watcher and the snapshot file count every DRA GPU, that
// each allocated device is held by the pod whose claim got it, and that a
// pod whose claim cannot be allocated is a pending GPU pod.
func TestLiveDRA(t *testing.T) {
	c := startDRA(t)
	ctx := t.Context()
	client := c.Client()
	res := client.ResourceV1()
	c.AddDRANode("dra-1", draH100(0), draH100(1), draA100MIG(2))
	c.AddDRANode("dra-2", draH100(0))
	const ns = "ml"
	c.CreateNamespace(ns)

	request := func(class string, count int64, selector string) resourcev1.ResourceClaimSpec {
		r := resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count}
		if selector != "" {
			r.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: selector}}}
		}
		return resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &r}}}}
	}
	if _, err := res.ResourceClaimTemplates(ns).Create(ctx, &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "one-gpu"},
		Spec:       resourcev1.ResourceClaimTemplateSpec{Spec: request(testcluster.DeviceClassGPU, 1, "")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, spec := range map[string]resourcev1.ResourceClaimSpec{
		"mig-claim": request(testcluster.DeviceClassMIG, 1, "device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"),
		// No node has four GPUs: the scheduler cannot allocate it.
		"big-claim": request(testcluster.DeviceClassGPU, 4, ""),
	} {
		if _, err := res.ResourceClaims(ns).Create(ctx, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod := func(name string, claim corev1.PodResourceClaim) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
		}
		if claim.Name != "" {
			p.Spec.ResourceClaims = []corev1.PodResourceClaim{claim}
			p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: claim.Name}}
		}
		return p
	}
	legacy := pod("legacy", corev1.PodResourceClaim{})
	legacy.Spec.Containers[0].Resources.Limits = corev1.ResourceList{kube.ResourceGPU: resource.MustParse("1")}
	pods := []*corev1.Pod{
		pod("train-0", corev1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}),
		pod("train-1", corev1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}),
		pod("mig", corev1.PodResourceClaim{Name: "gpu", ResourceClaimName: ptr.To("mig-claim")}),
		legacy,
		pod("big", corev1.PodResourceClaim{Name: "gpu", ResourceClaimName: ptr.To("big-claim")}),
	}
	for _, p := range pods {
		if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bound := []string{"train-0", "train-1", "mig", "legacy"}
	waitPods(t, client.CoreV1().Pods(ns), func(ps map[string]*corev1.Pod) string {
		for _, name := range bound {
			if ps[name] == nil || ps[name].Spec.NodeName == "" {
				return name + " is not bound"
			}
		}
		if !unschedulable(ps["big"]) {
			return "big is not marked unschedulable"
		}
		return ""
	})

	// What the apiserver says each bound pod holds: driver/pool/device of
	// its claims' allocations.
	want := map[string][]string{}
	live, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range live.Items {
		var names []string
		for _, s := range p.Status.ResourceClaimStatuses {
			names = append(names, *s.ResourceClaimName)
		}
		if s := p.Status.ExtendedResourceClaimStatus; s != nil {
			names = append(names, s.ResourceClaimName)
		}
		if p.Name != "big" {
			for _, cs := range p.Spec.ResourceClaims {
				if cs.ResourceClaimName != nil {
					names = append(names, *cs.ResourceClaimName)
				}
			}
		}
		for _, name := range names {
			claim, err := res.ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if claim.Status.Allocation == nil {
				continue
			}
			for _, r := range claim.Status.Allocation.Devices.Results {
				want[p.Name] = append(want[p.Name], cluster.DeviceID(r.Driver, r.Pool, r.Device))
			}
		}
	}
	for _, name := range bound {
		if len(want[name]) != 1 {
			t.Fatalf("pod %s: the scheduler allocated %v, want one device", name, want[name])
		}
	}

	cat := gpu.Default()
	loaded, watched := readDRA(t, client, cat)
	for source, st := range map[string]*kube.State{"Load": loaded, "Watcher": watched} {
		t.Run(source, func(t *testing.T) { checkDRAState(t, st, want) })
	}
	if msg := loaded.SchedulingFailures[ns+"/big"].Message; !strings.Contains(msg, "cannot allocate all claims") {
		t.Errorf("big's scheduling failure = %q, want the scheduler's \"cannot allocate all claims\"", msg)
	}

	t.Run("snapshot file", func(t *testing.T) {
		data, err := cluster.MarshalFile(loaded.Snapshot)
		if err != nil {
			t.Fatal(err)
		}
		again, err := cluster.ParseFile(data, "live.yaml", cat)
		if err != nil {
			t.Fatalf("%v\n%s", err, data)
		}
		checkDRAState(t, &kube.State{Snapshot: again}, want)
		if diff := cmp.Diff(loaded.Snapshot.Pods, again.Pods); diff != "" {
			t.Errorf("the snapshot file changed the pods (-live +file):\n%s", diff)
		}
	})
}

// startDRA starts a control plane for a live DRA test (skipped with
// -short) with NVIDIA's DeviceClasses and the extra ones.
func startDRA(t *testing.T, extra ...*resourcev1.DeviceClass) *testcluster.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	c := testcluster.Start(t, testcluster.Options{})
	c.CreateDeviceClasses(append(testcluster.NVIDIADeviceClasses(), extra...)...)
	return c
}

// readDRA reads the cluster's state with both of gpupack's readers, Load
// and a Watcher's informers, so that a live DRA test checks that they agree.
func readDRA(t *testing.T, client kubernetes.Interface, cat *gpu.Catalogue) (loaded, watched *kube.State) {
	t.Helper()
	loaded, err := kube.Load(t.Context(), client, cat)
	if err != nil {
		t.Fatal(err)
	}
	w := kube.NewWatcher(client, cat)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	watched, err = w.State()
	if err != nil {
		t.Fatal(err)
	}
	return loaded, watched
}

// checkDRAState checks a State of TestLiveDRA's cluster: every published
// GPU counted, each bound pod holding the device its claim got (want: by
// pod name, the DeviceIDs of its allocation) and no other, and big pending.
func checkDRAState(t *testing.T, st *kube.State, want map[string][]string) {
	t.Helper()
	s := st.Snapshot
	// dra-1: two H100 and one A100 whose three MIG devices are its slices;
	// dra-2: one H100.
	published := map[string]int{"dra-1": 3, "dra-2": 1}
	for node, n := range published {
		got, _ := s.Node(node)
		dra := 0
		for _, g := range got.GPUs {
			if g.DRA != nil {
				dra++
			}
		}
		if dra != n {
			t.Errorf("node %s: %d DRA GPUs, want %d; warnings: %q", node, dra, n, st.Warnings)
		}
	}
	held := map[string]string{} // DeviceID -> pod
	for _, p := range s.Pods {
		if p.Name == "big" {
			if p.Bound() || !p.WantsGPU() || p.GPU.Count != 4 {
				t.Errorf("big: node %q, GPU %v; want a pending pod asking 4 GPUs", p.NodeName, p.GPU)
			}
			continue
		}
		if len(p.Devices) != 1 {
			t.Errorf("pod %s: devices %+v, want the one its claim holds", p.Name, p.Devices)
			continue
		}
		n, _ := s.Node(p.NodeName)
		d := p.Devices[0]
		g := n.GPUs[d.GPU]
		name := g.DRA.Device
		if d.Slice >= 0 {
			name = g.DRA.SliceDevices[d.Slice]
		}
		id := cluster.DeviceID(g.DRA.Driver, g.DRA.Pool, name)
		if id != want[p.Name][0] {
			t.Errorf("pod %s holds %s in the snapshot, but its claim got %s", p.Name, id, want[p.Name][0])
		}
		if other, dup := held[id]; dup {
			t.Errorf("device %s is held by %s and %s", id, other, p.Name)
		}
		held[id] = p.Name
	}
	if len(held) != 4 {
		t.Errorf("%d devices held, want 4 (train-0, train-1, mig, legacy)", len(held))
	}
	// What report --kubeconfig checks the exporter's attribution against:
	// each held device with its pod and the UUID its slice publishes.
	holds := usage.ClaimHolds(s, nil)
	if len(holds) != len(held) {
		t.Errorf("claim holds %+v; want one for each of the %d held devices", holds, len(held))
	}
	for _, h := range holds {
		_, name, _ := strings.Cut(h.Pod, "/")
		if held[h.DeviceID] != name || !strings.HasPrefix(h.UUID, "GPU-") {
			t.Errorf("claim hold %+v: want pod %s and the GPU's UUID", h, held[h.DeviceID])
		}
	}
	_, misfits, err := placement.States(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(misfits) > 0 {
		t.Errorf("bound DRA pods said not to fit: %q", misfits)
	}
}

func unschedulable(p *corev1.Pod) bool {
	if p == nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// waitPods polls the namespace's pods until ready says "" (else what it is
// waiting for), for a generous minute.
func waitPods(t *testing.T, pods interface {
	List(context.Context, metav1.ListOptions) (*corev1.PodList, error)
}, ready func(map[string]*corev1.Pod) string) {
	t.Helper()
	last := ""
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		byName := map[string]*corev1.Pod{}
		for i := range list.Items {
			byName[list.Items[i].Name] = &list.Items[i]
		}
		last = ready(byName)
		return last == "", nil
	})
	if err != nil {
		t.Fatal(fmt.Errorf("%w: %s", err, last))
	}
}

// TestLiveDRADiagnosis creates, on kwok nodes with ResourceSlices, pending
// pods whose claims fail in every way gpupack models: all devices the
// claim accepts held, a selector that accepts nothing, a class that no
// node offers, a count above any node's, alternatives that all fail, and
// a claim that does not exist. For each pod the real kube-scheduler tried,
// gpupack's "0/N nodes are available" line must be the scheduler's
// FailedScheduling message word for word, its cause one the message
// implies, and its diagnosis must name the claim and the request. A
// selector that fails at run time is recorded with the very error the
// scheduler aborts with.
func TestLiveDRADiagnosis(t *testing.T) {
	b200 := "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'"
	c := startDRA(t, &resourcev1.DeviceClass{
		// A class of NVIDIA's GPUs that no node has.
		ObjectMeta: metav1.ObjectMeta{Name: "b200.nvidia.com"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: "device.driver == 'gpu.nvidia.com' && " + b200}}}},
	})
	ctx := t.Context()
	client := c.Client()
	c.AddDRANode("dra-1", draH100(0), draH100(1))
	c.AddDRANode("dra-2", draH100(0), draA100MIG(1))
	const ns = "ml"
	c.CreateNamespace(ns)

	exact := func(class string, count int64, selector string) *resourcev1.ExactDeviceRequest {
		r := &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count}
		if selector != "" {
			r.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: selector}}}
		}
		return r
	}
	claim := func(name string, r resourcev1.DeviceRequest) { t.Helper(); createClaim(t, client, ns, name, r) }
	pod := func(name, claimName string) { t.Helper(); createClaimPod(t, client, ns, name, claimName) }
	// Three holders take the three H100s.
	for i := range 3 {
		name := fmt.Sprintf("hold-%d", i)
		claim(name, resourcev1.DeviceRequest{Name: "gpu", Exactly: exact(testcluster.DeviceClassGPU, 1, "")})
		pod(name, name)
	}
	waitPods(t, client.CoreV1().Pods(ns), func(ps map[string]*corev1.Pod) string {
		for i := range 3 {
			if p := ps[fmt.Sprintf("hold-%d", i)]; p == nil || p.Spec.NodeName == "" {
				return fmt.Sprintf("hold-%d is not bound", i)
			}
		}
		return ""
	})

	// Each failing pod, with the request its diagnosis must name and the
	// cause gpupack must find.
	type failing struct {
		request string
		cause   diagnose.Cause
	}
	want := map[string]failing{
		"held":    {"gpu", diagnose.Allocation},
		"b200":    {"gpu", diagnose.Placement},
		"noclass": {"gpu", diagnose.Placement},
		"big":     {"gpu", diagnose.Placement},
		"alts":    {"gpu/many", diagnose.Placement},
		// Its selector fails on the H100s, but the allocator skips devices
		// in use before it evaluates selectors.
		"broken-held": {"gpu", diagnose.Placement},
		// Its selector on the devices' memory capacity accepts no device
		// of the class: no GPU of the class could ever hold it.
		"bigmem": {"gpu", diagnose.NoSuchHardware},
		// Its profile selector accepts the 1g.5gb devices, its memory
		// selector none of them; the class's 3g.20gb device has the
		// memory.
		"migmem": {"gpu", diagnose.Memory},
	}
	claim("held", resourcev1.DeviceRequest{Name: "gpu", Exactly: exact(testcluster.DeviceClassGPU, 1, "")})
	claim("b200", resourcev1.DeviceRequest{Name: "gpu", Exactly: exact(testcluster.DeviceClassGPU, 1, b200)})
	claim("noclass", resourcev1.DeviceRequest{Name: "gpu", Exactly: exact("b200.nvidia.com", 1, "")})
	claim("big", resourcev1.DeviceRequest{Name: "gpu", Exactly: exact(testcluster.DeviceClassGPU, 3, "")})
	claim("alts", resourcev1.DeviceRequest{Name: "gpu", FirstAvailable: []resourcev1.DeviceSubRequest{
		{Name: "many", DeviceClassName: testcluster.DeviceClassGPU, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 3},
		{Name: "b200", DeviceClassName: testcluster.DeviceClassGPU, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1,
			Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: b200}}}},
	}})
	// Selectors that fail at run time (the attribute does not exist): on
	// the held H100s, and on the free MIG devices of dra-2.
	nosuch := "device.attributes['gpu.nvidia.com'].nosuch == 'x'"
	claim("broken-held", resourcev1.DeviceRequest{Name: "gpu", Exactly: exact(testcluster.DeviceClassGPU, 1, nosuch)})
	claim("broken", resourcev1.DeviceRequest{Name: "gpu", Exactly: exact(testcluster.DeviceClassMIG, 1, nosuch)})
	memoryAtLeast := func(q string) string {
		return "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('" + q + "')) >= 0"
	}
	claim("bigmem", resourcev1.DeviceRequest{Name: "gpu", Exactly: exact(testcluster.DeviceClassGPU, 1, memoryAtLeast("100Gi"))})
	migmem := exact(testcluster.DeviceClassMIG, 1, "device.attributes['gpu.nvidia.com'].profile == '1g.5gb'")
	migmem.Selectors = append(migmem.Selectors, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: memoryAtLeast("10Gi")}})
	claim("migmem", resourcev1.DeviceRequest{Name: "gpu", Exactly: migmem})
	for name := range want {
		pod(name, name)
	}
	pod("broken", "broken")
	pod("orphan", "nope") // its claim does not exist
	// It asks nvidia.com/gpu, which the GPU class serves through DRA
	// (extendedResourceName): every H100 is held.
	extended := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "extended"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox",
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kube.ResourceGPU: resource.MustParse("1")}}}}}}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, extended, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPods(t, client.CoreV1().Pods(ns), func(ps map[string]*corev1.Pod) string {
		for name := range want {
			if !unschedulable(ps[name]) {
				return name + " is not marked unschedulable"
			}
		}
		if !unschedulable(ps["extended"]) {
			return "extended is not marked unschedulable"
		}
		for _, c := range ps["broken"].Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "CEL runtime error") {
				return ""
			}
		}
		return fmt.Sprintf("broken has no scheduling error: %+v", ps["broken"].Status.Conditions)
	})

	loaded, err := kube.Load(ctx, client, gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := diagnose.Diagnose(loaded.Snapshot, nil)
	if err != nil {
		t.Fatal(err)
	}
	findings := map[string]diagnose.Finding{}
	for _, f := range rep.Findings {
		findings[f.Pod] = f
	}
	for name, w := range want {
		t.Run(name, func(t *testing.T) {
			key := ns + "/" + name
			f, ok := findings[key]
			if !ok {
				t.Fatalf("no finding for %s; warnings %q", key, loaded.Warnings)
			}
			msg := loaded.SchedulingFailures[key].Message
			if !strings.Contains(msg, "cannot allocate all claims") {
				t.Fatalf("the scheduler's message %q is not the DRA filter's", msg)
			}
			if strings.HasPrefix(name, "broken") && !strings.Contains(f.Fix[0], "CEL runtime error") {
				t.Errorf("the fix %q does not name the selector's error", f.Fix[0])
			}
			t.Logf("%s: %s; gpupack: %s", f.Cause, msg, f.Fix[0])
			if f.Summary != msg {
				t.Errorf("lines differ:\n  kube-scheduler: %s\n  gpupack:        %s (%s)", msg, f.Summary, f.StockNote)
			}
			if f.Cause != w.cause || !slices.Contains(diagnose.SchedulerCauses(msg), f.Cause) {
				t.Errorf("cause %s, want %s, among what the message implies: %v", f.Cause, w.cause, diagnose.SchedulerCauses(msg))
			}
			js, _ := json.Marshal(f)
			for _, words := range []string{"claim " + name + ", request " + w.request, `"claim":"` + name + `"`} {
				if !strings.Contains(string(js), words) {
					t.Errorf("the diagnosis does not name %q:\n%s", words, js)
				}
			}
		})
	}
	// The scheduler aborts the broken pod's cycle with the allocator's
	// error on whichever device it met first: gpupack recorded that very
	// error for that device.
	t.Run("broken", func(t *testing.T) {
		msg := loaded.SchedulingFailures[ns+"/broken"].Message
		var recorded map[string]string
		for _, p := range loaded.Snapshot.Pods {
			if p.Name == "broken" {
				recorded = p.Claims[0].Requests[0].SelectorErrors
			}
		}
		matched := false
		for _, e := range recorded {
			matched = matched || strings.HasSuffix(msg, e)
		}
		if !matched || len(recorded) != 3 {
			t.Errorf("the scheduler's error %q is none of gpupack's %q (want one per MIG device)", msg, recorded)
		}
		t.Logf("kube-scheduler: %s", msg)
		if f := findings[ns+"/broken"]; f.Cause != diagnose.Placement || len(f.Fix) == 0 || !strings.Contains(f.Fix[0], "CEL runtime error") {
			t.Errorf("broken: cause %s, fix %q; want placement naming the CEL error", f.Cause, f.Fix)
		}
	})
	t.Run("extended", func(t *testing.T) { checkExtendedWait(t, client, loaded, findings[ns+"/extended"]) })
	if f := findings[ns+"/orphan"]; f.Cause != diagnose.ClaimMissing || !strings.Contains(strings.Join(f.Fix, " "), "ResourceClaim ml/nope") {
		t.Errorf("orphan: cause %s, fix %q; want %s naming ResourceClaim ml/nope", f.Cause, f.Fix, diagnose.ClaimMissing)
	}
	if msg, ok := loaded.SchedulingFailures[ns+"/orphan"]; ok {
		t.Errorf("orphan has a scheduling failure %q; the scheduler should not try a pod whose claim does not exist", msg.Message)
	}
}

// checkExtendedWait checks the diagnosis of TestLiveDRADiagnosis's pod
// extended, which asks nvidia.com/gpu that the GPU class serves through
// DRA while holders take every H100: the scheduler's line word for word,
// and allocation, which the truth then proves: once a holder leaves, the
// scheduler binds it.
func checkExtendedWait(t *testing.T, client kubernetes.Interface, loaded *kube.State, f diagnose.Finding) {
	t.Helper()
	const ns = "ml"
	msg := loaded.SchedulingFailures[ns+"/extended"].Message
	t.Logf("%s: %s; gpupack: %q", f.Cause, msg, f.Fix)
	if f.Summary != msg {
		t.Errorf("lines differ:\n  kube-scheduler: %s\n  gpupack:        %s (%s)", msg, f.Summary, f.StockNote)
	}
	if f.Cause != diagnose.Allocation || !slices.Contains(diagnose.SchedulerCauses(msg), f.Cause) {
		t.Errorf("cause %s, want %s, among what the message implies: %v", f.Cause, diagnose.Allocation, diagnose.SchedulerCauses(msg))
	}
	if js, _ := json.Marshal(f); !strings.Contains(string(js), "hold-") {
		t.Errorf("the diagnosis names no holder of the H100s:\n%s", js)
	}
	// held would compete for the freed H100: it goes first.
	zero := int64(0)
	for _, name := range []string{"held", "hold-0"} {
		if err := client.CoreV1().Pods(ns).Delete(t.Context(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	waitPods(t, client.CoreV1().Pods(ns), func(ps map[string]*corev1.Pod) string {
		if p := ps["extended"]; p == nil || p.Spec.NodeName == "" {
			return "extended is not bound once hold-0 left"
		}
		return ""
	})
}
