package reclaim

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/usage"
)

var now = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

// world is a 24-hour accounting window ending now with one pod per owner.
type world struct {
	in Input
}

func newWorld() *world {
	return &world{in: Input{
		Now:        now,
		Report:     &usage.Report{Start: now.Add(-24 * time.Hour), End: now},
		Owners:     map[string]*Owner{},
		Namespaces: map[string]string{"ml": wellknown.ReclaimEnabled},
		CPUCores:   map[string]float64{},
	}}
}

// pod adds a ready pod of a Deployment holding one GPU for the whole
// window with these hourly activities (the last ones given, earlier hours
// at the first value).
func (w *world) pod(ns, name string, kind Kind, hourly ...float64) *usage.PodUsage {
	full := make([]float64, 24)
	for i := range full {
		j := i - (24 - len(hourly))
		if j < 0 {
			j = 0
		}
		full[i] = hourly[j]
	}
	key := OwnerKey(kind, ns, name)
	if kind != Pod {
		w.in.Owners[key] = &Owner{Ref: Ref{Kind: kind, Namespace: ns, Name: name, UID: "uid-" + name}, Replicas: ptr(int32(1))}
	}
	w.in.Pods = append(w.in.Pods, PodState{Namespace: ns, Name: name + "-0", UID: "pod-" + name, Node: "n1", GPUs: 1, Created: now.Add(-48 * time.Hour), Ready: true, Owner: key})
	w.in.Report.Pods = append(w.in.Report.Pods, usage.PodUsage{Namespace: ns, Pod: name + "-0", Node: "n1", Devices: []string{"n1/0/GPU-" + name},
		HourlyActivity: full, Totals: usage.Totals{AllocatedGPUSeconds: 24 * 3600, ActivityCoverage: usage.Known(1), CostPerAllocatedGPUHour: usage.Known(2)},
		Pattern: usage.Pattern{BurstRatio: usage.Known(0)}})
	return &w.in.Report.Pods[len(w.in.Report.Pods)-1]
}

