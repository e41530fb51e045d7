package usage

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The start-up phases of a GPU pod, in order. Between them they cover its
// start from creation to the app being ready, so that where every marker
// is known their seconds add up to Startup.TotalSeconds:
//
//	created -> scheduled            PhaseScheduling
//	scheduled -> containers started PhaseImagePull (the kubelet's stated pull
//	                                times) + PhaseInit (the rest: init
//	                                containers, downloads into volumes,
//	                                volume mounts, sandbox)
//	containers started -> first GPU use   PhaseToFirstUse
//	first GPU use -> app ready            PhaseFirstUseToReady
//
// A pod holds its GPUs from the moment it is scheduled, so every phase but
// scheduling holds them; before the first GPU use they are held idle.
const (
	PhaseScheduling      = "scheduling"
	PhaseImagePull       = "image pull"
	PhaseInit            = "init"
	PhaseToFirstUse      = "to first GPU use"
	PhaseFirstUseToReady = "first use to ready"
)

// Phases lists the phase names in order.
var Phases = phaseNames[:]

// The phases' positions in Phases, in PhaseTimes and wherever a pod's
// phases are held by position: each is named where it is used, so no list
// depends on another's order.
const (
	phaseScheduling = iota
	phaseImagePull
	phaseInit
	phaseToFirstUse
	phaseFirstUseToReady
	nPhases
)

var phaseNames = [nPhases]string{
	phaseScheduling:      PhaseScheduling,
	phaseImagePull:       PhaseImagePull,
	phaseInit:            PhaseInit,
	phaseToFirstUse:      PhaseToFirstUse,
	phaseFirstUseToReady: PhaseFirstUseToReady,
}

// PhaseTime is one phase of one pod's start.
type PhaseTime struct {
	Phase   string `json:"phase"`
	Seconds Amount `json:"seconds"`
	// HeldGPUSeconds are the GPUs the pod held during the phase times its
	// seconds (0 for scheduling: no GPU is held yet); HeldCost is what
	// they cost at the pod's price per allocated GPU-second. Unknown where
	// the phase's length, the GPUs held or the price is.
	HeldGPUSeconds Amount `json:"heldGPUSeconds"`
	HeldCost       Amount `json:"heldCost"`
	// Idle says the GPUs were held idle throughout (every phase before
	// the first GPU use).
	Idle bool `json:"idle"`
}

// PhaseTimes are a pod's phases, the first of Phases on, each named by
// its place: the three figures of each PhaseTime and its Idle, in 128
// bytes where a list of PhaseTime is a 384-byte allocation and its header
// (a month of a fleet's report holds 180,000 of them). It is written and
// read as that list, null where it holds none (the zero PhaseTimes).
type PhaseTimes struct {
	n      uint8  // phases held, from the first
	known  uint16 // bit 3*i+j: figure j of phase i is known (seconds, held GPU-seconds, held cost)
	idle   uint8  // bit i: phase i is Idle
	values [nPhases][3]float64
}

// NewPhaseTimes holds list, which must name the first len(list) phases of
// Phases in their order.
func NewPhaseTimes(list []PhaseTime) (PhaseTimes, error) {
	var p PhaseTimes
	if len(list) > len(phaseNames) {
		return p, fmt.Errorf("%d start-up phases, want at most the %d of %q", len(list), len(phaseNames), Phases)
	}
	for i, pt := range list {
		if pt.Phase != phaseNames[i] {
			return p, fmt.Errorf("start-up phase %d is %q, want %q (the phases are %q, in that order)", i, pt.Phase, phaseNames[i], Phases)
		}
		p.put(i, pt)
	}
	return p, nil
}

// put sets phase i (named by its place) to pt, holding phases up to it.
func (p *PhaseTimes) put(i int, pt PhaseTime) {
	p.n = max(p.n, uint8(i+1))
	for j, a := range [3]Amount{pt.Seconds, pt.HeldGPUSeconds, pt.HeldCost} {
		bit := uint16(1) << (3*i + j)
		p.known &^= bit
		p.values[i][j] = 0
		if a.Known() {
			p.known |= bit
			p.values[i][j] = a.Value()
		}
	}
	p.idle &^= 1 << i
	if pt.Idle {
		p.idle |= 1 << i
	}
}

// Len is how many phases p holds.
func (p PhaseTimes) Len() int { return int(p.n) }

