package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"

	"github.com/gpupack/gpupack/gpu"

	clifakedcgm "github.com/gpupack/gpupack/internal/cli/fakedcgm"
	"github.com/gpupack/gpupack/internal/gpusim"
	"github.com/gpupack/gpupack/usage"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

// scenario: pods hold their devices from 4s to 36s, with patterns whose
// changes fall on whole seconds, so that a 1 s scrape sees every phase.
const scenario = `duration: 40s
nodes:
  - {name: e2e-a, model: H100-80GB, gpus: 3, mig: {"2": [3g.40gb, 4g.40gb]}}
  - {name: e2e-b, model: L4, gpus: 2}
pods:
  - {namespace: train, name: busy, node: e2e-a, gpu: 0, from: 4s, to: 36s, memoryMiB: 60000, activity: {pattern: constant, level: 0.9},
     startup: {created: -3s, scheduled: -2s, containersStarted: 0s, containersReady: 6s, ready: 6s, workload: trainer}}
  - {namespace: serve, name: bursty, node: e2e-a, gpu: 1, from: 4s, to: 36s, memoryMiB: 20000, activity: {pattern: square, level: 0.8, low: 0, on: 1s, off: 3s},
     startup: {created: -4s, scheduled: -3s, containersStarted: 1s, ready: 8s, workload: chat}}
  - {namespace: train, name: mig-3g, node: e2e-a, gpu: 2, slice: 0, from: 4s, to: 36s, memoryMiB: 30000, activity: {pattern: constant, level: 0.5}}
  - {namespace: serve, name: ts-1, node: e2e-b, gpu: 0, from: 4s, to: 36s, memoryMiB: 4000, activity: {pattern: constant, level: 0.2}}
  - {namespace: serve, name: ts-2, node: e2e-b, gpu: 0, from: 4s, to: 36s, memoryMiB: 4000, activity: {pattern: constant, level: 0.2}}
  - {namespace: lab, name: notebook, node: e2e-b, gpu: 1, from: 4s, to: 36s, memoryMiB: 900, activity: {pattern: constant, level: 0.02}}
`

