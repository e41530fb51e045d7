package usage

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"time"
)

// assembler completes a report from the pods' and nodes' accumulators,
// whichever path filled them: pod, container, namespace and node usage,
// patterns, application metrics and start-up phases. It takes each pod as
// soon as its state is final (add), so that a month of a fleet's pods is
// never held twice, as states and as the report; finish then puts the pods
// in order and totals the namespaces and nodes.
type assembler struct {
	r *Report
	// events are the pods' events by pod, pointing into the caller's
	// slice: a month of a fleet's pods is not copied into the map.
	events map[podRef]*PodEvents
	// podApps and nsApps are the application metrics beside the pod
	// ("namespace/pod") or namespace they name, by metric; appFirst each
	// pod's first application sample.
	podApps, nsApps map[string]map[string]*appAgg
	appFirst        map[string]int64
	namespaces      map[string]*acc
	nsPods          map[string]int
	nodePods        map[string]int
	// containersAt is where each pod's containers begin in r.Containers,
	// in the order the pods were added.
	containersAt []int32
}

// appAgg sums one application metric of a pod or namespace.
type appAgg struct {
	sum, total float64
	n          int
}

// newAssembler starts assembling r, whose pods and containers number
// pods and containers (the report's slices are made that large at once:
// grown by appends, a month of a fleet's pods would be copied over and
// over).
// Application samples each stand for appSeconds of their time.
func newAssembler(r *Report, pods, containers int, apps []AppSeries, podEvents []PodEvents, appSeconds func(tMs int64) float64) *assembler {
	as := &assembler{r: r, events: make(map[podRef]*PodEvents, len(podEvents)), podApps: map[string]map[string]*appAgg{}, nsApps: map[string]map[string]*appAgg{},
		appFirst: map[string]int64{}, namespaces: map[string]*acc{}, nsPods: map[string]int{}, nodePods: map[string]int{},
		containersAt: make([]int32, 0, pods)}
	r.Pods = slices.Grow(r.Pods, pods)
	r.Containers = slices.Grow(r.Containers, containers)
	for i := range podEvents {
		e := &podEvents[i]
		as.events[podRef{e.Namespace, e.Pod}] = e
	}
	startMs, endMs := r.Start.UnixMilli(), r.End.UnixMilli()
	for _, a := range apps {
		target, key := as.podApps, a.Namespace+"/"+a.Pod
		if a.Pod == "" {
			target, key = as.nsApps, a.Namespace
		}
		if target[key] == nil {
			target[key] = map[string]*appAgg{}
		}
		ag := target[key][a.Name]
		if ag == nil {
			ag = &appAgg{}
			target[key][a.Name] = ag
		}
		for _, s := range a.Samples {
			if s.TimeMs < startMs || s.TimeMs >= endMs {
				continue
			}
			if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
				r.Quality.NaNSamples++
				continue
			}
			ag.sum += s.Value
			ag.n++
			ag.total += s.Value * appSeconds(s.TimeMs)
			if first, ok := as.appFirst[key]; a.Pod != "" && (!ok || s.TimeMs < first) {
				as.appFirst[key] = s.TimeMs
			}
		}
	}
	return as
}

// appUsage lists the application metrics of aggs by name, each with its
// cost per million where the GPU figures' cost is known and its total per
// active GPU-hour where their activity is.
func appUsage(aggs map[string]*appAgg, gpus Totals) []AppUsage {
	if len(aggs) == 0 {
		return nil
	}
	var out []AppUsage
	for _, name := range slices.Sorted(maps.Keys(aggs)) {
		ag := aggs[name]
		au := AppUsage{Name: name}
		if ag.n > 0 {
			au.Mean = Known(ag.sum / float64(ag.n))
			au.Total = Known(ag.total)
			if gpus.Cost.Known() && ag.total > 0 {
				au.CostPerMillion = Known(gpus.Cost.Value() / (ag.total / 1e6))
			}
			if gpus.ActiveGPUSeconds.Known() && gpus.ActiveGPUSeconds.Value() > 0 {
				au.PerActiveGPUHour = Known(ag.total / (gpus.ActiveGPUSeconds.Value() / 3600))
			}
		}
		out = append(out, au)
	}
	return out
}