func TestDetect(t *testing.T) {
	type want struct {
		action Action
		skip   string
	}
	cases := map[string]struct {
		setup func(w *world)
		want  want
	}{
		"idle deployment is scaled to zero": {func(w *world) { w.pod("ml", "chat", Deployment, 0.01) }, want{action: ScaleToZero}},
		"keda-scaled deployment is paused": {func(w *world) {
			w.pod("ml", "chat", Deployment, 0.0)
			w.in.Owners["Deployment/ml/chat"].Scaler = &Ref{Kind: ScaledObject, Namespace: "ml", Name: "chat"}
		}, want{action: PauseKEDA}},
		"notebook is stopped": {func(w *world) { w.pod("ml", "nb", Notebook, 0.0) }, want{action: StopNotebook}},
		"job is suspended":    {func(w *world) { w.pod("ml", "train", Job, 0.0) }, want{action: SuspendJob}},
		"bare pod is evicted": {func(w *world) { w.pod("ml", "dev", Pod, 0.0) }, want{action: Evict}},
		"active in the window of its class": {func(w *world) {
			w.pod("ml", "chat", Deployment, 0.0, 0.0, 0.0, 0.3, 0.0, 0.0, 0.0)
		}, want{skip: SkipActive}},
		"active before the window of its class": {func(w *world) {
			w.pod("ml", "chat", Deployment, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
		}, want{action: ScaleToZero}},
		"namespace not opted in": {func(w *world) { w.pod("web", "chat", Deployment, 0.0) }, want{skip: SkipNotOptedIn}},
		"namespace exempt":       {func(w *world) { w.pod("ml", "chat", Deployment, 0.0); w.in.Namespaces["ml"] = wellknown.ReclaimNever }, want{skip: SkipExempt}},
		"owner exempt": {func(w *world) {
			w.pod("ml", "chat", Deployment, 0.0)
			w.in.Owners["Deployment/ml/chat"].Labels = map[string]string{wellknown.LabelReclaim: wellknown.ReclaimNever}
		}, want{skip: SkipExempt}},
		"pod exempt": {func(w *world) {
			w.pod("ml", "chat", Deployment, 0.0)
			w.in.Pods[0].Labels = map[string]string{wellknown.LabelReclaim: wellknown.ReclaimNever}
		}, want{skip: SkipExempt}},
		"snoozed": {func(w *world) {
			w.pod("ml", "chat", Deployment, 0.0)
			w.in.Owners["Deployment/ml/chat"].Annotations = map[string]string{wellknown.AnnotationReclaimSnooze: now.Add(time.Hour).Format(time.RFC3339)}
		}, want{skip: SkipSnoozed}},
		"unreadable snooze is a snooze": {func(w *world) {
			w.pod("ml", "chat", Deployment, 0.0)
			w.in.Owners["Deployment/ml/chat"].Annotations = map[string]string{wellknown.AnnotationReclaimSnooze: "tomorrow"}
		}, want{skip: SkipSnoozed}},
		"snooze passed": {func(w *world) {
			w.pod("ml", "chat", Deployment, 0.0)
			w.in.Owners["Deployment/ml/chat"].Annotations = map[string]string{wellknown.AnnotationReclaimSnooze: now.Add(-time.Hour).Format(time.RFC3339)}
		}, want{action: ScaleToZero}},
		"still starting": {func(w *world) { w.pod("ml", "chat", Deployment, 0.0); w.in.Pods[0].Ready = false }, want{skip: SkipStarting}},
		"within grace": {func(w *world) {
			w.pod("ml", "chat", Deployment, 0.0)
			w.in.Pods[0].Created = now.Add(-10 * time.Minute)
		}, want{skip: SkipYoung}},
		"held for less than the idle window": {func(w *world) {
			p := w.pod("ml", "chat", Deployment, 0.0)
			p.FirstHour, p.HourlyActivity = 20, p.HourlyActivity[20:]
		}, want{skip: SkipShort}},
		"no samples in the last hour": {func(w *world) {
			p := w.pod("ml", "chat", Deployment, 0.0)
			p.HourlyActivity = p.HourlyActivity[:23]
		}, want{skip: SkipUnmeasured}},
		"activity mostly unknown": {func(w *world) {
			p := w.pod("ml", "chat", Deployment, 0.0)
			p.ActivityCoverage = usage.Known(0.5)
		}, want{skip: SkipUnmeasured}},
		"no series at all": {func(w *world) {
			w.pod("ml", "chat", Deployment, 0.0)
			w.in.Report.Pods = nil
		}, want{skip: SkipUnmeasured}},
		"application metric serving": {func(w *world) {
			p := w.pod("ml", "chat", Deployment, 0.0)
			p.App = []usage.AppUsage{{Name: "tokens_per_second", Mean: usage.Known(3)}}
		}, want{skip: SkipAppActive}},
		"application metric unknown": {func(w *world) {
			p := w.pod("ml", "chat", Deployment, 0.0)
			p.App = []usage.AppUsage{{Name: "tokens_per_second", Mean: usage.Unknown}}
		}, want{skip: SkipAppActive}},
		"application metric at zero": {func(w *world) {
			p := w.pod("ml", "chat", Deployment, 0.0)
			p.App = []usage.AppUsage{{Name: "tokens_per_second", Mean: usage.Known(0)}}
		}, want{action: ScaleToZero}},
		"cpu busy": {func(w *world) {
			w.pod("ml", "chat", Deployment, 0.0)
			w.in.CPUCores["ml/chat-0"] = 3
		}, want{skip: SkipCPUBusy}},
		"daemonset": {func(w *world) {
			w.pod("ml", "agent", Deployment, 0.0)
			w.in.Owners["Deployment/ml/agent"].Unsupported = "DaemonSet ml/agent: reclaim cannot pause a DaemonSet"
		}, want{skip: SkipUnsupported}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld()
			tc.setup(w)
			s := Detect(w.in, DefaultPolicy())
			var got want
			switch {
			case len(s.Candidates) == 1 && len(s.Skipped) == 0:
				got.action = s.Candidates[0].Action
			case len(s.Skipped) == 1 && len(s.Candidates) == 0:
				got.skip = s.Skipped[0].Reason
			default:
				t.Fatalf("want one candidate or one skip, got %+v", s)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("(-want +got)\n%s\nset: %+v", diff, s)
			}
		})
	}
}