// TestReportMatchesTruth runs Prometheus (1 s scrapes) against fake-dcgm
// for the scenario, then requires the report from Prometheus to match the
// simulator's ground truth within 2% per pod.
func TestReportMatchesTruth(t *testing.T) {
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("GPUPACK_E2E") == "1" {
			t.Fatal("GPUPACK_E2E=1 but the prometheus binary is not on PATH; apt-get install -y prometheus")
		}
		t.Skip("prometheus not installed (apt-get install -y prometheus); set GPUPACK_E2E=1 to make this a failure")
	}
	// The nodes of the scenario also exist in a real Kubernetes cluster, whose
	// node labels report --kubeconfig reads to select price rules.
	kc := testcluster.Start(t, testcluster.Options{})
	kc.AddGPUNode("e2e-a", testcluster.GPUNode{Product: "NVIDIA-H100-80GB-HBM3", MemoryMiB: 81559, GPUs: 3})
	kc.AddGPUNode("e2e-b", testcluster.GPUNode{Product: "NVIDIA-L4", MemoryMiB: 23034, GPUs: 2, Labels: map[string]string{"pool": "spot"}})
	// lab/notebook runs there too, so report --kubeconfig reads its
	// start-up from the cluster (this test runs no kube-state-metrics).
	kc.CreateNamespace("lab")
	if _, err := kc.Client().CoreV1().Pods("lab").Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "notebook"},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"pool": "spot"}, Containers: []corev1.Container{{Name: "main", Image: "jupyter/base-notebook",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{testcluster.ResourceGPU: resource.MustParse("1")}}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// lab/waiting asks more GPUs than any node has: pending, so the live
	// report shows its queue wait.
	kc.CreateGPUPod("lab", "waiting", "", testcluster.ResourceGPU, 8)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()

	// Every server binds port 0 and says which port it got. Prometheus must
	// scrape before fake-dcgm's clock starts, but fake-dcgm's port is known
	// only once it runs, so Prometheus scrapes it through a lateTarget.
	fake := newLateTarget(t)

	// fake-dcgm also serves, at its own path, what kube-state-metrics
	// would expose of the scripted pods' times: a second job, as a cluster
	// scrapes kube-state-metrics beside dcgm-exporter.
	config := fmt.Sprintf("global: {scrape_interval: 1s, scrape_timeout: 900ms}\nscrape_configs:\n  - job_name: dcgm\n    honor_labels: true\n    static_configs: [{targets: [%q]}]\n"+
		"  - job_name: kube-state-metrics\n    honor_labels: true\n    metrics_path: %s\n    static_configs: [{targets: [%q]}]\n",
		fake.Addr(), clifakedcgm.StateMetricsPath, fake.Addr())
	write(t, filepath.Join(dir, "prometheus.yml"), config)
	prom := kc.Run("prometheus", promBin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:0")
	promURL := "http://" + prom.LogAddress(regexp.MustCompile(`msg="Listening on" address=(\S+)`))
	waitReady(t, ctx, promURL+"/-/ready")
	// Prometheus hands targets to its scrape loops a few seconds after it
	// is ready; start the scenario's clock only once it scrapes.
	waitScraping(t, ctx, promURL)

	write(t, filepath.Join(dir, "scenario.yaml"), scenario)
	truthPath := filepath.Join(dir, "truth.json")
	fake.waitBetweenScrapes(t, ctx, time.Second)
	addr, stop := startFakeDCGM(t, ctx, filepath.Join(dir, "scenario.yaml"), truthPath)
	defer stop()
	fake.point(addr)
	// The truth file appears when the scenario's 40 s are over.
	truth := waitTruth(t, ctx, truthPath)
	r, start, end := reportAfterRun(t, ctx, promURL, truth)
	t.Logf("quality: samples %d, gaps %d, NaN %d, out of window %d; window %s..%s; truth %s..%s", r.Quality.Samples, r.Quality.Gaps, r.Quality.NaNSamples, r.Quality.OutOfWindow, start, end, truth.Start, truth.End)
	if os.Getenv("GPUPACK_E2E_DEBUG") != "" {
		resp, err := http.Get(promURL + "/api/v1/query?query=" + url.QueryEscape(`DCGM_FI_DEV_FB_USED{Hostname="e2e-a",gpu="0"}[2m]`) + "&time=" + fmt.Sprint(end.Unix()))
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			t.Logf("raw samples: %s", b)
		}
	}
	if len(truth.Pods) != 6 {
		t.Fatalf("truth has %d pods, want 6", len(truth.Pods))
	}
	for _, pt := range truth.Pods {
		got, ok := r.Pod(pt.Namespace, pt.Pod)
		if !ok {
			t.Errorf("%s/%s: missing from the report", pt.Namespace, pt.Pod)
			continue
		}
		check(t, pt.Namespace+"/"+pt.Pod+" allocated", float64(got.AllocatedGPUSeconds), float64(pt.AllocatedGPUSeconds))
		if !got.ActiveGPUSeconds.Known() {
			t.Errorf("%s/%s: active GPU-seconds unknown", pt.Namespace, pt.Pod)
			continue
		}
		check(t, pt.Namespace+"/"+pt.Pod+" active", got.ActiveGPUSeconds.Value(), float64(pt.ActiveGPUSeconds))
	}

	// Start-up phases from kube-state-metrics' times through Prometheus:
	// each scripted time to within its second, the workload from the
	// owner, the phases from them and the first GPU use from DCGM.
	sc, err := gpusim.Parse([]byte(scenario), "scenario.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	scripted := sc.Events(truth.Start)
	if len(scripted) != 2 {
		t.Fatalf("%d pods with scripted start-ups, want 2", len(scripted))
	}
	for _, ev := range scripted {
		got, ok := r.Pod(ev.Namespace, ev.Pod)
		if !ok {
			t.Errorf("%s/%s: missing from the report", ev.Namespace, ev.Pod)
			continue
		}
		st := got.Startup
		where := ev.Namespace + "/" + ev.Pod
		for _, m := range []struct {
			name string
			got  *time.Time
			want time.Time
		}{{"created", st.Created, ev.Created}, {"scheduled", st.Scheduled, ev.Scheduled}, {"containers started", st.ContainersStarted, ev.ContainersStarted}, {"app ready", st.AppReady, ev.Ready}} {
			if m.got == nil || m.got.Sub(m.want).Abs() > time.Second {
				t.Errorf("%s %s: %v, want %v", where, m.name, m.got, m.want)
			}
		}
		if st.Workload != ev.Workload || st.ContainersStartedFrom != "kubelet" {
			t.Errorf("%s: workload %q started from %q, want %q from the kubelet", where, st.Workload, st.ContainersStartedFrom, ev.Workload)
		}
		if sched := st.Phase(usage.PhaseScheduling).Seconds; !sched.Known() || math.Abs(sched.Value()-ev.Scheduled.Sub(ev.Created).Seconds()) > 1 {
			t.Errorf("%s: scheduling phase %+v, want %v", where, sched, ev.Scheduled.Sub(ev.Created))
		}
		// Memory is held from the first step, so first use is the GPU
		// attach, at the pod's from: seen at the first step after the
		// first scrape that shows it, so up to one step and one scrape
		// interval (1 s each) late, never early.
		if st.FirstGPUUse == nil {
			t.Errorf("%s: no first GPU use", where)
			continue
		}
		if late := st.FirstGPUUse.Sub(truth.Start.Add(4 * time.Second)); late < -time.Second || late > 2*time.Second+100*time.Millisecond || st.ResolutionSeconds != 1 {
			t.Errorf("%s: first GPU use %v at resolution %v s, want %v at 1 s", where, st.FirstGPUUse, st.ResolutionSeconds, truth.Start.Add(4*time.Second))
		}
	}
	// Every pod started in the window: the 2 scripted under their
	// workloads, the 4 others (first seen on a GPU after the window's
	// first step) as workloads of their own.
	keys := map[string]int{}
	for _, g := range r.Startup.Workloads {
		keys[g.Key] = g.Pods
	}
	if keys["train/trainer"] != 1 || keys["serve/chat"] != 1 || len(keys) != 6 {
		t.Errorf("start-up workloads %v, want train/trainer, serve/chat and 4 single pods", keys)
	}

	// With the live cluster's node labels, the spot rule prices e2e-b's pods
	// at 0.5 per GPU-hour and leaves e2e-a's at the catalogue's price.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := kc.Client().CoreV1().Pods("lab").Get(ctx, "notebook", metav1.GetOptions{})
		return err == nil && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		}), err
	}); err != nil {
		t.Fatalf("lab/notebook never ready in the live cluster: %v", err)
	}
	write(t, filepath.Join(dir, "prices.yaml"), "currency: EUR\nprices: {L4: 0.70}\nnodeRules:\n  - labels: {pool: spot}\n    perHour: 0.5\n")
	priced := reportJSON(t, ctx, promURL, start, end, time.Second, "--kubeconfig", kc.Kubeconfig(), "--prices", filepath.Join(dir, "prices.yaml"))
	for _, key := range [][2]string{{"lab", "notebook"}, {"serve", "ts-1"}, {"train", "busy"}} {
		p, ok := priced.Pod(key[0], key[1])
		if !ok || !p.Cost.Known() {
			t.Fatalf("%s/%s: no cost in the priced report", key[0], key[1])
		}
		perHour := 0.5
		if p.Node == "e2e-a" {
			perHour = gpu.Default().MustLookup("H100-80GB").PricePerHour
		}
		check(t, key[0]+"/"+key[1]+" cost", p.Cost.Value(), float64(p.AllocatedGPUSeconds)/3600*perHour)
	}
	// The live cluster's pending pod: its wait to now is known, with its
	// shape and diagnosed cause.
	if q := priced.QueueWait; q == nil || q.Pending == nil || q.Pending.All.Pods != 1 || q.Pending.All.UnknownWait != 0 || !q.Pending.All.Seconds.Max.Known() ||
		len(q.Pending.ByShape) != 1 || q.Pending.ByShape[0].Key != "8 GPU" || len(q.Pending.ByCause) != 1 || q.Pending.ByCause[0].Key == usage.UnknownGroup {
		t.Errorf("queue wait with the live cluster %+v; want lab/waiting pending with a known wait, its shape and a cause", q)
	}
	// The live cluster's start-up of lab/notebook: created, scheduled and
	// ready are known, and the scheduling phase with them.
	if p, _ := priced.Pod("lab", "notebook"); p.Startup.Created == nil || p.Startup.Scheduled == nil || p.Startup.AppReady == nil || !p.Startup.Phase(usage.PhaseScheduling).Seconds.Known() || p.Startup.Storage.Kind != usage.StorageImage {
		t.Errorf("lab/notebook start-up = %+v, want the live cluster's created, scheduled and ready times", p.Startup)
	}

	// The same measurement as usage facts, as plan --prometheus and
	// report --format podusage produce them for diagnose and plan.
	facts, err := app.Measure(ctx, app.Measurement{Prometheus: promURL, Window: usage.Window{Start: start, End: end, Step: time.Second}, Pricing: usage.Pricing{Catalogue: gpu.Default()}})
	if err != nil {
		t.Fatalf("usage facts: %v", err)
	}
	// Written as report --format podusage writes them and read back as
	// diagnose --usage and plan --usage read them.
	b, err := yaml.Marshal(facts.Facts().File())
	if err != nil {
		t.Fatal(err)
	}
	u, err := usage.ParseFacts(b, "measured.podusage")
	if err != nil {
		t.Fatalf("usage facts do not validate: %v", err)
	}
	if f := u.Pods["lab/notebook"]; f.Pattern != "idle-held" || !f.IdleHeldMeasured || f.IdleHeldRatio < 0.95 {
		t.Errorf("lab/notebook facts = %+v, want idle-held for (nearly) all of its time", f)
	}
	if f := u.Pods["train/busy"]; !f.IdleHeldMeasured || f.IdleHeldRatio > 0.05 || f.Pattern == "idle-held" {
		t.Errorf("train/busy facts = %+v, want never idle", f)
	}

	// The hourly levels plan's reservation baseline is read from: the
	// window is one (partial) hour, so each model's allocated and active
	// GPUs times the window are the truth's GPU-seconds of its pods.
	seconds := end.Sub(start).Seconds()
	truthByModel := map[string][2]float64{}
	for _, pt := range truth.Pods {
		model := "L4"
		if got, ok := r.Pod(pt.Namespace, pt.Pod); ok && got.Node == "e2e-a" {
			model = "H100-80GB"
		}
		v := truthByModel[model]
		v[0] += float64(pt.AllocatedGPUSeconds)
		v[1] += float64(pt.ActiveGPUSeconds)
		truthByModel[model] = v
	}
	if len(u.Hourly) != len(truthByModel) {
		t.Fatalf("hourly levels of %d models, want %d (%v)", len(u.Hourly), len(truthByModel), u.Hourly)
	}
	for _, mh := range u.Hourly {
		if len(mh.AllocatedGPUs) != 1 {
			t.Fatalf("%s: %d hours, the window has 1", mh.Model, len(mh.AllocatedGPUs))
		}
		if sum := mh.ActiveGPUs[0] + mh.IdleGPUs[0] + mh.ActivityUnknownGPUs[0]; math.Abs(sum-mh.AllocatedGPUs[0]) > 3e-4 {
			t.Errorf("%s: active + idle + unknown = %v GPUs, allocated %v", mh.Model, sum, mh.AllocatedGPUs[0])
		}
		want := truthByModel[mh.Model]
		check(t, mh.Model+" hourly allocated", mh.AllocatedGPUs[0]*seconds, want[0])
		check(t, mh.Model+" hourly active", mh.ActiveGPUs[0]*seconds, want[1])
	}
	if f := u.Pods["train/busy"]; len(f.HourlyActivity) != 1 || math.Abs(f.HourlyActivity[0]-0.9) > 0.02 {
		t.Errorf("train/busy hourly activity %v, want [0.9]", f.HourlyActivity)
	}
	if f := u.Pods["lab/notebook"]; len(f.HourlyActivity) != 1 || f.HourlyActivity[0] >= 0.05 {
		t.Errorf("lab/notebook hourly activity %v, want below the planner's busy level", f.HourlyActivity)
	}
}