// add puts a pod whose state is final into the report, with its
// containers; the caller releases the state.
func (as *assembler) add(ps *podState) {
	r := as.r
	var key string // "namespace/pod", built only where application metrics may name the pod
	if len(as.podApps) > 0 || len(as.appFirst) > 0 {
		key = ps.usage.Key()
	}
	r.Pods = append(r.Pods, ps.usage.podUsage())
	u := &r.Pods[len(r.Pods)-1]
	slices.Sort(ps.devices)
	slices.Sort(ps.sources)
	u.Devices, u.ActivitySources = slices.Clip(ps.devices), slices.Clip(ps.sources)
	u.Totals = ps.acc.totals()
	u.Pattern = classify(ps.stats, u.DRAMActive, u.VRAMUsedMiB)
	u.HourlyActivity, u.FirstHour = ps.hours.activity()
	u.Claims = sortedKeys(ps.claims)
	u.SharedWith = sortedKeys(ps.sharedWith)
	u.Attribution = attributionOf(len(u.SharedWith) > 0, ps.perProcessSec, ps.evenSplitSec)
	u.App = appUsage(as.podApps[key], u.Totals)
	in := startupInput{attached: ps.attached, firstUse: ps.firstUseAt, step: time.Duration(r.StepSecond * Seconds(time.Second)), heldGPUs: ps.heldAtStart(r.End)}
	if e := as.events[podRef{u.Namespace, u.Pod}]; e != nil {
		in.events = *e
	}
	if first, ok := as.appFirst[key]; ok {
		in.appFirst = time.UnixMilli(first).UTC()
	}
	if u.Cost.Known() && u.AllocatedGPUSeconds > 0 {
		in.pricePerGPUSecond = Known(u.Cost.Value() / float64(u.AllocatedGPUSeconds))
	}
	u.Startup = startupOf(in, u.Pod)

	as.containersAt = append(as.containersAt, int32(len(r.Containers)))
	slices.SortFunc(ps.containers, func(a, b podContainer) int { return cmp.Compare(a.name, b.name) })
	for _, c := range ps.containers {
		r.Containers = append(r.Containers, ContainerUsage{Owner: Owner{Namespace: u.Namespace, Pod: u.Pod, Container: c.name}, Totals: c.acc.totals()})
	}
	na := as.namespaces[u.Namespace]
	if na == nil {
		na = &acc{}
		as.namespaces[u.Namespace] = na
	}
	na.add(&ps.acc)
	as.nsPods[u.Namespace]++
	for _, n := range ps.nodes {
		as.nodePods[n]++
	}
}

// finish puts the pods in the order of their keys and their containers
// with them, and adds the namespaces, the nodes (from their
// accumulators) and the start-up summary.
func (as *assembler) finish(nodes map[string]*acc) {
	r := as.r
	order := make([]int32, len(r.Pods))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(i, j int32) int {
		return comparePodRefs(podRef{r.Pods[i].Namespace, r.Pods[i].Pod}, podRef{r.Pods[j].Namespace, r.Pods[j].Pod})
	})
	corder := make([]int32, 0, len(r.Containers))
	for _, i := range order {
		end := int32(len(r.Containers))
		if int(i)+1 < len(as.containersAt) {
			end = as.containersAt[i+1]
		}
		for c := as.containersAt[i]; c < end; c++ {
			corder = append(corder, c)
		}
	}
	permute(r.Pods, order)
	permute(r.Containers, corder)

	for _, ns := range slices.Sorted(maps.Keys(as.namespaces)) {
		t := as.namespaces[ns].totals()
		r.Namespaces = append(r.Namespaces, GroupUsage{Name: ns, Pods: as.nsPods[ns], Totals: t, App: appUsage(as.nsApps[ns], t)})
	}
	for _, n := range slices.Sorted(maps.Keys(nodes)) {
		r.Nodes = append(r.Nodes, NodeUsage{GroupUsage: GroupUsage{Name: n, Pods: as.nodePods[n], Totals: nodes[n].totals()}, Capacity: nodes[n].capacityTotals()})
	}
	r.Startup = SummarizeStartup(r.Pods, r.Start, r.End, time.Duration(r.StepSecond*Seconds(time.Second)))
}

// permute puts s[order[i]] at i for every i, in place, moving each element
// once: the report's slices are large, and sorting them would move their
// large elements many times.
func permute[T any](s []T, order []int32) {
	done := make([]bool, len(s))
	for i := range s {
		if done[i] {
			continue
		}
		first := s[i]
		j := i
		for {
			done[j] = true
			k := int(order[j])
			if k == i {
				s[j] = first
				break
			}
			s[j] = s[k]
			j = k
		}
	}
}

// assemble completes a report from the states of all its pods at once
// (the raw path's), releasing each state once its pod is in the report.
func assemble(r *Report, pods map[podRef]*podState, nodes map[string]*acc, apps []AppSeries, podEvents []PodEvents, appSeconds func(tMs int64) float64) {
	containers := 0
	for _, ps := range pods {
		containers += len(ps.containers)
	}
	as := newAssembler(r, len(pods), containers, apps, podEvents, appSeconds)
	// In the order of the keys, as finish puts them: the namespaces' sums
	// then do not depend on the map's.
	for _, key := range slices.SortedFunc(maps.Keys(pods), comparePodRefs) {
		as.add(pods[key])
		delete(pods, key)
	}
	as.finish(nodes)
}
