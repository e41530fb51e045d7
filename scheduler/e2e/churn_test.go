package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/dataset/openb"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/sim"
)

// churnSpeedup is how many seconds of the trace's run times pass in one
// second of a churn run, and churnMaxRun the longest run a pod is given:
// the trace's run times (median 485 s, mean 7 h, longest 145 days) become
// a median of about 5 s, and the long pods end within a run. churnMaxRun is
// also the warm-up: from then on the pods running are those that arrived
// within it, as at any later time, so the measurement sees a steady state.
const (
	churnSpeedup = 100
	churnMaxRun  = 30 * time.Second
)

// churn is one churn comparison: a sample of the openb nodes, and an
// arrival stream offered to each scheduler in turn.
type churn struct {
	// Nodes is the size of the openb node sample (openbSample).
	Nodes int
	// Load is the offered GPU load over the sample's GPUs (sim.SteadyChurn).
	Load float64
	// Window is how long the run is measured after the warm-up
	// (churnMaxRun).
	Window time.Duration
}

// TestChurnAgainstMostAllocated is the churn comparison at a small size
// (10 openb nodes with 20 GPUs, 125 pods a run at an offered load of 0.9,
// 70 s of arrivals per scheduler; the draw offers 97% of the GPUs within
// the window, so pods queue for room); BenchmarkChurnAgainstMostAllocated
// is the full one. It asserts what must hold whatever the timing: every
// pod is bound in both runs, and no node's GPUs (nor, for gpupack, any
// single GPU) are ever held by more running pods than they can take.
func TestChurnAgainstMostAllocated(t *testing.T) {
	if testing.Short() {
		t.Skip("two churn runs of a minute each: not in -short")
	}
	runChurn(t, churn{Nodes: 10, Load: 0.9, Window: 40 * time.Second})
}

// BenchmarkChurnAgainstMostAllocated runs the churn comparison below
// saturation (an offered load of 0.8) and near it (0.95), on
// GPUPACK_BENCH_NODES openb nodes (60 by default, 149 GPUs) with
// GPUPACK_BENCH_WINDOW_SECONDS of measurement (120 by default) after the
// warm-up, and reports each scheduler's waits, mean GPU
// allocation and bindings per second. It needs the test cluster's
// binaries and gpupack-scheduler, as the tests do; run it with
// -benchtime 1x.
func BenchmarkChurnAgainstMostAllocated(b *testing.B) {
	nodes := testcluster.EnvInt(b, "GPUPACK_BENCH_NODES", 60)
	window := time.Duration(testcluster.EnvInt(b, "GPUPACK_BENCH_WINDOW_SECONDS", 120)) * time.Second
	for _, load := range []float64{0.8, 0.95} {
		b.Run(fmt.Sprintf("load=%.2f", load), func(b *testing.B) {
			for b.Loop() {
				stock, packed := runChurn(b, churn{Nodes: nodes, Load: load, Window: window})
				for _, r := range []churnResult{stock, packed} {
					b.ReportMetric(r.wait(0.95).Seconds(), r.profile+"-p95-wait-s")
					b.ReportMetric(r.meanAllocation, r.profile+"-allocation-ratio")
					b.ReportMetric(r.boundPerSecond, r.profile+"-bound/s")
				}
			}
		})
	}
}

