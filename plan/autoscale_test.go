package plan

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metricsql"
	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/demo"
	"github.com/gpupack/gpupack/usage"
)

// autoscaleCluster is a ranker served from two H100 nodes (instance type
// labelled), a nightly Job that suits spot, and a notebook.
func autoscaleCluster(t *testing.T) (*cluster.Snapshot, *usage.Facts) {
	t.Helper()
	labels := map[string]string{"gpupack.io/pool": "h100", "node.kubernetes.io/instance-type": "p5.48xlarge", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
	taint := cluster.Taint{Key: "nvidia.com/gpu", Effect: cluster.NoSchedule}
	h1, h2 := node("h1", "H100-80GB", 8, cluster.Exclusive, labels), node("h2", "H100-80GB", 8, cluster.Exclusive, labels)
	h1.Taints, h2.Taints = []cluster.Taint{taint}, []cluster.Taint{taint}
	prod := map[string]string{"app": "ranker", "app.kubernetes.io/component": "inference", "environment": "production"}
	pods := []*cluster.Pod{
		pod("shop", "ranker-0", "h1", 1, prod), pod("shop", "ranker-1", "h1", 1, prod), pod("shop", "ranker-2", "h1", 1, prod),
		pod("ml", "nightly-x", "h2", 2, map[string]string{"job-name": "nightly"}),
		pod("ml", "notebook-a", "h2", 1, nil),
	}
	for _, p := range pods {
		p.Tolerations = []cluster.Toleration{{Key: "nvidia.com/gpu", Operator: "Exists", Effect: cluster.NoSchedule}}
	}
	s, err := cluster.NewSnapshot(gpu.Default(), []*cluster.Node{h1, h2}, pods)
	if err != nil {
		t.Fatal(err)
	}
	busy := make([]float64, 24)
	for h := range busy {
		busy[h] = 0.9
	}
	quiet := append([]float64(nil), busy...)
	for h := range 12 {
		quiet[h] = 0
	}
	o := obs(0.9, usage.Busy, 70, 0)
	u := &usage.Facts{Window: 24 * time.Hour, Pods: map[string]usage.PodFacts{}}
	for i, p := range pods[:3] {
		u.Pods[p.Key()] = o
		if i == 2 {
			o.HourlyActivity = quiet
		} else {
			o.HourlyActivity = busy
		}
		u.Pods[p.Key()] = o
	}
	u.Pods["ml/nightly-x"] = obs(0.9, usage.Busy, 150, 0)
	u.Pods["ml/notebook-a"] = obs(0.01, usage.IdleHeld, 3, 0.95)
	return s, u
}

func rankerMetric() AppMetric {
	return AppMetric{Workload: "shop/ranker", Kind: "StatefulSet", Metric: "queue_depth", Query: `sum(vllm:num_requests_waiting{namespace="shop"})`, Target: 8}
}

// TestAutoscaling checks the ScaledObject's replica range and node pool,
// and the NodePools' limits, spot split and consolidation.
func TestAutoscaling(t *testing.T) {
	s, u := autoscaleCluster(t)
	o := DefaultOptions()
	o.Autoscaling = &AutoscalingInput{Prometheus: "http://prometheus.monitoring:9090", Workloads: []AppMetric{rankerMetric()}}
	pl, err := Make(context.Background(), s, u, o)
	if err != nil {
		t.Fatal(err)
	}
	a := pl.Autoscaling
	if err := a.Check(); err != nil {
		t.Fatal(err)
	}
	type soView struct {
		Workload, NodePool string
		Min, Max           int
		GPUs               float64
	}
	var gotSO []soView
	for _, so := range a.ScaledObjects {
		gotSO = append(gotSO, soView{so.Workload, so.NodePool, so.MinReplicas, so.MaxReplicas, so.GPUsPerReplica})
	}
	// Hourly busy ranker pods range 2..3; 3 x 1.2 -> 4.
	if diff := cmp.Diff([]soView{{"shop/ranker", "gpupack-h100-whole", 2, 4, 1}}, gotSO); diff != "" {
		t.Errorf("ScaledObjects (-want +got):\n%s", diff)
	}
	type npView struct {
		Name          string
		Spot          bool
		Limit         int
		Consolidation string
		Types         []string
		Workloads     []string
	}
	var gotNP []npView
	for _, np := range a.NodePools {
		gotNP = append(gotNP, npView{np.Name, np.Spot, np.GPULimit, np.Consolidation, np.InstanceTypes, np.Workloads})
		if len(np.Taints) != 1 || np.Labels["nvidia.com/gpu.product"] != "NVIDIA-H100-80GB-HBM3" {
			t.Errorf("NodePool %s: taints %v, labels %v: want the nodes' common GPU taint and product label", np.Name, np.Taints, np.Labels)
		}
		// A node labelled with a mig-parted config starts tainted until
		// mig-manager has applied it (gpu-operator issue 2670).
		wantStartup := np.Labels[MIGConfigLabel] != ""
		if got := len(np.StartupTaints) == 1 && np.StartupTaints[0].Key == wellknown.TaintMIGPending && np.StartupTaints[0].Effect == cluster.NoSchedule; got != wantStartup {
			t.Errorf("NodePool %s (labels %v): startup taints %v, want the mig-pending taint: %v", np.Name, np.Labels, np.StartupTaints, wantStartup)
		}
	}
	var names []string
	for _, np := range a.NodePools {
		names = append(names, np.Name)
	}
	// The ranker's 4 GPUs plus whatever the notebook takes, with headroom,
	// fit one 8-GPU node; the nightly Job gets a spot NodePool of its own.
	want := []npView{}
	for _, np := range gotNP {
		if np.Spot {
			want = append(want, npView{"gpupack-h100-whole-spot", true, 8, WhenEmpty, []string{"p5.48xlarge"}, []string{"ml/nightly"}})
		}
	}
	if len(want) != 1 {
		t.Fatalf("NodePools %v: want one spot NodePool for ml/nightly", names)
	}
	for _, np := range gotNP {
		if np.Spot {
			if diff := cmp.Diff(want[0], np); diff != "" {
				t.Errorf("spot NodePool (-want +got):\n%s", diff)
			}
			continue
		}
		if !strings.Contains(strings.Join(np.Workloads, ","), "shop/ranker") && np.Name == "gpupack-h100-whole" {
			t.Errorf("NodePool %s: workloads %v: want shop/ranker on it", np.Name, np.Workloads)
		}
	}
	var ranker NodePool
	for _, np := range a.NodePools {
		if np.Name == "gpupack-h100-whole" {
			ranker = np
		}
	}
	if ranker.Name != "gpupack-h100-whole" || ranker.Spot || ranker.Weight == 0 || ranker.GPUShares < 4 || ranker.GPULimit%8 != 0 {
		t.Errorf("first NodePool %+v: want an on-demand gpupack-h100-whole, weighted above spot, needing at least the ranker's 4 GPUs, limit in whole nodes", ranker)
	}
	ys, err := pl.KEDAScaledObjects()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(ys), "DCGM") || !strings.Contains(string(ys), "vllm:num_requests_waiting") || !strings.Contains(string(ys), "threshold: \"8\"") {
		t.Errorf("ScaledObjects YAML does not scale on the application metric:\n%s", ys)
	}
}