func TestEvidence(t *testing.T) {
	w := newWorld()
	p := w.pod("ml", "chat", Deployment, 0.4, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01)
	p.Pattern.BurstRatio = usage.Known(0.02)
	s := Detect(w.in, DefaultPolicy())
	if len(s.Candidates) != 1 {
		t.Fatalf("candidates %+v, skipped %+v", s.Candidates, s.Skipped)
	}
	ev := s.Candidates[0].Evidence
	last := now.Add(-9 * time.Hour)
	want := Evidence{IdleFor: Duration(6 * time.Hour), MeanActivity: 0.01, LastActive: &last, IdleGPUHours: 9, CostPerDay: ptr(48.0)}
	if diff := cmp.Diff(want, ev); diff != "" {
		t.Errorf("evidence (-want +got)\n%s", diff)
	}
	// Bursts with no active hour in the window flag keep-alive.
	w = newWorld()
	p = w.pod("ml", "chat", Deployment, 0.02)
	p.Pattern.BurstRatio = usage.Known(0.03)
	ev = Detect(w.in, DefaultPolicy()).Candidates[0].Evidence
	if !ev.KeepAlive || ev.BurstRatio != 0.03 || ev.IdleGPUHours != 24 {
		t.Errorf("keep-alive evidence %+v", ev)
	}
}

func TestSiblingBusyKeepsOwner(t *testing.T) {
	w := newWorld()
	w.pod("ml", "chat", Deployment, 0.0)
	w.pod("ml", "chat2", Deployment, 0.5)
	w.in.Pods[1].Owner = "Deployment/ml/chat" // a second replica, busy
	s := Detect(w.in, DefaultPolicy())
	if len(s.Candidates) != 0 || len(s.Skipped) != 1 || s.Skipped[0].Reason != SkipActive {
		t.Errorf("an owner with a busy replica must be left alone: %+v", s)
	}
}

func TestNoticeAndApproval(t *testing.T) {
	w := newWorld()
	w.pod("ml", "chat", Deployment, 0.0)
	p := DefaultPolicy()
	c := Detect(w.in, p).Candidates[0]
	if c.State != StateToNotify || c.AutoApproved {
		t.Fatalf("first sight: %s, auto %t", c.State, c.AutoApproved)
	}
	notice := `{"id":"` + c.ID + `","deadline":"` + now.Add(time.Hour).Format(time.RFC3339) + `"}`
	w.in.Owners["Deployment/ml/chat"].Annotations = map[string]string{wellknown.AnnotationReclaimNotice: notice}
	if c := Detect(w.in, p).Candidates[0]; c.State != StateNoticed || !c.Deadline.Equal(now.Add(time.Hour)) {
		t.Errorf("noticed: %s %v", c.State, c.Deadline)
	}
	w.in.Now = now.Add(2 * time.Hour)
	if c := Detect(w.in, p).Candidates[0]; c.State != StateDue {
		t.Errorf("after the deadline: %s", c.State)
	}
	// A notice for other evidence (another pod UID) is no notice.
	w.in.Pods[0].UID = "recreated"
	if c := Detect(w.in, p).Candidates[0]; c.State != StateToNotify {
		t.Errorf("notice of another candidate: %s", c.State)
	}
	p.Classes[ClassInference].AutoApprove = &AutoApprove{ExcludeNamespaces: []string{"prod"}}
	if c := Detect(w.in, p).Candidates[0]; !c.AutoApproved {
		t.Errorf("auto-approve of the class not applied")
	}
}

