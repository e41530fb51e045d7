package usage

import (
	"maps"
	"slices"
	"time"
)

// podState is a pod's accounting while the devices go by, on either
// path, until assemble turns it into the report's PodUsage.
type podState struct {
	// usage holds the few figures of the pod's PodUsage known before
	// assemble, which builds the rest in the report itself: a month of a
	// fleet's pods is many, and a whole PodUsage in each state would
	// double them at the report's peak.
	usage podHead
	acc   acc
	// devices, sources and nodes are sets, kept as short lists: a pod
	// holds a few devices at most, and a month of a fleet's pods is many.
	devices []string
	sources []string
	nodes   []string
	// vram and activity are the raw path's samples; vramQ and activityQ
	// the hourly path's percentile lists.
	vram       []float64
	activity   []float64
	vramQ      quantileSet
	activityQ  quantileSet
	dramSum    float64
	dramN      float64
	powerSum   float64
	powerN     float64
	firstSlot  int
	firstUse   int
	containers []podContainer
	// Filled in by either path before assemble: the pattern's
	// statistics, when the pod was first seen on a GPU and first used one
	// (zero if never). The usage's VRAM, activity, DRAM and power figures
	// are set too.
	stats      ActivityStats
	attached   time.Time
	firstUseAt time.Time
	// firstHour is the start of the window's hour in which the pod was
	// first seen on a GPU, and firstHourGS its allocated GPU-seconds in
	// that hour: over the seconds from attached to the hour's end they
	// give the GPUs it held as it started.
	firstHour   time.Time
	firstHourGS float64
	// hours are the pod's activity-known and active GPU-seconds per hour.
	hours podHours
	// claims are the DRA claims of its series; sharedWith the pods it
	// shared a GPU with (PodUsage.SharedWith).
	claims, sharedWith map[string]bool
	// perProcessSec and evenSplitSec are the seconds at which the pod
	// shared a GPU, split per process or evenly (PodUsage.Attribution).
	perProcessSec, evenSplitSec float64
}

// countShared counts sec seconds at which the pod shared a GPU.
func (ps *podState) countShared(sec float64, perProcess bool) {
	if perProcess {
		ps.perProcessSec += sec
	} else {
		ps.evenSplitSec += sec
	}
}

// podHead is what a pod's state knows of its PodUsage before assemble:
// the same fields, by the same names.
type podHead struct {
	Namespace, Pod, Node   string
	VRAMUsedMiB, Activity  Percentiles
	DRAMActive, PowerWatts Amount
}

// Key is "namespace/pod", as PodUsage.Key.
func (h *podHead) Key() string { return h.Namespace + "/" + h.Pod }

// podUsage is the PodUsage that h begins.
func (h *podHead) podUsage() PodUsage {
	return PodUsage{Namespace: h.Namespace, Pod: h.Pod, Node: h.Node, VRAMUsedMiB: h.VRAMUsedMiB, Activity: h.Activity, DRAMActive: h.DRAMActive, PowerWatts: h.PowerWatts}
}

// countHeld counts gs allocated GPU-seconds of the hour that starts at
// hour towards the GPUs held at start, if it is the pod's first hour.
func (ps *podState) countHeld(hour time.Time, gs float64) {
	if ps.firstHour.IsZero() || hour.Before(ps.firstHour) {
		ps.firstHour, ps.firstHourGS = hour, 0
	}
	if hour.Equal(ps.firstHour) {
		ps.firstHourGS += gs
	}
}

// heldAtStart is the GPUs the pod held as it started: its allocated
// GPU-seconds in its first hour over the seconds from its first step to
// that hour's end (or the window's end); unknown if it was never seen.
func (ps *podState) heldAtStart(windowEnd time.Time) Amount {
	if ps.attached.IsZero() || ps.firstHour.IsZero() {
		return Unknown
	}
	end := ps.firstHour.Add(time.Hour)
	if windowEnd.Before(end) {
		end = windowEnd
	}
	sec := end.Sub(ps.attached).Seconds()
	if sec <= 0 {
		return Unknown
	}
	return Known(round4(ps.firstHourGS / sec))
}

// claim notes a DRA claim of the pod's series; the set is made at the
// first (most pods have none, and a month of a fleet's pods is many).
func (ps *podState) claim(c string) {
	if ps.claims == nil {
		ps.claims = map[string]bool{}
	}
	ps.claims[c] = true
}

// sharedWithPod notes a pod that shared a GPU with ps, making the set at
// the first.
func (ps *podState) sharedWithPod(key string) {
	if ps.sharedWith == nil {
		ps.sharedWith = map[string]bool{}
	}
	ps.sharedWith[key] = true
}