// TestAutoscalingCheck checks that Check finds a ScaledObject whose pods
// Karpenter could not make room for.
func TestAutoscalingCheck(t *testing.T) {
	s, u := autoscaleCluster(t)
	o := DefaultOptions()
	o.Autoscaling = &AutoscalingInput{Prometheus: "http://prometheus.monitoring:9090", Workloads: []AppMetric{rankerMetric()}}
	pl, err := Make(context.Background(), s, u, o)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		break_ func(a *Autoscaling)
		want   string
	}{
		"too many replicas": {func(a *Autoscaling) { a.ScaledObjects[0].MaxReplicas = 100 }, "beyond NodePool"},
		"too much CPU":      {func(a *Autoscaling) { a.ScaledObjects[0].Replica.CPU = 1000000 }, "CPU"},
		"too many GPUs":     {func(a *Autoscaling) { a.ScaledObjects[0].Replica.Count = 9 }, "9 GPUs"},
		"selector unmet":    {func(a *Autoscaling) { a.ScaledObjects[0].Replica.NodeSelector = map[string]string{"x": "y"} }, "x=y"},
		"no NodePool":       {func(a *Autoscaling) { a.ScaledObjects[0].NodePool = "gone" }, "not emitted"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := *pl.Autoscaling
			a.ScaledObjects = append([]ScaledObject(nil), a.ScaledObjects...)
			tc.break_(&a)
			err := a.Check()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check() = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// TestAutoscalingFitsRandomClusters checks on random clusters, every
// serving workload scaled, that every ScaledObject fits its NodePool.
// Replicas ask for the same and run in one pool, as a Deployment's do.
func TestAutoscalingFitsRandomClusters(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		s, u := randomCluster(t, rng)
		plain, err := Make(context.Background(), s, u, DefaultOptions())
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		in := &AutoscalingInput{Prometheus: "http://prometheus:9090"}
		for _, d := range plain.Decisions {
			if !d.w.Job && d.Role != Training && d.Role != Interactive && replicasAlike(s, d) {
				in.Workloads = append(in.Workloads, AppMetric{Workload: d.Workload, Kind: "Deployment", Metric: "tokens_per_second", Query: "sum(rate(tokens_total[2m]))", Target: 100})
			}
		}
		o := DefaultOptions()
		o.Autoscaling = in
		pl, err := Make(context.Background(), s, u, o)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if err := pl.Autoscaling.Check(); err != nil {
			t.Errorf("seed %d: %v", seed, err)
		}
		// A replica is left unscaled only where the plan itself leaves a
		// pod of it pending: its nodes of that role are too small.
		for _, w := range pl.Warnings {
			workload, found := strings.CutPrefix(w, "autoscaling: no ScaledObject for ")
			if !found {
				continue
			}
			workload, _, _ = strings.Cut(workload, ":")
			if !slices.ContainsFunc(pl.Proof.StillPending, func(p string) bool { return strings.HasPrefix(p, strings.Split(workload, "/")[0]+"/") }) {
				t.Errorf("seed %d: %s, though the proof places all its pods", seed, w)
			}
		}
	}
}

// TestAutoscalingInputRefused checks that bad autoscaling input is refused
// with an error naming the entry.
func TestAutoscalingInputRefused(t *testing.T) {
	s, u := autoscaleCluster(t)
	cases := map[string]struct {
		edit func(in *AutoscalingInput)
		want string
	}{
		"GPU utilisation": {func(in *AutoscalingInput) { in.Workloads[0].Query = "avg(DCGM_FI_DEV_GPU_UTIL)" }, "GPU utilisation"},
		"no prometheus":   {func(in *AutoscalingInput) { in.Prometheus = "" }, "prometheus"},
		"zero target":     {func(in *AutoscalingInput) { in.Workloads[0].Target = 0 }, "target"},
		"bad kind":        {func(in *AutoscalingInput) { in.Workloads[0].Kind = "Job" }, "ScaledJob"},
		"unknown":         {func(in *AutoscalingInput) { in.Workloads[0].Workload = "shop/rankr" }, "shop/rankr"},
		"a Job":           {func(in *AutoscalingInput) { in.Workloads[0].Workload = "ml/nightly" }, "is a Job"},
		"twice":           {func(in *AutoscalingInput) { in.Workloads = append(in.Workloads, in.Workloads[0]) }, "twice"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := &AutoscalingInput{Prometheus: "http://prometheus:9090", Workloads: []AppMetric{rankerMetric()}}
			tc.edit(in)
			o := DefaultOptions()
			o.Autoscaling = in
			_, err := Make(context.Background(), s, u, o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Make() = %v, want an error saying %q", err, tc.want)
			}
		})
	}
	if _, err := ParseAutoscaling([]byte("apiVersion: gpupack.io/v1alpha1\nkind: Autoscaling\nprometheus: http://p:9090\nworkloads: [{workload: a/b, kind: Deployment, metric: m, query: q, target: 1, extra: 1}]\n"), "a.yaml", parsePromQL); err == nil || !strings.Contains(err.Error(), "a.yaml") {
		t.Errorf("ParseAutoscaling with an unknown field = %v, want an error naming a.yaml", err)
	}
}