// At is phase i, 0 <= i < Len.
func (p PhaseTimes) At(i int) PhaseTime {
	pt := PhaseTime{Phase: phaseNames[i], Idle: p.idle&(1<<i) != 0}
	for j, dst := range [3]*Amount{&pt.Seconds, &pt.HeldGPUSeconds, &pt.HeldCost} {
		if p.known&(1<<(3*i+j)) != 0 {
			*dst = Known(p.values[i][j])
		}
	}
	return pt
}

// All lists the phases p holds; nil for none.
func (p PhaseTimes) All() []PhaseTime {
	if p.n == 0 {
		return nil
	}
	out := make([]PhaseTime, p.n)
	for i := range out {
		out[i] = p.At(i)
	}
	return out
}

// Equal says p and o hold the same phases, figure for figure (bit for
// bit); go-cmp compares by it.
func (p PhaseTimes) Equal(o PhaseTimes) bool {
	if p.n != o.n || p.known != o.known || p.idle != o.idle {
		return false
	}
	for i := range p.values {
		for j := range p.values[i] {
			if math.Float64bits(p.values[i][j]) != math.Float64bits(o.values[i][j]) {
				return false
			}
		}
	}
	return true
}

// MarshalJSON writes the list of PhaseTime (null for none) byte for byte
// as encoding/json writes a []PhaseTime, in one allocation: a month of a
// fleet's report writes 180,000 of them, and through encoding/json each
// cost 15 (100 MB of garbage, which the JSON phase's peak grew by).
func (p PhaseTimes) MarshalJSON() ([]byte, error) {
	if p.n == 0 {
		return jsonNull, nil
	}
	b := make([]byte, 0, 96*int(p.n))
	b = append(b, '[')
	for i := range int(p.n) {
		if i > 0 {
			b = append(b, ',')
		}
		pt := p.At(i)
		b = append(b, `{"phase":`...)
		b = strconv.AppendQuote(b, pt.Phase) // the names are plain ASCII, as encoding/json quotes them
		for _, f := range [...]struct {
			key string
			a   Amount
		}{{`,"seconds":`, pt.Seconds}, {`,"heldGPUSeconds":`, pt.HeldGPUSeconds}, {`,"heldCost":`, pt.HeldCost}} {
			b = f.a.appendJSON(append(b, f.key...))
		}
		b = append(b, `,"idle":`...)
		b = strconv.AppendBool(b, pt.Idle)
		b = append(b, '}')
	}
	return append(b, ']'), nil
}