// podRef names a pod, as its key "namespace/pod" does, without building
// the key.
type podRef struct{ namespace, pod string }

func (o Owner) podRef() podRef { return podRef{o.Namespace, o.Pod} }

// comparePodRefs orders pods as their keys "namespace/pod" order.
func comparePodRefs(x, y podRef) int {
	return compareJoined([]string{x.namespace, "/", x.pod}, []string{y.namespace, "/", y.pod})
}

// podPool keeps the states of pods already in the report for pods yet to
// come: the hourly path finishes its pods one by one, and a month of a
// fleet's pods made as many states, all of them garbage, at the
// report's peak.
type podPool struct{ spare []*podState }

// get returns a state for a new pod, reused if there is one.
func (p *podPool) get() *podState {
	if p == nil || len(p.spare) == 0 {
		return &podState{}
	}
	ps := p.spare[len(p.spare)-1]
	p.spare = p.spare[:len(p.spare)-1]
	return ps
}

// put takes back the state of a pod that is in the report. The report
// holds its device and source lists; the rest is kept for reuse.
func (p *podPool) put(ps *podState) {
	nodes, containers, hours := ps.nodes[:0], ps.containers[:0], podHours{known: ps.hours.known[:0], active: ps.hours.active[:0]}
	clear(ps.claims)
	clear(ps.sharedWith)
	*ps = podState{nodes: nodes, containers: containers, hours: hours, claims: ps.claims, sharedWith: ps.sharedWith}
	p.spare = append(p.spare, ps)
}

// resolveOwner finds or makes (from pool, if not nil) the pod state and
// container accumulator of an owner first seen holding device d (whose
// key is dkey) at slot k.
func resolveOwner(pods map[podRef]*podState, pool *podPool, o Owner, d Device, dkey, source string, k, slots int) (*podState, *acc) {
	ps := pods[o.podRef()]
	if ps == nil {
		ps = pool.get()
		ps.usage = podHead{Namespace: o.Namespace, Pod: o.Pod, Node: d.Node}
		ps.firstSlot, ps.firstUse = k, -1
		if slots > 0 {
			ps.vram, ps.activity = make([]float64, 0, slots), make([]float64, 0, slots)
		}
		pods[o.podRef()] = ps
	}
	ps.firstSlot = min(ps.firstSlot, k)
	if !slices.Contains(ps.devices, dkey) {
		ps.devices = append(ps.devices, dkey)
	}
	if !slices.Contains(ps.nodes, d.Node) {
		ps.nodes = append(ps.nodes, d.Node)
	}
	if source != "" && !slices.Contains(ps.sources, source) {
		ps.sources = append(ps.sources, source)
	}
	for _, c := range ps.containers {
		if c.name == o.Container {
			return ps, c.acc
		}
	}
	// A reused state keeps its containers' accumulators past its length.
	var ca *acc
	if n := len(ps.containers); n < cap(ps.containers) {
		ca = ps.containers[:n+1][n].acc
	}
	if ca == nil {
		ca = &acc{}
	}
	*ca = acc{}
	ps.containers = append(ps.containers, podContainer{o.Container, ca})
	return ps, ca
}

// podContainer is the accumulator of one container of a pod.
type podContainer struct {
	name string
	acc  *acc
}

// sharers collects, for one device, the pods present at its shared steps
// (two or more pods at once), by hour of the window: what
// PodUsage.SharedWith and DeviceUsage.SharedBy are made of, the same way on
// both accounting paths.
type sharers struct {
	byHour map[int]map[*podState]bool
}

func (s *sharers) add(h int, ps *podState) {
	if s.byHour == nil {
		s.byHour = map[int]map[*podState]bool{}
	}
	if s.byHour[h] == nil {
		s.byHour[h] = map[*podState]bool{}
	}
	s.byHour[h][ps] = true
}

// settle adds to each pod's sharedWith the other pods of its hours and
// returns every pod that shared the device, sorted; nil if none did.
func (s *sharers) settle() []string {
	all := map[string]bool{}
	for _, pods := range s.byHour {
		for ps := range pods {
			all[ps.usage.Key()] = true
			for other := range pods {
				if other != ps {
					ps.sharedWithPod(other.usage.Key())
				}
			}
		}
	}
	return sortedKeys(all)
}

// sortedKeys lists a set's members in order; nil for an empty set.
func sortedKeys(set map[string]bool) []string {
	if len(set) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(set))
}