// TestParseAutoscalingQuery checks that a query that does not parse as
// PromQL is refused at its file and line, before KEDA would send it to
// Prometheus, and that the demo's queries parse.
func TestParseAutoscalingQuery(t *testing.T) {
	file := `apiVersion: gpupack.io/v1alpha1
kind: Autoscaling
prometheus: http://prometheus:9090
workloads:
- workload: shop/ranker
  kind: StatefulSet
  metric: queue_depth
  query: sum(vllm:num_requests_waiting{namespace="shop"})
  target: 8
- workload: ml/chat
  kind: Deployment
  metric: tokens_per_second
  query: sum(rate(vllm:generation_tokens_total[2m])
  target: 100
`
	_, err := ParseAutoscaling([]byte(file), "scale.yaml", parsePromQL)
	want := `scale.yaml:13: workloads[1].query: "sum(rate(vllm:generation_tokens_total[2m])" does not parse as PromQL`
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "write a PromQL query such as") {
		t.Errorf("ParseAutoscaling with an unbalanced parenthesis = %v, want an error starting %q", err, want)
	}
	in, err := ParseAutoscaling(demo.Autoscaling(), demo.AutoscalingName, parsePromQL)
	if err != nil {
		t.Fatalf("the demo autoscaling file: %v", err)
	}
	if len(in.Workloads) == 0 {
		t.Error("the demo autoscaling file has no workloads")
	}
}