// runChurn offers the same arrival stream to the stock profile with
// NodeResourcesFit scoring MostAllocated (as in
// TestOpenbAgainstMostAllocated) and then to the gpupack profile, on one
// control plane, each on its own fresh copy of the node sample, and logs
// and returns what each run measured.
//
// The stream is sim.SteadyChurn over the openb default pod list, as the
// simulator's churn draws it: Poisson arrivals of listed pods at the rate
// that offers c.Load times the sample's GPUs, each running for its trace
// run time divided by churnSpeedup, at most churnMaxRun; kwok completes
// each pod that long after it runs (testcluster.AnnotationCompletesAfter).
// Pods ask for what stock Kubernetes can (openbPod: a fraction of a GPU
// takes a whole one), and the load counts them so; listed pods that no
// node of the sample could hold are left out, so that every pod can be
// bound. SteadyChurn's clock counts milliseconds here.
//
// A watch on each run's pods records when each is first seen bound and
// first seen Succeeded. A pod's wait is from the request that creates it
// to its binding; waits count the pods that arrive in the window, and the
// mean allocation and the bindings per second are taken over the window.
func runChurn(t testing.TB, c churn) (stock, packed churnResult) {
	t.Helper()
	schedulerBinary(t) // fail or skip before starting a cluster
	catalogue := gpu.Default()
	sample := openbSample(t, catalogue, c.Nodes)
	var sampleGPUs int64
	for _, n := range sample {
		sampleGPUs += int64(len(n.GPUs))
	}
	arrivals := churnArrivals(t, sample, c, gpu.Milli(sampleGPUs)*gpu.WholeGPU)

	tc := testcluster.Start(t, testcluster.Options{})
	cs := client(t, tc)
	run := func(profile, config string) churnResult {
		namespace := fmt.Sprintf("%s-%.0f", profile, 100*c.Load)
		nodes := make([]*corev1.Node, len(sample))
		for i, n := range sample {
			nodes[i] = openbNode(t, catalogue, n, fmt.Sprintf("%s-%03d", namespace, i), namespace)
		}
		testcluster.Parallel(t, len(nodes), func(i int) error {
			_, err := cs.CoreV1().Nodes().Create(t.Context(), nodes[i], metav1.CreateOptions{})
			return err
		})
		checkOnlyNodes(t, cs, len(nodes))
		tc.CreateNamespace(namespace)
		pods := make([]*corev1.Pod, len(arrivals))
		for i, a := range arrivals {
			pods[i] = openbPod(t, catalogue, namespace, fmt.Sprintf("p-%05d", i), a.pod)
			pods[i].Spec.SchedulerName = profile
			pods[i].Annotations = map[string]string{testcluster.AnnotationCompletesAfter: a.run.String()}
		}
		events := watchChurn(t, cs, namespace)
		port := testcluster.CandidatePort()
		proc := runScheduler(t, tc, "scheduler-"+namespace, config, fmt.Sprintf("--secure-port=%d", port), "--authorization-always-allow-paths=/metrics")
		waitSchedulerUp(t, cs, proc, namespace, profile)
		start, created := offer(t, cs, arrivals, pods)
		events.waitBound(t, proc, len(created))
		t.Logf("%s scheduler's metrics at the end:\n%s", profile, schedulerMetrics(t, port))
		proc.Stop()
		r := events.measure(c, start, created, sampleGPUs)
		r.profile = profile
		r.cpuPerPod = proc.CPUTime() / time.Duration(len(pods))
		checkChurnAllocation(t, nodes, events.log(), profile == schedulerName)
		clearRun(t, cs, namespace)
		return r
	}
	stock = run(mostAllocated, mostAllocatedConfig(t, tc.Kubeconfig()))
	packed = run(schedulerName, SchedulerConfig(t, tc.Kubeconfig(), ""))
	t.Logf("openb default churn, offered load %.2f of %d GPUs on %d nodes (%.1f%% offered within the window as drawn), %d arrivals over %v (warm-up %v, window %v):\n%s\n%s\n%s: p95 wait %.2fx %s's, bound/s %.0f%% of %s's",
		c.Load, sampleGPUs, len(sample), 100*offeredInWindow(arrivals, c.Window, sampleGPUs), len(arrivals), churnMaxRun+c.Window, churnMaxRun, c.Window, stock, packed,
		schedulerName, packed.wait(0.95).Seconds()/stock.wait(0.95).Seconds(), mostAllocated, 100*packed.boundPerSecond/stock.boundPerSecond, mostAllocated)
	return stock, packed
}