// UnmarshalJSON reads that list (or null); it must name the phases in the
// order of Phases.
func (p *PhaseTimes) UnmarshalJSON(b []byte) error {
	var list []PhaseTime
	if err := json.Unmarshal(b, &list); err != nil {
		return err
	}
	q, err := NewPhaseTimes(list)
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// Startup splits a pod's start into phases. Times are nil when unknown.
type Startup struct {
	// Workload is the pod's owner in its namespace; the pod's name when
	// not known.
	Workload  string     `json:"workload"`
	Created   *time.Time `json:"created"`
	Scheduled *time.Time `json:"scheduled"`
	// ImagesPulled is the last of the kubelet's Pulled events.
	ImagesPulled *time.Time `json:"imagesPulled"`
	// ContainersStarted is when the last app container started; where
	// the kubelet's time is not known, the first sample that named the pod
	// on a GPU (the device is attached when the container is created),
	// as ContainersStartedFrom says.
	ContainersStarted     *time.Time `json:"containersStarted"`
	ContainersStartedFrom string     `json:"containersStartedFrom,omitempty"`
	ContainersReady       *time.Time `json:"containersReady"`
	// GPUAttached is the first sample that named the pod on a GPU.
	GPUAttached *time.Time `json:"gpuAttached"`
	// FirstGPUUse is the start of the first step with activity or
	// framebuffer above the idle floors: the earliest sign of the app's
	// first CUDA work, read at ResolutionSeconds (from Prometheus it is up
	// to one step and one scrape interval after the true first use).
	FirstGPUUse *time.Time `json:"firstGPUUse"`
	// AppReady is the Ready condition, else the first application sample.
	AppReady *time.Time `json:"appReady"`
	// ResolutionSeconds is the step of the samples that FirstGPUUse and
	// GPUAttached were read from: each is true to within one step.
	ResolutionSeconds Seconds `json:"resolutionSeconds"`

	// Images: how many were pulled and found present, the kubelet's stated
	// pull time (without waiting in its queue) and sizes, summed.
	ImagesPulledCount  int    `json:"imagesPulledCount"`
	ImagesPresentCount int    `json:"imagesPresentCount"`
	ImagePullSeconds   Amount `json:"imagePullSeconds"`
	ImageBytes         Amount `json:"imageBytes"`
	// Storage is where the model weights come from.
	Storage ModelStorage `json:"storage"`

	// HeldGPUs are the GPUs the pod held as it started: its allocated
	// GPU-seconds in the hour it was first seen on a GPU over the seconds
	// of that hour from then on (a MIG slice or a time-sliced replica
	// counts as its share).
	HeldGPUs Amount `json:"heldGPUs"`
	// Phases are the phases in the order of Phases.
	Phases PhaseTimes `json:"phases"`
	// LoadSeconds is containers started -> app ready: reading the weights
	// from their storage into the GPU and warming up.
	LoadSeconds Amount `json:"loadSeconds"`
	// TotalSeconds is created -> app ready.
	TotalSeconds Amount `json:"totalSeconds"`
	// HeldGPUSeconds are the GPUs held from scheduled to app ready, whatever
	// phases in between are known; HeldIdleGPUSeconds the part before the
	// first GPU use; HeldCost what HeldGPUSeconds cost.
	HeldGPUSeconds     Amount `json:"heldGPUSeconds"`
	HeldIdleGPUSeconds Amount `json:"heldIdleGPUSeconds"`
	HeldCost           Amount `json:"heldCost"`
}

// Phase returns the pod's phase of that name (an unknown one when absent).
func (s *Startup) Phase(name string) PhaseTime {
	if i := slices.Index(Phases, name); i >= 0 && i < s.Phases.Len() {
		return s.Phases.At(i)
	}
	return PhaseTime{Phase: name}
}

// startupInput is what startupOf reads of one pod.
type startupInput struct {
	events PodEvents
	// attached and firstUse are the first step that named the pod on a
	// GPU and the first step it used one; zero if none.
	attached, firstUse time.Time
	// appFirst is the pod's first application sample; zero if none.
	appFirst time.Time
	step     time.Duration
	// heldGPUs are the GPUs held at start; pricePerGPUSecond the pod's
	// cost per allocated GPU-second.
	heldGPUs, pricePerGPUSecond Amount
}

// startupOf splits one pod's start into phases.
func startupOf(in startupInput, pod string) Startup {
	e := in.events
	st := Startup{
		Workload:          cmp.Or(e.Workload, pod),
		Created:           timePtr(e.Created),
		Scheduled:         timePtr(e.Scheduled),
		ContainersStarted: timePtr(e.ContainersStarted),
		ContainersReady:   timePtr(e.ContainersReady),
		AppReady:          timePtr(e.Ready),
		GPUAttached:       timePtr(in.attached),
		FirstGPUUse:       timePtr(in.firstUse),
		ResolutionSeconds: Seconds(in.step.Seconds()),
		Storage:           e.Storage,
		HeldGPUs:          in.heldGPUs,
	}
	if st.Storage.Kind == "" {
		st.Storage = ModelStorage{Kind: StorageUnknown, Evidence: "the pod's spec was not read (give the live cluster)"}
	}
	if st.ContainersStarted != nil {
		st.ContainersStartedFrom = "kubelet"
	} else if st.GPUAttached != nil {
		st.ContainersStarted, st.ContainersStartedFrom = st.GPUAttached, "gpu-attached"
	}
	if st.AppReady == nil && !in.appFirst.IsZero() {
		st.AppReady = timePtr(in.appFirst)
	}

	var pull, size float64
	var lastPull time.Time
	for _, p := range e.ImagePulls {
		if p.At.After(lastPull) {
			lastPull = p.At
		}
		if p.Present {
			st.ImagesPresentCount++
			continue
		}
		st.ImagesPulledCount++
		pull += p.PullSeconds
		size += float64(p.SizeBytes)
	}
	st.ImagesPulled = timePtr(lastPull)
	if len(e.ImagePulls) > 0 {
		st.ImagePullSeconds = Known(pull)
		if size > 0 || st.ImagesPulledCount == 0 {
			st.ImageBytes = Known(size)
		}
	}

	start := between(st.Scheduled, st.ContainersStarted)
	pullPhase, initPhase := Unknown, Unknown
	if start.Known() && st.ImagePullSeconds.Known() {
		// The stated pull times fall inside scheduled -> started; a queue
		// wait or clock skew that makes them longer is capped there.
		pullPhase = Known(min(st.ImagePullSeconds.Value(), start.Value()))
		initPhase = Known(start.Value() - pullPhase.Value())
	}
	// By position: a map of them would be an allocation per pod.
	seconds := [nPhases]Amount{
		phaseScheduling:      between(st.Created, st.Scheduled),
		phaseImagePull:       pullPhase,
		phaseInit:            initPhase,
		phaseToFirstUse:      between(st.ContainersStarted, st.FirstGPUUse),
		phaseFirstUseToReady: between(st.FirstGPUUse, st.AppReady),
	}
	for i, name := range phaseNames {
		pt := PhaseTime{Phase: name, Seconds: seconds[i], Idle: i != phaseFirstUseToReady}
		switch {
		case i == phaseScheduling:
			pt.HeldGPUSeconds, pt.HeldCost = Known(0), Known(0)
		case pt.Seconds.Known() && in.heldGPUs.Known():
			pt.HeldGPUSeconds = Known(pt.Seconds.Value() * in.heldGPUs.Value())
			if in.pricePerGPUSecond.Known() {
				pt.HeldCost = Known(pt.HeldGPUSeconds.Value() * in.pricePerGPUSecond.Value())
			}
		}
		st.Phases.put(i, pt)
	}
	st.LoadSeconds = between(st.ContainersStarted, st.AppReady)
	st.TotalSeconds = between(st.Created, st.AppReady)
	held := func(a Amount) Amount {
		if !a.Known() || !in.heldGPUs.Known() {
			return Unknown
		}
		return Known(a.Value() * in.heldGPUs.Value())
	}
	st.HeldGPUSeconds = held(between(st.Scheduled, st.AppReady))
	st.HeldIdleGPUSeconds = held(between(st.Scheduled, st.FirstGPUUse))
	if st.HeldGPUSeconds.Known() && in.pricePerGPUSecond.Known() {
		st.HeldCost = Known(st.HeldGPUSeconds.Value() * in.pricePerGPUSecond.Value())
	}
	return st
}

// between is b - a in seconds: unknown where either is unknown; a span
// that the step's resolution makes negative (a first use sampled at the
// start of the step in which the container started) reads 0.
func between(a, b *time.Time) Amount {
	if a == nil || b == nil {
		return Unknown
	}
	return Known(max(b.Sub(*a).Seconds(), 0))
}

// PhaseStats are one phase's seconds over a group of pods: how many pods
// had it known, the nearest-rank p50/p95/max, and the GPU-seconds held
// during it and their cost, summed over the pods where known (unknown when
// none is).
type PhaseStats struct {
	Phase          string      `json:"phase"`
	Pods           int         `json:"pods"`
	Seconds        Percentiles `json:"seconds"`
	HeldGPUSeconds Amount      `json:"heldGPUSeconds"`
	HeldCost       Amount      `json:"heldCost"`
	Idle           bool        `json:"idle"`
}

// StartupGroup is the start-ups of the pods of one workload or one
// storage path.
type StartupGroup struct {
	// Key is "namespace/workload" or the storage path.
	Key  string `json:"key"`
	Pods int    `json:"pods"`
	// Storage is the storage path of the group's pods (the most common
	// one, for a workload).
	Storage string       `json:"storage"`
	Phases  []PhaseStats `json:"phases"`
	// Load is containers started -> app ready; Total created -> app
	// ready; ImagePull the stated pull times; ImageBytes the pulled sizes.
	Load       Percentiles `json:"loadSeconds"`
	Total      Percentiles `json:"totalSeconds"`
	ImagePull  Percentiles `json:"imagePullSeconds"`
	ImageBytes Percentiles `json:"imageBytes"`
	// HeldGPUSeconds, HeldIdleGPUSeconds and HeldCost sum the pods' (from
	// scheduled to app ready, and the part before the first GPU use) over
	// the HeldPods pods where they are known; unknown when none is.
	HeldPods           int    `json:"heldPods"`
	HeldGPUSeconds     Amount `json:"heldGPUSeconds"`
	HeldIdleGPUSeconds Amount `json:"heldIdleGPUSeconds"`
	HeldCost           Amount `json:"heldCost"`
}

// StartupSummary is the start-ups of the report's pods, per workload (the
// costliest first) and per storage path of the model weights (the slowest
// load first).
type StartupSummary struct {
	// ResolutionSeconds is the step that first GPU use was read at.
	ResolutionSeconds Seconds `json:"resolutionSeconds"`
	// Workloads are the StartupWorkloads costliest workloads; Others sums
	// the rest, OtherWorkloads of them (nil and 0 when there are none).
	Workloads      []StartupGroup `json:"workloads"`
	Others         *StartupGroup  `json:"others,omitempty"`
	OtherWorkloads int            `json:"otherWorkloads,omitempty"`
	StoragePaths   []StartupGroup `json:"storagePaths"`
	// Fixes are the changes to where the kept workloads' weights come
	// from that would shorten their every start, the most GPU-hours per
	// month freed first.
	Fixes []StartupFix `json:"fixes,omitempty"`
}

// StartupWorkloads is how many workloads a StartupSummary keeps apart, the
// costliest by held cost (then by name); the start-ups of the rest are
// summed into one group. A month of a fleet's one-pod Jobs would
// otherwise be a group each: hundreds of thousands of rows that no page or
// table can show, and most of the report's memory. Each pod's own
// start-up stays in the report's pods.
const StartupWorkloads = 100

// SummarizeStartup groups the pods' start-ups by workload and by storage
// path. Only pods that started in the window count: those created (or,
// when that is unknown, first seen on a GPU) inside it; a pod that was
// running before the window began has no start to show.
func SummarizeStartup(pods []PodUsage, start, end time.Time, step time.Duration) StartupSummary {
	s := StartupSummary{ResolutionSeconds: Seconds(step.Seconds())}
	// The workloads' held costs first, summed as startupGroup sums them,
	// to pick the costliest before grouping any pod. A month of a
	// fleet's pods is many: the pods are sorted by workload rather than
	// put in a map, and a workload's key is built only for those kept
	// apart.
	type workload struct{ namespace, name string }
	workloadOf := func(i int32) workload { return workload{pods[i].Namespace, pods[i].Startup.Workload} }
	byKey := func(a, b workload) int { // as their keys "namespace/name" order
		return compareJoined([]string{a.namespace, "/", a.name}, []string{b.namespace, "/", b.name})
	}
	started := make([]int32, 0, len(pods))
	for i := range pods {
		st := &pods[i].Startup
		at := st.Created
		if at == nil {
			at = st.GPUAttached
		}
		if at == nil || at.Before(start) || !at.Before(end) {
			continue
		}
		if at == st.GPUAttached && !at.After(start) {
			// Seen on a GPU at the window's first step: it may have
			// started long before.
			continue
		}
		started = append(started, int32(i))
	}
	// Each workload's pods in a run, in the order of the pods.
	byWorkload := slices.Clone(started)
	slices.SortStableFunc(byWorkload, func(i, j int32) int { return byKey(workloadOf(i), workloadOf(j)) })
	type run struct {
		cost     float64
		from, to int32 // in byWorkload
	}
	runs := make([]run, 0, len(byWorkload))
	for k, i := range byWorkload {
		if k == 0 || workloadOf(i) != workloadOf(byWorkload[k-1]) {
			runs = append(runs, run{from: int32(k)})
		}
		r := &runs[len(runs)-1]
		r.to = int32(k + 1)
		if st := &pods[i].Startup; st.HeldGPUSeconds.Known() && st.HeldCost.Known() {
			r.cost += st.HeldCost.Value()
		}
	}
	// Runs are in the order of their keys: a stable sort by cost keeps
	// that order among equal costs.
	slices.SortStableFunc(runs, func(a, b run) int { return cmp.Compare(b.cost, a.cost) })
	keptPod := make([]bool, len(pods))
	for _, r := range runs[:min(len(runs), StartupWorkloads)] {
		sts := make([]*Startup, 0, r.to-r.from)
		for _, i := range byWorkload[r.from:r.to] {
			sts = append(sts, &pods[i].Startup)
			keptPod[i] = true
		}
		w := workloadOf(byWorkload[r.from])
		s.Workloads = append(s.Workloads, startupGroup(w.namespace+"/"+w.name, sts))
	}
	kept := len(s.Workloads)
	others := make([]*Startup, 0, len(started))
	byPath := map[string][]*Startup{}
	for _, i := range started {
		st := &pods[i].Startup
		if !keptPod[i] {
			others = append(others, st)
		}
		p := st.Storage.Path()
		byPath[p] = append(byPath[p], st)
	}
	slices.SortFunc(s.Workloads, func(a, b StartupGroup) int { return strings.Compare(a.Key, b.Key) })
	if len(others) > 0 {
		s.OtherWorkloads = len(runs) - kept
		g := startupGroup(fmt.Sprintf("(%d other workloads)", s.OtherWorkloads), others)
		s.Others = &g
	}
	for _, k := range slices.Sorted(maps.Keys(byPath)) {
		g := startupGroup(k, byPath[k])
		g.Storage = k
		s.StoragePaths = append(s.StoragePaths, g)
	}
	slices.SortStableFunc(s.Workloads, func(a, b StartupGroup) int {
		return cmp.Compare(b.HeldCost.Value(), a.HeldCost.Value())
	})
	slices.SortStableFunc(s.StoragePaths, func(a, b StartupGroup) int {
		return cmp.Compare(b.Load.P50.Value(), a.Load.P50.Value())
	})
	s.Fixes = startupFixes(s.Workloads, s.StoragePaths, end.Sub(start))
	return s
}

func startupGroup(key string, sts []*Startup) StartupGroup {
	g := StartupGroup{Key: key, Pods: len(sts)}
	paths := map[string]int{}
	for _, st := range sts {
		paths[st.Storage.Path()]++
		if st.HeldGPUSeconds.Known() {
			g.HeldPods++
			g.HeldGPUSeconds = addKnown(g.HeldGPUSeconds, st.HeldGPUSeconds)
			g.HeldIdleGPUSeconds = addKnown(g.HeldIdleGPUSeconds, st.HeldIdleGPUSeconds)
			g.HeldCost = addKnown(g.HeldCost, st.HeldCost)
		}
	}
	g.Storage = slices.MaxFunc(slices.Sorted(maps.Keys(paths)), func(a, b string) int { return cmp.Compare(paths[a], paths[b]) })
	// One buffer holds each list of known values in turn: percentiles
	// sorts it in place, and a list is done with before the next. A
	// month of a fleet's other workloads are one group of 180,000 pods:
	// eleven lists of their own, grown by appends, were about 20 MB of
	// garbage a group at the end of the report, where its memory peaks.
	buf := make([]float64, 0, len(sts))
	g.Phases = make([]PhaseStats, 0, len(Phases))
	for i, name := range phaseNames {
		ps := PhaseStats{Phase: name, Idle: i != phaseFirstUseToReady}
		buf = buf[:0]
		for _, st := range sts {
			if i >= st.Phases.Len() {
				continue // not held: unknown
			}
			pt := st.Phases.At(i) // by position: Phase(name) searched the names per pod
			if !pt.Seconds.Known() {
				continue
			}
			buf = append(buf, pt.Seconds.Value())
			ps.HeldGPUSeconds = addKnown(ps.HeldGPUSeconds, pt.HeldGPUSeconds)
			ps.HeldCost = addKnown(ps.HeldCost, pt.HeldCost)
		}
		ps.Pods = len(buf)
		ps.Seconds = percentiles(buf)
		g.Phases = append(g.Phases, ps)
	}
	known := func(of func(*Startup) Amount) Percentiles {
		buf = buf[:0]
		for _, st := range sts {
			if a := of(st); a.Known() {
				buf = append(buf, a.Value())
			}
		}
		return percentiles(buf)
	}
	g.Load = known(func(st *Startup) Amount { return st.LoadSeconds })
	g.Total = known(func(st *Startup) Amount { return st.TotalSeconds })
	g.ImagePull = known(func(st *Startup) Amount { return st.ImagePullSeconds })
	g.ImageBytes = known(func(st *Startup) Amount { return st.ImageBytes })
	return g
}

// addKnown adds b to a sum where b is known: the sum of the known parts,
// unknown until one is.
func addKnown(a, b Amount) Amount {
	if !b.Known() {
		return a
	}
	return Known(a.Value() + b.Value())
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}