// parsePromQL is the PromQL parser the CLI gives ParseAutoscaling.
func parsePromQL(query string) error {
	_, err := metricsql.Parse(query)
	return err
}

// replicasAlike reports whether a workload's pods ask for the same and its
// bound pods run in its pool.
func replicasAlike(s *cluster.Snapshot, d *Decision) bool {
	if d.pool == nil {
		return false
	}
	for _, p := range d.w.Pods {
		i, bound := s.NodeIndex(p.NodeName)
		if p.GPU.String() != d.w.Pods[0].GPU.String() || bound && !slices.Contains(d.pool.nodes, i) {
			return false
		}
	}
	return true
}

// TestReplicaRangeNeverZero checks the ScaledObject's replica range: from
// the busy replicas per hour plus headroom, else the replicas now, and
// never a minimum of 0, at which KEDA would scale a replica loading its
// model to zero.
func TestReplicaRangeNeverZero(t *testing.T) {
	pods := func(n int) []*cluster.Pod { return make([]*cluster.Pod, n) }
	tests := map[string]struct {
		d        *Decision
		min, max int
		why      string
	}{
		"busy every hour":           {&Decision{w: &Workload{Pods: pods(3), HourlyBusyPods: []int{2, 3}}}, 2, 4, "2 to 3"},
		"idle hours":                {&Decision{w: &Workload{Pods: pods(2), HourlyBusyPods: []int{2, 2, 0}}}, 1, 3, "at least 1"},
		"never busy":                {&Decision{w: &Workload{Pods: pods(1), HourlyBusyPods: []int{0, 0}}}, 1, 1, "at least 1"},
		"no hourly data":            {&Decision{Action: Share, w: &Workload{Pods: pods(2)}}, 1, 3, "from 2 replicas now"},
		"idle-held, no hourly data": {&Decision{Action: Reclaim, w: &Workload{Pods: pods(1)}}, 1, 2, "idle-held, but at least 1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			lo, hi, why := replicaRange(tc.d, 0.2)
			if diff := cmp.Diff([2]int{tc.min, tc.max}, [2]int{lo, hi}); diff != "" {
				t.Errorf("min, max (-want +got):\n%s", diff)
			}
			if !strings.Contains(why, tc.why) {
				t.Errorf("range %q: want it to say %q", why, tc.why)
			}
		})
	}
}