// check allows 2% of the truth; 0.05 GPU-seconds absolute covers the
// rounding of near-zero figures such as an idle notebook's activity.
func check(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 0.02*want+0.05 {
		t.Errorf("%s: got %.3f GPU-seconds, truth %.3f (off by %.1f%%)", what, got, want, 100*math.Abs(got-want)/want)
	} else {
		t.Logf("%s: got %.3f, truth %.3f", what, got, want)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitScraping waits until Prometheus has scraped its first target once.
func waitScraping(t *testing.T, ctx context.Context, promURL string) {
	t.Helper()
	waitTargets(t, ctx, promURL, "Prometheus did not start scraping", func(targets []scrapeTarget) bool {
		return len(targets) > 0 && targets[0].LastScrape.Year() > 2000
	})
}

// waitScrapesFail waits until Prometheus has failed a scrape of every
// target after the time after: from then on it stores no new sample of
// them, and its staleness markers end their series.
func waitScrapesFail(t *testing.T, ctx context.Context, promURL string, after time.Time) {
	t.Helper()
	waitTargets(t, ctx, promURL, "Prometheus still scrapes its targets", func(targets []scrapeTarget) bool {
		for _, tg := range targets {
			if tg.Health != "down" || !tg.LastScrape.After(after) {
				return false
			}
		}
		return len(targets) > 0
	})
}

// scrapeTarget is what /api/v1/targets says of an active target.
type scrapeTarget struct {
	Health     string    `json:"health"`
	LastScrape time.Time `json:"lastScrape"`
}

// waitTargets polls Prometheus' active targets until done says so, and
// fails the test with fail when ctx ends first.
func waitTargets(t *testing.T, ctx context.Context, promURL, fail string, done func([]scrapeTarget) bool) {
	t.Helper()
	for {
		var targets struct {
			Data struct {
				ActiveTargets []scrapeTarget `json:"activeTargets"`
			} `json:"data"`
		}
		if resp, err := http.Get(promURL + "/api/v1/targets"); err == nil {
			err = json.NewDecoder(resp.Body).Decode(&targets)
			resp.Body.Close()
			if err == nil && done(targets.Data.ActiveTargets) {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal(fail)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func waitReady(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	for {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s did not become ready", url)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
