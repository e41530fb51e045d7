package usage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/gpu"
)

// startAccount accounts one pod on one H100 (and a MIG slice for "b/mig")
// over 10 minutes at a 10 s step, with the pod events given.
func startAccount(t *testing.T, events []PodEvents, series ...Series) *Report {
	t.Helper()
	r, err := Account(Input{
		Window:  Window{Start: t0, End: t0.Add(10 * time.Minute), Step: 10 * time.Second},
		Series:  series,
		Pricing: Pricing{Catalogue: gpu.Default()},
		Pods:    events,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func at(d time.Duration) time.Time { return t0.Add(d) }

// phaseTimes holds list, or fails t.
func phaseTimes(t testing.TB, list ...PhaseTime) PhaseTimes {
	t.Helper()
	p, err := NewPhaseTimes(list)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestStartupPhasesAddUp(t *testing.T) {
	// Created at 0:30, scheduled 1:00, image pulled in 60 s (its event at
	// 2:30) and one image present, containers started 3:00, attached to
	// the GPU at 3:00 (step 18), first use at 4:00 (step 24), ready 6:00.
	ev := PodEvents{Namespace: "a", Pod: "vllm-7d9f-x", Workload: "vllm",
		Created: at(30 * time.Second), Scheduled: at(time.Minute), ContainersStarted: at(3 * time.Minute), Ready: at(6 * time.Minute),
		ImagePulls: []ImagePull{
			{Container: "main", Image: "vllm:1", At: at(150 * time.Second), PullSeconds: 60, WaitSeconds: 62, SizeBytes: 8e9},
			{Container: "init", Image: "busybox", At: at(70 * time.Second), Present: true},
		},
		Storage: ModelStorage{Kind: StoragePVC, Detail: "fast-nvme", Volume: "models", MountPath: "/models"},
	}
	fb := append(repeat(100, 6), repeat(30000, 36)...) // framebuffer rises at step 24
	r := startAccount(t, []PodEvents{ev},
		makeSeries(FBUsed).pod("a", "vllm-7d9f-x").at(18, fb...).obj(),
		makeSeries(GREngineActive).pod("a", "vllm-7d9f-x").at(18, repeat(0, 42)...).obj())
	p, ok := r.Pod("a", "vllm-7d9f-x")
	if !ok {
		t.Fatal("pod missing")
	}
	st := p.Startup
	h100 := gpu.Default().MustLookup("H100-80GB").PricePerHour
	perSec := h100 / 3600
	phase := func(name string, sec float64, idle bool) PhaseTime {
		held := Known(sec)
		if name == PhaseScheduling {
			held = Known(0)
		}
		return PhaseTime{Phase: name, Seconds: Known(sec), HeldGPUSeconds: held, HeldCost: Known(held.Value() * perSec), Idle: idle}
	}
	want := []PhaseTime{
		phase(PhaseScheduling, 30, true),
		phase(PhaseImagePull, 60, true),
		phase(PhaseInit, 60, true),
		phase(PhaseToFirstUse, 60, true),
		phase(PhaseFirstUseToReady, 120, false),
	}
	approx := cmp.Comparer(func(a, b Amount) bool { return a.Known() == b.Known() && math.Abs(a.Value()-b.Value()) < 1e-6 })
	if d := cmp.Diff(want, st.Phases.All(), approx); d != "" {
		t.Errorf("phases (-want +got):\n%s", d)
	}
	var sum float64
	for _, ph := range st.Phases.All() {
		sum += ph.Seconds.Value()
	}
	if sum != st.TotalSeconds.Value() || st.TotalSeconds != Known(330) {
		t.Errorf("phases add up to %v s, total %+v; want both 330", sum, st.TotalSeconds)
	}
	if st.LoadSeconds != Known(180) || st.HeldGPUs != Known(1) || st.HeldGPUSeconds != Known(300) || st.HeldIdleGPUSeconds != Known(180) {
		t.Errorf("load %+v held %+v GPUs, %+v GPU-s, idle %+v; want 180, 1, 300, 180", st.LoadSeconds, st.HeldGPUs, st.HeldGPUSeconds, st.HeldIdleGPUSeconds)
	}
	if math.Abs(st.HeldCost.Value()-300*perSec) > 1e-9 {
		t.Errorf("held cost %v, want %v", st.HeldCost.Value(), 300*perSec)
	}
	if st.ImagesPulledCount != 1 || st.ImagesPresentCount != 1 || st.ImagePullSeconds != Known(60) || st.ImageBytes != Known(8e9) || st.ContainersStartedFrom != "kubelet" {
		t.Errorf("images %d pulled %d present, %+v s, %+v bytes, started from %q", st.ImagesPulledCount, st.ImagesPresentCount, st.ImagePullSeconds, st.ImageBytes, st.ContainersStartedFrom)
	}
	if st.ResolutionSeconds != 10 || st.Workload != "vllm" || st.Storage.Path() != "pvc/fast-nvme" {
		t.Errorf("resolution %v workload %q storage %q", st.ResolutionSeconds, st.Workload, st.Storage.Path())
	}

	// The summary: one workload and one storage path, each of one pod.
	if len(r.Startup.Workloads) != 1 || len(r.Startup.StoragePaths) != 1 {
		t.Fatalf("summary %+v", r.Startup)
	}
	w := r.Startup.Workloads[0]
	if w.Key != "a/vllm" || w.Pods != 1 || w.Storage != "pvc/fast-nvme" || w.Load.P50 != Known(180) || w.Total.P95 != Known(330) || w.HeldGPUSeconds != Known(300) || w.HeldPods != 1 {
		t.Errorf("workload %+v", w)
	}
	if sp := r.Startup.StoragePaths[0]; sp.Key != "pvc/fast-nvme" || sp.ImagePull.P50 != Known(60) || sp.ImageBytes.Max != Known(8e9) {
		t.Errorf("storage path %+v", sp)
	}
}

func TestStartupUnknownStaysUnknown(t *testing.T) {
	// No Kubernetes times at all: only what DCGM shows is known.
	r := startAccount(t, nil, makeSeries(GREngineActive).pod("a", "p").at(6, append(repeat(0, 3), repeat(0.9, 20)...)...).obj())
	p, _ := r.Pod("a", "p")
	st := p.Startup
	for _, ph := range st.Phases.All() {
		want := ph.Phase == PhaseToFirstUse
		if ph.Seconds.Known() != want {
			t.Errorf("phase %s known %v, want %v", ph.Phase, ph.Seconds.Known(), want)
		}
	}
	if got := st.Phase(PhaseToFirstUse).Seconds; got != Known(30) || st.ContainersStartedFrom != "gpu-attached" {
		t.Errorf("to first use %+v from %q; want 30 s from the GPU attach", got, st.ContainersStartedFrom)
	}
	if st.Storage.Kind != StorageUnknown || st.ImagePullSeconds.Known() || st.ImageBytes.Known() || st.TotalSeconds.Known() || st.HeldGPUSeconds.Known() {
		t.Errorf("unknowns read as known: %+v", st)
	}
	// Seen after the window's first step: it started inside the window.
	if len(r.Startup.Workloads) != 1 || r.Startup.Workloads[0].HeldGPUSeconds.Known() || r.Startup.Workloads[0].Key != "a/p" {
		t.Errorf("summary %+v", r.Startup.Workloads)
	}
}

func TestStartupHeldGPUsShare(t *testing.T) {
	// A 3g.40gb slice is 3/7 of an H100; seen from step 30 (5:00) to the
	// window's end: its held GPUs are its share.
	r := startAccount(t, []PodEvents{{Namespace: "b", Pod: "mig", Scheduled: at(4 * time.Minute), Ready: at(9 * time.Minute)}},
		makeSeries(GREngineActive).mig("3g.40gb", "1").pod("b", "mig").at(30, repeat(0.5, 30)...).obj())
	p, _ := r.Pod("b", "mig")
	if got := p.Startup.HeldGPUs; math.Abs(got.Value()-0.4286) > 1e-4 || !got.Known() {
		t.Errorf("held GPUs %+v, want 3/7", got)
	}
	if got := p.Startup.HeldGPUSeconds; math.Abs(got.Value()-300*0.4286) > 1e-2 {
		t.Errorf("held GPU-seconds %+v, want 5 min x 3/7", got)
	}
}

func TestSummarizeStartup(t *testing.T) {
	start, end := at(0), at(time.Hour)
	pod := func(ns, workload, path string, created time.Duration, load float64) PodUsage {
		c := at(created)
		st := Startup{Workload: workload, Created: &c, Storage: ModelStorage{Kind: path}, LoadSeconds: Known(load), HeldGPUSeconds: Known(load), HeldCost: Known(load / 10)}
		var list []PhaseTime
		for _, name := range Phases {
			list = append(list, PhaseTime{Phase: name})
		}
		list[3] = PhaseTime{Phase: PhaseToFirstUse, Seconds: Known(load), HeldGPUSeconds: Known(load), HeldCost: Known(load / 10)}
		st.Phases = phaseTimes(t, list...)
		return PodUsage{Namespace: ns, Pod: workload + "-x", Startup: st}
	}
	pods := []PodUsage{
		pod("a", "s3", StorageCSI, time.Minute, 240),
		pod("a", "s3", StorageCSI, 2*time.Minute, 200),
		pod("a", "s3", StorageCSI, 3*time.Minute, 260),
		pod("a", "nvme", StorageHostPath, 4*time.Minute, 40),
		pod("a", "nvme", StorageHostPath, -time.Minute, 30), // created before the window: not a start in it
		pod("b", "nvme", StorageHostPath, 5*time.Minute, 50),
	}
	s := SummarizeStartup(pods, start, end, 30*time.Second)
	type row struct {
		Key, Storage string
		Pods         int
		LoadP50      float64
		Held         float64
	}
	var got []row
	for _, g := range s.Workloads {
		got = append(got, row{g.Key, g.Storage, g.Pods, g.Load.P50.Value(), g.HeldGPUSeconds.Value()})
	}
	want := []row{{"a/s3", "csi", 3, 240, 700}, {"b/nvme", "hostpath", 1, 50, 50}, {"a/nvme", "hostpath", 1, 40, 40}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("workloads, costliest first (-want +got):\n%s", d)
	}
	got = nil
	for _, g := range s.StoragePaths {
		got = append(got, row{g.Key, g.Storage, g.Pods, g.Load.P50.Value(), g.HeldGPUSeconds.Value()})
	}
	want = []row{{"csi", "csi", 3, 240, 700}, {"hostpath", "hostpath", 2, 40, 90}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("storage paths, slowest first (-want +got):\n%s", d)
	}
	ph := s.StoragePaths[0].Phases[3]
	if ph.Pods != 3 || ph.Seconds.P95 != Known(260) || ph.HeldCost != Known(70) {
		t.Errorf("phase %+v", ph)
	}
	if ph := s.StoragePaths[0].Phases[0]; ph.Pods != 0 || ph.Seconds.P50.Known() || ph.HeldGPUSeconds.Known() {
		t.Errorf("a phase no pod knows reads %+v, want unknown", ph)
	}
	if s.ResolutionSeconds != 30 {
		t.Errorf("resolution %v", s.ResolutionSeconds)
	}
}

// TestSummarizeStartupKeepsTheCostliest: past StartupWorkloads workloads
// the cheapest are summed into Others, and the groups still add up to
// every pod that started.
func TestSummarizeStartupKeepsTheCostliest(t *testing.T) {
	start, end := at(0), at(time.Hour)
	var pods []PodUsage
	n := StartupWorkloads + 3
	for i := range n {
		c := at(time.Duration(i) * time.Second)
		// Workload i costs i: two pods each, the last with unknown cost.
		for k := range 2 {
			st := Startup{Workload: fmt.Sprintf("w%03d", i), Created: &c, Storage: ModelStorage{Kind: StorageCSI}, HeldGPUSeconds: Known(float64(i)), HeldCost: Known(float64(i) / 2)}
			if k == 1 {
				st.HeldCost = Unknown
			}
			pods = append(pods, PodUsage{Namespace: "ns", Pod: fmt.Sprintf("w%03d-%d", i, k), Startup: st})
		}
	}
	s := SummarizeStartup(pods, start, end, 30*time.Second)
	if len(s.Workloads) != StartupWorkloads || s.Others == nil || s.OtherWorkloads != 3 {
		t.Fatalf("%d workloads, others %v, %d other workloads; want %d, a group, 3", len(s.Workloads), s.Others, s.OtherWorkloads, StartupWorkloads)
	}
	if first, last := s.Workloads[0].Key, s.Workloads[StartupWorkloads-1].Key; first != fmt.Sprintf("ns/w%03d", n-1) || last != "ns/w003" {
		t.Errorf("kept %s..%s, want the costliest ns/w%03d..ns/w003", first, last, n-1)
	}
	pods2, held := s.Others.Pods, s.Others.HeldGPUSeconds.Value()
	for _, g := range s.Workloads {
		pods2 += g.Pods
		held += g.HeldGPUSeconds.Value()
	}
	if want := n * (n - 1); pods2 != 2*n || held != float64(want) {
		t.Errorf("groups hold %d pods and %g GPU-seconds, want %d and %d", pods2, held, 2*n, want)
	}
	if s.Others.Pods != 6 || s.Others.HeldCost != Known(1.5) {
		t.Errorf("others: %d pods costing %+v, want w000-w002's 6 pods costing 1.5", s.Others.Pods, s.Others.HeldCost)
	}
}

func TestClassifyModelStorage(t *testing.T) {
	gpuMain := func(mounts ...Mount) ContainerMounts { return ContainerMounts{Name: "main", GPU: true, Mounts: mounts} }
	cases := map[string]struct {
		spec     PodStorageSpec
		wantPath string
		wantVol  string
	}{
		"no volume: baked into the image": {
			spec:     PodStorageSpec{Containers: []ContainerMounts{gpuMain()}},
			wantPath: StorageImage,
		},
		"shared memory and config are not model storage": {
			spec: PodStorageSpec{
				Volumes:    []PodVolume{{Name: "dshm", Source: VolumeEmptyDir, Memory: true}, {Name: "cfg", Source: VolumeOther}, {Name: "scratch", Source: VolumeEmptyDir}},
				Containers: []ContainerMounts{gpuMain(Mount{Volume: "dshm", Path: "/dev/shm"}, Mount{Volume: "cfg", Path: "/etc/app"}, Mount{Volume: "scratch", Path: "/tmp"})},
			},
			wantPath: StorageImage,
		},
		"emptyDir filled by an init container": {
			spec: PodStorageSpec{
				Volumes: []PodVolume{{Name: "data", Source: VolumeEmptyDir}},
				Containers: []ContainerMounts{
					{Name: "fetch", Init: true, Mounts: []Mount{{Volume: "data", Path: "/data"}}},
					gpuMain(Mount{Volume: "data", Path: "/data", ReadOnly: true}),
				},
			},
			wantPath: StorageDownload, wantVol: "data",
		},
		"PVC by storage class": {
			spec: PodStorageSpec{
				Volumes:    []PodVolume{{Name: "weights", Source: VolumePVC, Detail: "fast-nvme"}, {Name: "dshm", Source: VolumeEmptyDir, Memory: true}},
				Containers: []ContainerMounts{gpuMain(Mount{Volume: "weights", Path: "/models"}, Mount{Volume: "dshm", Path: "/dev/shm"})},
			},
			wantPath: "pvc/fast-nvme", wantVol: "weights",
		},
		"PVC of a class not known": {
			spec: PodStorageSpec{
				Volumes:    []PodVolume{{Name: "w", Source: VolumePVC}},
				Containers: []ContainerMounts{gpuMain(Mount{Volume: "w", Path: "/srv"})},
			},
			wantPath: "pvc", wantVol: "w",
		},
		"object-store CSI beats a cache emptyDir named alike": {
			spec: PodStorageSpec{
				Volumes:    []PodVolume{{Name: "model-cache", Source: VolumeEmptyDir}, {Name: "models", Source: VolumeCSI, Detail: "s3.csi.aws.com"}},
				Containers: []ContainerMounts{gpuMain(Mount{Volume: "model-cache", Path: "/cache"}, Mount{Volume: "models", Path: "/mnt/models"})},
			},
			wantPath: "csi/s3.csi.aws.com", wantVol: "models",
		},
		"host path cache": {
			spec: PodStorageSpec{
				Volumes:    []PodVolume{{Name: "nvme", Source: VolumeHostPath, Detail: "/mnt/nvme/hf"}},
				Containers: []ContainerMounts{gpuMain(Mount{Volume: "nvme", Path: "/root/.cache/huggingface"})},
			},
			wantPath: StorageHostPath, wantVol: "nvme",
		},
		"image volume": {
			spec: PodStorageSpec{
				Volumes:    []PodVolume{{Name: "llama", Source: VolumeImage, Detail: "registry/llama:8b"}},
				Containers: []ContainerMounts{gpuMain(Mount{Volume: "llama", Path: "/models/llama", ReadOnly: true})},
			},
			wantPath: StorageImageVolume, wantVol: "llama",
		},
		"a sidecar's volume does not count when the GPU container does not mount it": {
			spec: PodStorageSpec{
				Volumes: []PodVolume{{Name: "logs", Source: VolumePVC, Detail: "standard"}},
				Containers: []ContainerMounts{
					gpuMain(),
					{Name: "shipper", Mounts: []Mount{{Volume: "logs", Path: "/var/log/models"}}},
				},
			},
			wantPath: StorageImage,
		},
		"a mount of a volume that does not exist is ignored": {
			spec:     PodStorageSpec{Containers: []ContainerMounts{gpuMain(Mount{Volume: "ghost", Path: "/models"})}},
			wantPath: StorageImage,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ClassifyModelStorage(tc.spec)
			if got.Path() != tc.wantPath || got.Volume != tc.wantVol || got.Evidence == "" {
				t.Errorf("got %+v (path %s), want path %s volume %q and evidence", got, got.Path(), tc.wantPath, tc.wantVol)
			}
		})
	}
}

func TestMergePodEvents(t *testing.T) {
	history := []PodEvents{
		{Namespace: "a", Pod: "p", Workload: "w", Created: at(0), Scheduled: at(time.Minute), Ready: at(5 * time.Minute)},
		{Namespace: "a", Pod: "gone", Created: at(0)},
	}
	live := []PodEvents{
		{Namespace: "a", Pod: "p", Scheduled: at(2 * time.Minute), ContainersStarted: at(3 * time.Minute),
			ImagePulls: []ImagePull{{Container: "main", PullSeconds: 5}}, Storage: ModelStorage{Kind: StorageImage}},
		{Namespace: "a", Pod: "new", Created: at(time.Hour)},
	}
	want := []PodEvents{
		{Namespace: "a", Pod: "gone", Created: at(0)},
		{Namespace: "a", Pod: "new", Created: at(time.Hour)},
		{Namespace: "a", Pod: "p", Workload: "w", Created: at(0), Scheduled: at(2 * time.Minute), ContainersStarted: at(3 * time.Minute), Ready: at(5 * time.Minute),
			ImagePulls: []ImagePull{{Container: "main", PullSeconds: 5}}, Storage: ModelStorage{Kind: StorageImage}},
	}
	if d := cmp.Diff(want, MergePodEvents(history, live)); d != "" {
		t.Errorf("merged (-want +got):\n%s", d)
	}
}

// TestPhaseTimesAsList: PhaseTimes is written byte for byte as the list
// of PhaseTime it holds (null for none, with unknown figures as null),
// reads back to itself, and refuses a list whose phases are not named in
// the order of Phases.
func TestPhaseTimesAsList(t *testing.T) {
	full := []PhaseTime{
		{Phase: PhaseScheduling, Seconds: Known(12.5), HeldGPUSeconds: Known(0), HeldCost: Known(0), Idle: true},
		{Phase: PhaseImagePull, Seconds: Known(0.1), HeldGPUSeconds: Known(0.2), HeldCost: Known(1e-7), Idle: true},
		{Phase: PhaseInit, Idle: true},
		{Phase: PhaseToFirstUse, Seconds: Known(60), HeldGPUSeconds: Known(120)},
		{Phase: PhaseFirstUseToReady, Seconds: Known(-0.0), HeldGPUSeconds: Known(3e21), HeldCost: Unknown},
	}
	for name, list := range map[string][]PhaseTime{"none": nil, "one": full[:1], "all": full} {
		p := phaseTimes(t, list...)
		if p.Len() != len(list) {
			t.Errorf("%s: Len %d, want %d", name, p.Len(), len(list))
		}
		if d := cmp.Diff(list, p.All()); d != "" {
			t.Errorf("%s: All (-want +got):\n%s", name, d)
		}
		want, err := json.Marshal(list)
		if err != nil {
			t.Fatal(err)
		}
		// Inside a Startup, as the report writes it.
		got, err := json.Marshal(Startup{Phases: p})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(got, append([]byte(`"phases":`), want...)) {
			t.Errorf("%s: written as\n%s\nwant the list\n%s", name, got, want)
		}
		var back Startup
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !back.Phases.Equal(p) {
			t.Errorf("%s: read back as %+v, want %+v", name, back.Phases.All(), list)
		}
	}
	if _, err := NewPhaseTimes([]PhaseTime{{Phase: PhaseImagePull}}); err == nil || !strings.Contains(err.Error(), `"image pull", want "scheduling"`) {
		t.Errorf("a list starting at image pull: %v, want it refused", err)
	}
	var p PhaseTimes
	if err := json.Unmarshal([]byte(`[{"phase":"scheduling"},{"phase":"bogus"}]`), &p); err == nil {
		t.Error("a list naming an unknown phase was read")
	}
	if err := json.Unmarshal([]byte(`[`+strings.Repeat(`{"phase":"scheduling"},`, 5)+`{"phase":"scheduling"}]`), &p); err == nil || !strings.Contains(err.Error(), "6 start-up phases") {
		t.Errorf("six phases: %v, want them refused", err)
	}
	if st := (Startup{Phases: phaseTimes(t, full[:2]...)}); st.Phase(PhaseInit) != (PhaseTime{Phase: PhaseInit}) || st.Phase(PhaseImagePull) != full[1] {
		t.Errorf("Phase: init %+v (not held), image pull %+v, want unknown and %+v", st.Phase(PhaseInit), st.Phase(PhaseImagePull), full[1])
	}
}