// checkOnlyNodes fails t unless the cluster holds want nodes, the run's
// own: a scheduler evaluates every node of the cluster, its pool's or not,
// and kwok keeps up each node's heartbeat and pods, so a run that found an
// earlier run's nodes would be measured on a busier control plane and a
// scheduler with twice the nodes to filter.
func checkOnlyNodes(t testing.TB, cs kubernetes.Interface, want int) {
	t.Helper()
	list, err := cs.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != want {
		t.Fatalf("the cluster holds %d nodes, not the run's %d: an earlier run's are left", len(list.Items), want)
	}
}

// clearRun deletes a finished run's pods and then its nodes (those of the
// namespace's pool), and waits until they are gone, so that the next run
// has the control plane to itself (checkOnlyNodes).
func clearRun(t testing.TB, cs kubernetes.Interface, namespace string) {
	t.Helper()
	deletePods(t, cs, namespace)
	pool := metav1.ListOptions{LabelSelector: poolLabel + "=" + namespace}
	left := -1
	err := wait.PollUntilContextTimeout(t.Context(), time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		if left != 0 {
			if err := cs.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, pool); err != nil {
				return false, nil // tried again on the next poll
			}
		}
		list, err := cs.CoreV1().Nodes().List(ctx, pool)
		if err != nil {
			return false, nil
		}
		left = len(list.Items)
		return left == 0, nil
	})
	if err != nil {
		t.Fatalf("%s: %d nodes left after deletion: %v", namespace, left, err)
	}
}

// churnMetrics are the scheduler's metrics that say where a pod's wait
// goes: attempts by result, pods moved into the queues by event, the
// attempts' and the extension points' durations, attempts per pod.
var churnMetrics = []string{
	"scheduler_schedule_attempts_total",
	"scheduler_queue_incoming_pods_total",
	"scheduler_scheduling_attempt_duration_seconds_sum",
	"scheduler_scheduling_attempt_duration_seconds_count",
	"scheduler_framework_extension_point_duration_seconds_sum",
	"scheduler_framework_extension_point_duration_seconds_count",
	"scheduler_pod_scheduling_attempts_sum",
	"scheduler_pod_scheduling_attempts_count",
	"scheduler_pending_pods",
}