func TestBarePodNeverAutoApproved(t *testing.T) {
	w := newWorld()
	w.pod("ml", "dev", Pod, 0.0)
	p := DefaultPolicy()
	p.Classes[ClassNotebook].AutoApprove = &AutoApprove{}
	c := Detect(w.in, p).Candidates[0]
	if c.AutoApproved || c.Restorable {
		t.Errorf("bare pod: auto %t restorable %t", c.AutoApproved, c.Restorable)
	}
}

func TestCapsAndHash(t *testing.T) {
	w := newWorld()
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		w.pod("ml", n, Deployment, 0.0)
	}
	p := DefaultPolicy()
	s := Detect(w.in, p)
	if len(s.Candidates) != 3 || len(s.Skipped) != 2 || s.Skipped[0].Reason != SkipCap {
		t.Fatalf("cap per namespace 3: %d candidates, skipped %+v", len(s.Candidates), s.Skipped)
	}
	again := Detect(w.in, p)
	if again.Hash != s.Hash {
		t.Errorf("hash not stable: %s then %s", s.Hash, again.Hash)
	}
	cut, err := s.Only([]string{s.Candidates[1].ID})
	if err != nil || len(cut.Candidates) != 1 || cut.Hash == s.Hash {
		t.Errorf("Only: %v %+v", err, cut)
	}
	if _, err := s.Only([]string{"nope"}); err == nil {
		t.Errorf("Only of an unknown ID must fail")
	}
	w.in.Pods[0].UID = "recreated"
	if Detect(w.in, p).Hash == s.Hash {
		t.Errorf("a recreated pod must change the hash")
	}
}

func TestBusinessHours(t *testing.T) {
	p, err := ParsePolicy([]byte(`{apiVersion: gpupack.io/v1alpha1, kind: ReclaimPolicy, businessHours: {timezone: Europe/Berlin, days: [Mon, Tue, Wed, Thu, Fri], start: "08:00", end: "19:00"}}`), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	mon := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC) // 11:00 in Berlin
	for at, want := range map[time.Time]bool{mon: true, mon.Add(9 * time.Hour): false, now: false /* Sunday */} {
		if got := p.InBusinessHours(at); got != want {
			t.Errorf("%s: in business hours %t, want %t", at, got, want)
		}
	}
}