// schedulerMetrics reads the churnMetrics lines from the scheduler's
// /metrics on port; what it cannot read is said in their place.
func schedulerMetrics(t testing.TB, port int) string {
	t.Helper()
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // the scheduler's self-signed certificate
	resp, err := hc.Get(fmt.Sprintf("https://127.0.0.1:%d/metrics", port))
	if err != nil {
		return fmt.Sprintf("(no metrics: %v)", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("(no metrics: %s, %v)", resp.Status, err)
	}
	var b strings.Builder
	for line := range strings.SplitSeq(string(body), "\n") {
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		if slices.Contains(churnMetrics, name) && !strings.HasSuffix(line, " 0") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// offeredInWindow is the GPU-time the drawn stream asks for within the
// window (each pod from its arrival for its run time) over the sample's
// GPU-time: the Poisson draw offers more or less than the nominal load,
// and a run's mean allocation is to be read against this.
func offeredInWindow(arrivals []arrival, window time.Duration, sampleGPUs int64) float64 {
	from, to := churnMaxRun, churnMaxRun+window
	var gpuSeconds float64
	for _, a := range arrivals {
		if start, end := max(a.at, from), min(a.at+a.run, to); end > start {
			gpuSeconds += float64(wholeGPUs(a.pod)) * (end - start).Seconds()
		}
	}
	return gpuSeconds / window.Seconds() / float64(sampleGPUs)
}

// arrival is one pod of the stream: when it arrives after the run's
// start, what it asks for, and how long it runs.
type arrival struct {
	at, run time.Duration
	pod     *cluster.Pod
}

// churnArrivals draws the stream (see runChurn) from the openb default pod
// list for the sample, whose GPUs are capacity.
func churnArrivals(t testing.TB, sample []*cluster.Node, c churn, capacity gpu.Milli) []arrival {
	t.Helper()
	catalogue := gpu.Default()
	f, file, err := openb.Open(openb.DefaultPods)
	if err != nil {
		t.Fatal(err)
	}
	listed, err := cluster.LoadTracePods(f, file, catalogue)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	f, file, err = openb.Open(openb.DefaultPods)
	if err != nil {
		t.Fatal(err)
	}
	lifetimes, err := cluster.LoadTraceLifetimes(f, file)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var pods []*cluster.Pod
	var runs []cluster.TraceLifetime // milliseconds
	for i, p := range listed {
		asked := asWholeGPUs(p)
		if !fitsSomeNode(asked, sample) {
			continue
		}
		run := min(time.Duration(float64(lifetimes[i].RunSeconds())/churnSpeedup*float64(time.Second)), churnMaxRun)
		pods = append(pods, asked)
		runs = append(runs, cluster.TraceLifetime{DeletedSeconds: run.Milliseconds()})
	}
	steady := sim.SteadyChurn{Load: c.Load, WarmupSeconds: float64(churnMaxRun.Milliseconds()), WindowSeconds: float64(c.Window.Milliseconds()), Seed: 1}
	drawn, drawnRuns, err := steady.Workload(pods, runs, capacity)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	out := make([]arrival, len(drawn))
	for i, p := range drawn {
		l := drawnRuns[i]
		out[i] = arrival{at: time.Duration(l.CreatedSeconds) * time.Millisecond, run: time.Duration(l.RunSeconds()) * time.Millisecond, pod: p}
	}
	return out
}

// asWholeGPUs is the trace pod as openbPod asks for it: a fraction of a
// GPU as one whole GPU.
func asWholeGPUs(p *cluster.Pod) *cluster.Pod {
	cp := *p
	if n := wholeGPUs(p); n > 0 {
		cp.GPU = cluster.Request{Kind: cluster.WholeGPUs, Count: int(n)}
	}
	return &cp
}

// fitsSomeNode reports whether an empty node of the sample has the pod's
// GPUs (of a model it accepts), CPU and memory.
func fitsSomeNode(p *cluster.Pod, sample []*cluster.Node) bool {
	for _, n := range sample {
		modelOK := len(p.GPUModels) == 0 || slices.Contains(p.GPUModels, n.GPUModel().Name)
		if modelOK && int64(len(n.GPUs)) >= wholeGPUs(p) && n.CPU >= p.CPU && n.Memory >= p.Memory {
			return true
		}
	}
	return false
}

// waitSchedulerUp creates a CPU-only pod for the profile that completes at
// once and waits until it is bound: the scheduler has synced its informers
// before the first arrival.
func waitSchedulerUp(t testing.TB, cs kubernetes.Interface, proc *testcluster.Process, namespace, profile string) {
	t.Helper()
	probe := gpuPod(namespace, "scheduler-up", nil)
	probe.Spec.SchedulerName = profile
	probe.Spec.NodeSelector = map[string]string{poolLabel: namespace}
	probe.Annotations = map[string]string{testcluster.AnnotationCompletesAfter: "0s"}
	if _, err := cs.CoreV1().Pods(namespace).Create(t.Context(), probe, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := proc.Exited(); err != nil {
			return false, err
		}
		p, err := cs.CoreV1().Pods(namespace).Get(ctx, probe.Name, metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != "", nil
	})
	if err != nil {
		t.Fatalf("%s: the probe pod was not bound: %v", namespace, err)
	}
}

// offer creates each pod at its arrival time after now, each in its own
// goroutine so that a slow request does not delay the next, and returns
// when it started and when each create request was sent, by pod name.
func offer(t testing.TB, cs kubernetes.Interface, arrivals []arrival, pods []*corev1.Pod) (time.Time, map[string]time.Time) {
	t.Helper()
	start := time.Now()
	var mu sync.Mutex
	var wg sync.WaitGroup
	created := make(map[string]time.Time, len(pods))
	errs := make(chan error, len(pods))
	for i, a := range arrivals {
		time.Sleep(time.Until(start.Add(a.at)))
		wg.Go(func() {
			now := time.Now()
			if _, err := cs.CoreV1().Pods(pods[i].Namespace).Create(t.Context(), pods[i], metav1.CreateOptions{}); err != nil {
				errs <- err
				return
			}
			mu.Lock()
			created[pods[i].Name] = now
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	return start, created
}

// churnEvent is a pod first seen bound or first seen Succeeded.
type churnEvent struct {
	pod       *corev1.Pod
	completed bool // Succeeded; else bound
	at        time.Time
}

// churnWatch records a namespace's churnEvents in the apiserver's order,
// and which pods the scheduler found no room for at least once.
type churnWatch struct {
	mu                              sync.Mutex
	events                          []churnEvent
	bound, completed, unschedulable map[string]bool
	stop                            func()
}

// watchChurn starts recording the namespace's events; call it before the
// scheduler starts.
func watchChurn(t testing.TB, cs kubernetes.Interface, namespace string) *churnWatch {
	t.Helper()
	w := watchPods(t, cs, namespace)
	cw := &churnWatch{bound: map[string]bool{}, completed: map[string]bool{}, unschedulable: map[string]bool{}, stop: w.Stop}
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || p.Name == "scheduler-up" {
				continue
			}
			now := time.Now()
			cw.mu.Lock()
			if unschedulable(p) {
				cw.unschedulable[p.Name] = true
			}
			if p.Spec.NodeName != "" && !cw.bound[p.Name] {
				cw.bound[p.Name] = true
				cw.events = append(cw.events, churnEvent{pod: p, at: now})
			}
			if p.Status.Phase == corev1.PodSucceeded && !cw.completed[p.Name] {
				cw.completed[p.Name] = true
				cw.events = append(cw.events, churnEvent{pod: p, completed: true, at: now})
			}
			cw.mu.Unlock()
		}
	}()
	return cw
}

// waitBound waits until want pods have been seen bound, failing if the
// scheduler exits first, and stops the watch.
func (cw *churnWatch) waitBound(t testing.TB, proc *testcluster.Process, want int) {
	t.Helper()
	bound := 0
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, 15*time.Minute, true, func(context.Context) (bool, error) {
		if err := proc.Exited(); err != nil {
			return false, err
		}
		cw.mu.Lock()
		bound = len(cw.bound)
		cw.mu.Unlock()
		return bound >= want, nil
	})
	cw.stop()
	if err != nil {
		t.Fatalf("%d of %d pods seen bound: %v", bound, want, err)
	}
}

// log returns the events recorded.
func (cw *churnWatch) log() []churnEvent {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	return slices.Clone(cw.events)
}

// churnResult is what one scheduler's run measured.
type churnResult struct {
	profile string
	// waits are the waits of the pods that arrived in the window, sorted;
	// unschedulable how many of them the scheduler found no room for at
	// least once (PodScheduled False, Unschedulable).
	waits         []time.Duration
	unschedulable int
	// byGPUs are the same waits by the GPUs the pod asks for, sorted.
	byGPUs map[int64][]time.Duration
	// meanAllocation is the mean over the window of the GPUs held by
	// running pods over the sample's GPUs.
	meanAllocation float64
	// boundPerSecond is the bindings in the window over its length;
	// arrivedPerSecond the arrivals.
	boundPerSecond, arrivedPerSecond float64
	cpuPerPod                        time.Duration
}

// measure computes the run's figures from its events (see runChurn).
func (cw *churnWatch) measure(c churn, start time.Time, created map[string]time.Time, sampleGPUs int64) churnResult {
	from := start.Add(churnMaxRun)
	to := from.Add(c.Window)
	in := func(at time.Time) bool { return !at.Before(from) && at.Before(to) }
	cw.mu.Lock()
	unschedulable := maps.Clone(cw.unschedulable)
	cw.mu.Unlock()
	r := churnResult{byGPUs: map[int64][]time.Duration{}}
	held := int64(0)
	var gpuSeconds float64
	last := from
	for _, ev := range cw.log() {
		if ev.at.After(from) {
			end := ev.at
			if end.After(to) {
				end = to
			}
			if end.After(last) {
				gpuSeconds += float64(held) * end.Sub(last).Seconds()
				last = end
			}
		}
		q := ev.pod.Spec.Containers[0].Resources.Requests[kube.ResourceGPU]
		if ev.completed {
			held -= q.Value()
			continue
		}
		held += q.Value()
		if in(ev.at) {
			r.boundPerSecond++
		}
		if at := created[ev.pod.Name]; in(at) {
			r.waits = append(r.waits, ev.at.Sub(at))
			r.byGPUs[q.Value()] = append(r.byGPUs[q.Value()], ev.at.Sub(at))
			r.arrivedPerSecond++
			if unschedulable[ev.pod.Name] {
				r.unschedulable++
			}
		}
	}
	if last.Before(to) {
		gpuSeconds += float64(held) * to.Sub(last).Seconds()
	}
	slices.Sort(r.waits)
	for _, ws := range r.byGPUs {
		slices.Sort(ws)
	}
	r.meanAllocation = gpuSeconds / c.Window.Seconds() / float64(sampleGPUs)
	r.boundPerSecond /= c.Window.Seconds()
	r.arrivedPerSecond /= c.Window.Seconds()
	return r
}

// wait is the q-quantile of the waits.
func (r churnResult) wait(q float64) time.Duration { return quantile(r.waits, q) }

// quantile is the q-quantile of sorted (nearest rank); 0 when empty.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[max(0, int(math.Ceil(q*float64(len(sorted))))-1)]
}

func (r churnResult) String() string {
	return fmt.Sprintf("%s: wait p50 %v, p95 %v, p99 %v (%d pods arrived in the window, %.2f/s; %d found no room at first); mean GPU allocation %.1f%%; %.2f pods bound/s; scheduler CPU %v per pod",
		r.profile, r.wait(0.5).Round(time.Millisecond), r.wait(0.95).Round(time.Millisecond), r.wait(0.99).Round(time.Millisecond),
		len(r.waits), r.arrivedPerSecond, r.unschedulable, 100*r.meanAllocation, r.boundPerSecond, r.cpuPerPod.Round(time.Microsecond)) +
		r.byShape()
}

// byShape is the waits' count, p95 and p99 by the GPUs asked for.
func (r churnResult) byShape() string {
	var b strings.Builder
	for _, n := range slices.Sorted(maps.Keys(r.byGPUs)) {
		ws := r.byGPUs[n]
		fmt.Fprintf(&b, "; %d GPUs: %d pods, p95 %v, p99 %v", n, len(ws), quantile(ws, 0.95).Round(time.Millisecond), quantile(ws, 0.99).Round(time.Millisecond))
	}
	return b.String()
}

// checkChurnAllocation fails t with what churnOverAllocation finds.
func checkChurnAllocation(t testing.TB, nodes []*corev1.Node, events []churnEvent, devices bool) {
	t.Helper()
	if errs := churnOverAllocation(nodes, events, devices); len(errs) > 0 {
		t.Errorf("over-allocation in %d cases:\n%s", len(errs), strings.Join(errs[:min(len(errs), 20)], "\n"))
	}
}

// churnOverAllocation replays a run's events in the apiserver's order and
// says where a node's GPUs are held by running pods beyond its allocatable
// nvidia.com/gpu and, when devices is set (gpupack's run), where a GPU
// pod does not record as many GPUs of its node as it asks for, or a GPU is
// held by two running pods at once.
func churnOverAllocation(nodes []*corev1.Node, events []churnEvent, devices bool) []string {
	capacity := map[string]int64{}
	for _, n := range nodes {
		q := n.Status.Allocatable[kube.ResourceGPU]
		capacity[n.Name] = q.Value()
	}
	held := map[string]int64{}
	holder := map[string]string{} // node/GPU -> pod
	var errs []string
	for _, ev := range events {
		p := ev.pod
		q := p.Spec.Containers[0].Resources.Requests[kube.ResourceGPU]
		gpus := q.Value()
		var devs []cluster.Device
		if devices && gpus > 0 {
			var err error
			if devs, err = wellknown.ParseDevices(p.Annotations[wellknown.AnnotationGPUDevices]); err != nil || int64(len(devs)) != gpus {
				errs = append(errs, fmt.Sprintf("pod %s asks for %d GPUs and records %q (%v)", p.Name, gpus, p.Annotations[wellknown.AnnotationGPUDevices], err))
				devs = nil
			}
		}
		if ev.completed {
			held[p.Spec.NodeName] -= gpus
			for _, d := range devs {
				delete(holder, fmt.Sprintf("%s/%d", p.Spec.NodeName, d.GPU))
			}
			continue
		}
		if held[p.Spec.NodeName] += gpus; held[p.Spec.NodeName] > capacity[p.Spec.NodeName] {
			errs = append(errs, fmt.Sprintf("binding pod %s makes %d GPUs held on %s, which has %d", p.Name, held[p.Spec.NodeName], p.Spec.NodeName, capacity[p.Spec.NodeName]))
		}
		for _, d := range devs {
			key := fmt.Sprintf("%s/%d", p.Spec.NodeName, d.GPU)
			if other, ok := holder[key]; ok || int64(d.GPU) >= capacity[p.Spec.NodeName] {
				errs = append(errs, fmt.Sprintf("pod %s records GPU %s, held by %q or beyond the node's %d", p.Name, key, other, capacity[p.Spec.NodeName]))
			}
			holder[key] = p.Name
		}
	}
	return errs
}

// TestChurnOverAllocation: the replay finds a node held beyond its GPUs, a
// GPU held twice and a missing record, and accepts a GPU freed by a
// completion before it is bound again.
func TestChurnOverAllocation(t *testing.T) {
	node := func(name string, gpus int64) *corev1.Node {
		n, err := testcluster.GPUNode{Product: "NVIDIA-H100-80GB-HBM3", MemoryMiB: 81559, GPUs: gpus}.Object(name)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	nodes := []*corev1.Node{node("a", 2)}
	pod := func(name string, gpus int64, devices string) *corev1.Pod {
		p := gpuPod("ns", name, map[string]int64{string(kube.ResourceGPU): gpus})
		p.Spec.NodeName = "a"
		if devices != "" {
			p.Annotations = map[string]string{wellknown.AnnotationGPUDevices: devices}
		}
		return p
	}
	bind := func(p *corev1.Pod) churnEvent { return churnEvent{pod: p} }
	done := func(p *corev1.Pod) churnEvent { return churnEvent{pod: p, completed: true} }
	p1, p2, p3 := pod("p1", 1, "0"), pod("p2", 1, "1"), pod("p3", 1, "0")
	cases := map[string]struct {
		events  []churnEvent
		devices bool
		want    []string
	}{
		"a GPU freed, then bound again": {events: []churnEvent{bind(p1), bind(p2), done(p1), bind(p3)}, devices: true},
		"the node held beyond its GPUs": {events: []churnEvent{bind(p1), bind(p2), bind(p3)}, want: []string{
			"binding pod p3 makes 3 GPUs held on a, which has 2"}},
		"a GPU held twice": {events: []churnEvent{bind(p1), bind(p3)}, devices: true, want: []string{
			`pod p3 records GPU a/0, held by "p1" or beyond the node's 2`}},
		"no record": {events: []churnEvent{bind(pod("p4", 2, ""))}, devices: true, want: []string{
			`pod p4 asks for 2 GPUs and records "" (gpupack.io/gpu-devices="": GPU "" is not an index (want e.g. "3", "0,1" or "2:4"))`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, churnOverAllocation(nodes, tc.events, tc.devices)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