func TestParsePolicy(t *testing.T) {
	good := `apiVersion: gpupack.io/v1alpha1
kind: ReclaimPolicy
namespaces: [ml]
classes:
  notebook: {idleFor: 2d, notice: "0", autoApprove: {excludeNamespaces: [prod]}}
maxPerRun: 5
`
	p, err := ParsePolicy([]byte(good), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p.Classes[ClassNotebook].IdleFor.D() != 48*time.Hour || p.Classes[ClassNotebook].Notice != 0 || p.Classes[ClassNotebook].Grace.D() != time.Hour ||
		p.Classes[ClassTraining].IdleFor.D() != 2*time.Hour || p.MaxPerRun != 5 || p.MaxPerNS != 3 || p.ActivityFloor != usage.ActivityIdleFloor {
		t.Errorf("defaults not filled in: %+v", p)
	}
	for name, doc := range map[string]string{
		"kind":        `{apiVersion: gpupack.io/v1alpha1, kind: Policy}`,
		"class":       `{apiVersion: gpupack.io/v1alpha1, kind: ReclaimPolicy, classes: {batch: {idleFor: 1h}}}`,
		"half hour":   `{apiVersion: gpupack.io/v1alpha1, kind: ReclaimPolicy, classes: {training: {idleFor: 90m}}}`,
		"floor":       `{apiVersion: gpupack.io/v1alpha1, kind: ReclaimPolicy, activityFloor: 5}`,
		"cap":         `{apiVersion: gpupack.io/v1alpha1, kind: ReclaimPolicy, maxPerRun: 0}`,
		"unknown":     `{apiVersion: gpupack.io/v1alpha1, kind: ReclaimPolicy, idle: 1h}`,
		"timezone":    `{apiVersion: gpupack.io/v1alpha1, kind: ReclaimPolicy, businessHours: {timezone: Mars/Olympus, days: [Mon], start: "08:00", end: "09:00"}}`,
		"day":         `{apiVersion: gpupack.io/v1alpha1, kind: ReclaimPolicy, businessHours: {days: [Monday], start: "08:00", end: "09:00"}}`,
		"hours":       `{apiVersion: gpupack.io/v1alpha1, kind: ReclaimPolicy, businessHours: {days: [Mon], start: "18:00", end: "09:00"}}`,
		"namespace":   `{apiVersion: gpupack.io/v1alpha1, kind: ReclaimPolicy, namespaces: ["a/b"]}`,
		"duration":    `{apiVersion: gpupack.io/v1alpha1, kind: ReclaimPolicy, classes: {training: {idleFor: soon}}}`,
		"empty class": `{apiVersion: gpupack.io/v1alpha1, kind: ReclaimPolicy, classes: {training: null}}`,
	} {
		if _, err := ParsePolicy([]byte(doc), "p.yaml"); err == nil {
			t.Errorf("%s: %s accepted", name, doc)
		}
	}
}

func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte(`{apiVersion: gpupack.io/v1alpha1, kind: ReclaimPolicy, namespaces: [ml], classes: {notebook: {idleFor: 24h}}}`))
	f.Add([]byte(`{apiVersion: gpupack.io/v1alpha1, kind: ReclaimPolicy, businessHours: {days: [Mon], start: "08:00", end: "09:00"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePolicy(data, "fuzz")
		if err != nil {
			return
		}
		if p.MaxPerRun < 1 || p.MaxPerNS < 1 || len(p.Classes) != len(Classes) || p.MaxIdleFor() <= 0 {
			t.Fatalf("accepted an invalid policy: %+v", p)
		}
		p.InBusinessHours(now)
	})
}

func TestMeasure(t *testing.T) {
	cost := 48.0
	rec := Record{Pods: []PodRef{{Namespace: "ml", Name: "chat-0", Devices: []string{"n1/0/A"}, GPUs: 1}}, Neighbours: []string{"ml/side-0"},
		Predicted: Predicted{GPUs: 1, CostPerDay: &cost}}
	r := &usage.Report{Start: now, End: now.Add(10 * time.Hour), Pods: []usage.PodUsage{
		{Namespace: "ml", Pod: "chat-0", Devices: []string{"n1/0/A"}, Totals: usage.Totals{AllocatedGPUSeconds: 1800}},  // 0.5 h while stopping
		{Namespace: "ml", Pod: "side-0", Devices: []string{"n1/0/A"}, Totals: usage.Totals{AllocatedGPUSeconds: 36000}}, // a neighbour: not reuse
		{Namespace: "ml", Pod: "new-0", Devices: []string{"n1/0/A", "n1/1/B"}, Totals: usage.Totals{AllocatedGPUSeconds: 8 * 3600}},
		{Namespace: "ml", Pod: "far-0", Devices: []string{"n2/0/C"}, Totals: usage.Totals{AllocatedGPUSeconds: 36000}},
	}}
	got := Measure(rec, r)
	want := Measured{From: now, To: now.Add(10 * time.Hour), Hours: 10, PredictedGPUHrs: 10, StillHeldGPUHrs: 0.5, FreedGPUHours: 9.5,
		ReusedGPUHours: 4, UnusedGPUHours: 5.5, FreedCost: ptr(19.0), ReusedCost: ptr(8.0)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}
