package sim

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/placement"
)

// ReplayConfig is one churn replay: the trace's pods arrive at their
// creation times and leave after their trace run time.
type ReplayConfig struct {
	Policy string
	Seed   uint64
	// Speedup divides every creation time, so that pods arrive Speedup
	// times as densely while each runs as long as in the trace; 1 is the
	// trace's own clock.
	Speedup float64
	// Typical is the workload distribution of fragmentation-aware
	// policies, as in Config; the replayed pods when empty.
	Typical []*cluster.Pod
	// Progress, when set, is called now and then with events done and total.
	Progress func(done, total int)
	// MeasureFromSeconds, when above the first arrival (in replay time,
	// after Speedup), starts the measurement there: pods arriving earlier
	// warm the cluster up and are not counted in the waits, and the mean
	// allocation and the curve cover the window from it to the last
	// arrival.
	MeasureFromSeconds float64
}

// ReplayPoint is one sample of the allocation over time.
type ReplayPoint struct {
	Seconds     float64 `json:"seconds"`      // since the first arrival
	AllocRatio  float64 `json:"alloc_ratio"`  // allocated GPU / capacity
	QueuedRatio float64 `json:"queued_ratio"` // GPU demand waiting in the queue / capacity
}

// ReplaySamples is how many points a replay's curve has, evenly spaced
// from the first arrival to the last.
const ReplaySamples = 200

// ReplayResult is what a churn replay measured. Waits are of GPU pods.
// JSON names are the CLI's output format.
type ReplayResult struct {
	Policy          string  `json:"policy"`
	Seed            uint64  `json:"seed"`
	Speedup         float64 `json:"speedup"`
	Nodes           int     `json:"nodes"`
	GPUs            int     `json:"gpus"`
	Pods            int     `json:"pods"`
	PodsPlaced      int     `json:"pods_placed"`
	PodsUnplaceable int     `json:"pods_unplaceable"` // fit no node even when it is empty; never queued
	GPUPodsWaited   int     `json:"gpu_pods_waited"`  // GPU pods placed later than they arrived
	GPUPodsPlaced   int     `json:"gpu_pods_placed"`
	WindowSeconds   float64 `json:"window_seconds"`   // first arrival to last arrival
	OfferedLoad     float64 `json:"offered_load"`     // OfferedLoad: GPU-time asked for within the window / capacity x window
	MakespanSeconds float64 `json:"makespan_seconds"` // first arrival to last departure
	MeanGPUAlloc    float64 `json:"mean_gpu_alloc_ratio"`
	PeakGPUAlloc    float64 `json:"peak_gpu_alloc_ratio"`
	WaitP50Seconds  float64 `json:"wait_p50_seconds"`
	WaitP95Seconds  float64 `json:"wait_p95_seconds"`
	WaitP99Seconds  float64 `json:"wait_p99_seconds"`
	WaitMaxSeconds  float64 `json:"wait_max_seconds"`
	// DemandGPUHours is the GPU-time the measured GPU pods asked for (GPUs
	// x run time); WaitedDemandGPUHours the part of it asked for by pods
	// that waited at all, so it is at most DemandGPUHours.
	DemandGPUHours       float64 `json:"demand_gpu_hours"`
	WaitedDemandGPUHours float64 `json:"waited_demand_gpu_hours"`
	// ByShape are the waits of the measured GPU pods by GPU shape (a
	// share of one GPU, 1 GPU, 2 GPUs...), in that order.
	ByShape     []ShapeWaits  `json:"by_shape"`
	WallSeconds float64       `json:"wall_seconds"`
	Curve       []ReplayPoint `json:"-"`
}

// ShapeWaits are the waits of the GPU pods of one shape.
type ShapeWaits struct {
	// Shape is "<1" for a share of one GPU, else the GPUs asked for.
	Shape          string  `json:"shape"`
	Pods           int     `json:"pods"`
	Waited         int     `json:"waited"`
	WaitP50Seconds float64 `json:"wait_p50_seconds"`
	WaitP95Seconds float64 `json:"wait_p95_seconds"`
	WaitP99Seconds float64 `json:"wait_p99_seconds"`
}

// Replay runs the trace with churn. Each pod arrives at its creation time
// (divided by cfg.Speedup) and is placed by the policy with Place; when it
// fits no node it waits in a FIFO queue. When a pod leaves, the queue is
// tried again in order against the capacity it freed (a pod that fits
// nowhere can only come to fit on a node that something left, so the
// freed node is the only one worth testing). A placed pod runs for its
// trace run time (TraceLifetime.RunSeconds: deletion minus scheduling, or
// minus creation for pods the trace never scheduled) and then leaves.
// Pods that fit no node even when empty are counted and never queued.
// Only running pods sit in the event heap; arrivals are read in order.
// The mean allocation is weighted by time over the arrival window, the
// same span for every policy.
func Replay(ctx context.Context, nodes []*cluster.Node, pods []*cluster.Pod, lifetimes []cluster.TraceLifetime, c *gpu.Catalogue, cfg ReplayConfig) (ReplayResult, error) {
	start := time.Now()
	res := ReplayResult{Policy: cfg.Policy, Seed: cfg.Seed, Speedup: cfg.Speedup, Nodes: len(nodes), Pods: len(pods)}
	if len(lifetimes) != len(pods) {
		return res, fmt.Errorf("%d pods but %d lifetimes; give one lifetime per pod, in the same order", len(pods), len(lifetimes))
	}
	if math.IsNaN(cfg.Speedup) || cfg.Speedup <= 0 || cfg.Speedup > 1e9 {
		return res, fmt.Errorf("speedup %v: want how many times faster than the trace pods arrive, in (0, 1e9]", cfg.Speedup)
	}
	r, err := newReplay(nodes, pods, lifetimes, c, cfg)
	if err != nil {
		return res, err
	}
	res.GPUs = r.gpus
	if err := r.run(ctx, cfg.Progress); err != nil {
		return res, fmt.Errorf("%s: %w", cfg.Policy, err)
	}
	r.report(&res)
	res.OfferedLoad = OfferedLoad(pods, lifetimes, r.capacity, cfg.Speedup)
	res.WallSeconds = time.Since(start).Seconds()
	return res, nil
}

// replay is the state of one churn replay.
type replay struct {
	demands  []*placement.Demand
	arrive   []float64 // arrival time of each pod
	runFor   []float64 // run time of each pod
	started  []float64 // when each pod was placed; NaN until it is
	nodeOf   []int     // where each pod was placed
	order    []int     // pods by arrival
	states   []*placement.NodeState
	empty    []*placement.NodeState
	running  [][]runningPod // per node
	policy   placement.Policy
	observer placement.Observer
	memo     *scoreMemo
	ties     Ties
	gpus     int
	capacity gpu.Milli

	departures departureHeap
	// The queue is one FIFO per pod shape (shapes), so that a freed node
	// is offered to each shape's first pod only: pods of one shape fit the
	// same nodes. seq orders pods across shapes by when they queued.
	shape     []int   // shape of each pod
	queues    [][]int // per shape, pods waiting in order
	waiting   []int   // shapes with a nonempty queue
	seq       []int   // per pod, its place in the queue's arrival order
	nextSeq   int
	doneAt    []int // per shape, the last retry that found it not to fit
	stamp     int   // retries so far
	queued    int
	queuedGPU gpu.Milli
	allocated gpu.Milli

	// measures
	t0, t1        float64 // arrival window
	last          float64 // time up to which allocation is integrated
	allocIntegral float64 // milli-GPU seconds within the window
	peak          gpu.Milli
	makespan      float64
	measureFrom   float64
	// waits and waitShape are each measured GPU pod's wait and shape
	// (gpuShape); demand and waitedDemand milli-GPU seconds asked for by
	// the measured GPU pods and by those that waited.
	waits                []float64
	waitShape            []int
	demand, waitedDemand float64
	placed               int
	unplaceable          int
	curve                []ReplayPoint
	nextSample           int
}

type runningPod struct {
	pod int
	a   placement.Assignment
}

type departure struct {
	at   float64
	pod  int
	node int
}

// departureHeap orders departures by time, then pod index, so that a run
// is deterministic.
type departureHeap []departure

func (h departureHeap) Len() int { return len(h) }
func (h departureHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || (h[i].at == h[j].at && h[i].pod < h[j].pod)
}
func (h departureHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *departureHeap) Push(x any)   { *h = append(*h, x.(departure)) }
func (h *departureHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func newReplay(nodes []*cluster.Node, pods []*cluster.Pod, lifetimes []cluster.TraceLifetime, c *gpu.Catalogue, cfg ReplayConfig) (*replay, error) {
	r := &replay{}
	var maxCPU gpu.CPUMilli
	var maxGPU gpu.Milli
	r.states, maxCPU, maxGPU = newStates(nodes)
	r.empty, _, _ = newStates(nodes)
	for _, n := range nodes {
		r.gpus += len(n.GPUs)
	}
	r.capacity = gpu.Milli(r.gpus) * gpu.WholeGPU
	if r.capacity == 0 {
		return nil, errors.New("the cluster has no GPUs")
	}
	if len(pods) == 0 {
		return nil, errors.New("the pod list is empty")
	}
	var err error
	if r.demands, err = demandsOf(pods, c); err != nil {
		return nil, err
	}
	typical, err := typicalWorkload(pods, c, Config{Typical: cfg.Typical})
	if err != nil {
		return nil, err
	}
	r.policy, err = placement.New(cfg.Policy, placement.Options{
		Workload:        typical,
		Rand:            rand.New(rand.NewPCG(cfg.Seed, 0x5851f42d4c957f2d)),
		MaxNodeCPU:      maxCPU,
		MaxNodeGPUMilli: maxGPU,
		GPUsByModel:     placement.CountGPUsByModel(nodes),
	})
	if err != nil {
		return nil, err
	}
	r.observer, _ = r.policy.(placement.Observer)
	r.memo = newScoreMemo(len(nodes), r.policy)
	r.ties = Ties{Rank: NodeOrder(len(nodes), cfg.Seed)}
	r.running = make([][]runningPod, len(nodes))
	r.arrive = make([]float64, len(pods))
	r.runFor = make([]float64, len(pods))
	r.order = make([]int, len(pods))
	r.started = make([]float64, len(pods))
	r.nodeOf = make([]int, len(pods))
	r.seq = make([]int, len(pods))
	r.shape = shapes(pods)
	r.queues = make([][]int, slices.Max(r.shape)+1)
	r.doneAt = make([]int, len(r.queues))
	for i, l := range lifetimes {
		r.started[i] = math.NaN()
		r.arrive[i] = float64(l.CreatedSeconds) / cfg.Speedup
		r.runFor[i] = float64(l.RunSeconds())
		r.order[i] = i
	}
	slices.SortStableFunc(r.order, func(a, b int) int {
		switch {
		case r.arrive[a] < r.arrive[b]:
			return -1
		case r.arrive[a] > r.arrive[b]:
			return 1
		}
		return 0
	})
	r.t0, r.t1 = r.arrive[r.order[0]], r.arrive[r.order[len(pods)-1]]
	if r.t1 == r.t0 {
		return nil, errors.New("every pod arrives at the same time, so there is no time to replay; use the plain simulation for such a trace")
	}
	if cfg.MeasureFromSeconds >= r.t1 {
		return nil, fmt.Errorf("the measurement starts at %.0f s, after the last arrival (%.0f s): start it earlier", cfg.MeasureFromSeconds, r.t1)
	}
	r.t0 = max(r.t0, cfg.MeasureFromSeconds)
	r.measureFrom = r.t0
	r.last = r.t0
	return r, nil
}

// run processes every arrival and departure in time order; at equal times
// departures come first, so the capacity they free is there for arrivals.
func (r *replay) run(ctx context.Context, progress func(done, total int)) error {
	total := 2 * len(r.demands)
	next := 0
	for done := 0; next < len(r.order) || len(r.departures) > 0; done++ {
		if done%64 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("stopped after %d of about %d events: %w", done, total, err)
			}
			if progress != nil && done%1024 == 0 {
				progress(done, total)
			}
		}
		if len(r.departures) > 0 && (next == len(r.order) || r.departures[0].at <= r.arrive[r.order[next]]) {
			d := heap.Pop(&r.departures).(departure)
			r.advance(d.at)
			r.leave(d)
			continue
		}
		p := r.order[next]
		next++
		r.advance(r.arrive[p])
		r.arrival(p)
	}
	if progress != nil {
		progress(total, total)
	}
	if r.queued > 0 {
		return fmt.Errorf("%d pods still wait after every pod left (the first %s); this is a bug in the replay", r.queued, r.demands[r.queues[r.waiting[0]][0]].Pod.Name)
	}
	r.advance(math.Inf(1))
	return nil
}

// advance integrates the allocation up to t (within the arrival window)
// and takes the curve's samples before t, from the state that holds until t.
func (r *replay) advance(t float64) {
	from, to := max(r.last, r.t0), min(t, r.t1)
	if to > from {
		r.allocIntegral += float64(r.allocated) * (to - from)
	}
	for ; r.nextSample < ReplaySamples; r.nextSample++ {
		at := r.t0 + (r.t1-r.t0)*float64(r.nextSample)/float64(ReplaySamples-1)
		if at >= t {
			break
		}
		r.curve = append(r.curve, ReplayPoint{Seconds: at - r.t0, AllocRatio: r.ratio(r.allocated), QueuedRatio: r.ratio(r.queuedGPU)})
	}
	if !math.IsInf(t, 1) {
		r.last = t
	}
}

func (r *replay) ratio(m gpu.Milli) float64 { return float64(m) / float64(r.capacity) }

func gpuMilliOf(d *placement.Demand) gpu.Milli { return gpu.Milli(d.Devices) * d.PerGPUMilli }

func (r *replay) arrival(p int) {
	d := r.demands[p]
	if !slices.ContainsFunc(r.empty, func(s *placement.NodeState) bool { return placement.Fits(d, s) }) {
		r.unplaceable++
		return
	}
	// A pod whose shape already waits fits no node (see leave), and queues
	// behind the pods of its shape.
	if len(r.queues[r.shape[p]]) > 0 || !r.place(p, r.arrive[p], r.states) {
		r.enqueue(p)
	}
}

func (r *replay) enqueue(p int) {
	sh := r.shape[p]
	if len(r.queues[sh]) == 0 {
		r.waiting = append(r.waiting, sh)
	}
	r.queues[sh] = append(r.queues[sh], p)
	r.seq[p] = r.nextSeq
	r.nextSeq++
	r.queued++
	r.queuedGPU += gpuMilliOf(r.demands[p])
}

// place puts pod p on the best of the candidate nodes at time now, if it
// fits one.
func (r *replay) place(p int, now float64, candidates []*placement.NodeState) bool {
	d := r.demands[p]
	var memo *scoreMemo // the memo is by node index: of use over every node only
	if len(candidates) == len(r.states) {
		memo = r.memo
	}
	i, a := place(d, candidates, r.policy, r.ties, memo)
	if i < 0 {
		return false
	}
	node := candidates[i].Index
	r.memo.changed(node)
	if r.observer != nil {
		r.observer.Placed(d, r.states[node])
	}
	r.running[node] = append(r.running[node], runningPod{pod: p, a: a})
	m := gpuMilliOf(d)
	r.allocated += m
	r.peak = max(r.peak, r.allocated)
	r.placed++
	r.started[p] = now
	r.nodeOf[p] = node
	if d.Devices > 0 && r.arrive[p] >= r.measureFrom {
		wait := now - r.arrive[p]
		r.waits = append(r.waits, wait)
		r.waitShape = append(r.waitShape, gpuShape(d))
		asked := float64(m) * r.runFor[p]
		r.demand += asked
		if wait > 0 {
			r.waitedDemand += asked
		}
	}
	heap.Push(&r.departures, departure{at: now + r.runFor[p], pod: p, node: node})
	return true
}

// leave takes a pod off its node, rebuilding the node's state from the pods
// still on it (placement's NodeState only ever takes), then tries the queue.
func (r *replay) leave(d departure) {
	r.makespan = d.at
	run := r.running[d.node]
	i := slices.IndexFunc(run, func(rp runningPod) bool { return rp.pod == d.pod })
	run = slices.Delete(run, i, i+1)
	r.running[d.node] = run
	s := r.states[d.node]
	fresh := placement.NewNodeState(s.Node)
	fresh.Index = s.Index
	for _, rp := range run {
		fresh.Assign(r.demands[rp.pod], rp.a)
	}
	*s = *fresh
	r.memo.changed(d.node)
	r.allocated -= gpuMilliOf(r.demands[d.pod])

	r.retry(s, d.at)
}

// retry offers the freed node s to the queue at time now: again and again
// the earliest queued pod that fits s is placed, until none does. Only s
// can newly fit a queued pod: every queued pod fit no node when it queued
// or was last offered one, and placing pods only takes capacity. So the
// first pod of each shape stands for its shape, and a shape whose first pod
// does not fit s is done for this departure. This is one pass over the
// queue in order, each pod tried against s, as a single FIFO would do.
func (r *replay) retry(s *placement.NodeState, now float64) {
	r.stamp++
	done := func(sh int) bool { return r.doneAt[sh] == r.stamp }
	only := []*placement.NodeState{s}
	for {
		best := -1
		for _, sh := range r.waiting {
			if done(sh) {
				continue
			}
			head := r.queues[sh][0]
			if !placement.Fits(r.demands[head], s) {
				r.doneAt[sh] = r.stamp
				continue
			}
			if best < 0 || r.seq[head] < r.seq[r.queues[best][0]] {
				best = sh
			}
		}
		if best < 0 {
			return
		}
		// Only s fits (see above), so placing among all nodes is placing
		// on s, and Place need not test the others.
		p := r.queues[best][0]
		if !r.place(p, now, only) {
			// Fits said yes, so Place must find a node; a policy that
			// declines every fitting node leaves the pod queued.
			r.doneAt[best] = r.stamp
			continue
		}
		r.queues[best] = r.queues[best][1:]
		if len(r.queues[best]) == 0 {
			r.queues[best] = nil
			r.waiting = slices.DeleteFunc(r.waiting, func(sh int) bool { return sh == best })
		}
		r.queued--
		r.queuedGPU -= gpuMilliOf(r.demands[p])
	}
}

func (r *replay) report(res *ReplayResult) {
	res.PodsPlaced = r.placed
	res.PodsUnplaceable = r.unplaceable
	res.GPUPodsPlaced = len(r.waits)
	res.WindowSeconds = r.t1 - r.t0
	res.MakespanSeconds = r.makespan - r.t0
	res.MeanGPUAlloc = r.allocIntegral / res.WindowSeconds / float64(r.capacity)
	res.PeakGPUAlloc = r.ratio(r.peak)
	res.DemandGPUHours = r.demand / float64(gpu.WholeGPU) / 3600
	res.WaitedDemandGPUHours = r.waitedDemand / float64(gpu.WholeGPU) / 3600
	all := waitsOf(r.waits)
	res.GPUPodsWaited = all.Waited
	res.WaitP50Seconds, res.WaitP95Seconds, res.WaitP99Seconds = all.WaitP50Seconds, all.WaitP95Seconds, all.WaitP99Seconds
	if len(r.waits) > 0 {
		res.WaitMaxSeconds = slices.Max(r.waits)
	}
	byShape := map[int][]float64{}
	for i, w := range r.waits {
		byShape[r.waitShape[i]] = append(byShape[r.waitShape[i]], w)
	}
	for _, sh := range slices.Sorted(maps.Keys(byShape)) {
		w := waitsOf(byShape[sh])
		w.Shape = "<1"
		if sh > 0 {
			w.Shape = strconv.Itoa(sh)
		}
		res.ByShape = append(res.ByShape, w)
	}
	res.Curve = r.curve
}

// gpuShape is a GPU demand's shape: 0 for a share of one GPU, else the
// GPUs it asks for.
func gpuShape(d *placement.Demand) int {
	if d.PerGPUMilli < gpu.WholeGPU {
		return 0
	}
	return d.Devices
}

// waitsOf counts the waits and takes their quantiles (nearest rank).
func waitsOf(waits []float64) ShapeWaits {
	w := ShapeWaits{Pods: len(waits)}
	if len(waits) == 0 {
		return w
	}
	sorted := slices.Sorted(slices.Values(waits))
	for _, v := range sorted {
		if v > 0 {
			w.Waited++
		}
	}
	w.WaitP50Seconds = sorted[nearestRank(len(sorted), 0.50)]
	w.WaitP95Seconds = sorted[nearestRank(len(sorted), 0.95)]
	w.WaitP99Seconds = sorted[nearestRank(len(sorted), 0.99)]
	return w
}

// nearestRank is the index of the q-quantile of n sorted values.
func nearestRank(n int, q float64) int {
	return max(0, int(math.Ceil(q*float64(n)))-1)
}

// shapeKey is what placement.Fits reads of a pod, for the pods that have no
// node selector, affinity or toleration (each other pod is its own shape).
type shapeKey struct {
	cpu       gpu.CPUMilli
	memory    gpu.MiB
	gpu       cluster.Request
	models    string
	isolation cluster.Isolation
	tenant    string
	own       int
}

// shapes numbers the pods' shapes from 0: pods of one shape fit exactly
// the same nodes.
func shapes(pods []*cluster.Pod) []int {
	ids := map[shapeKey]int{}
	out := make([]int, len(pods))
	for i, p := range pods {
		k := shapeKey{cpu: p.CPU, memory: p.Memory, gpu: p.GPU, models: strings.Join(p.GPUModels, "|"), isolation: p.Isolation, tenant: p.TenantName()}
		if len(p.NodeSelector) > 0 || len(p.RequiredAffinity) > 0 || len(p.Tolerations) > 0 {
			k.own = i + 1
		}
		id, ok := ids[k]
		if !ok {
			id = len(ids)
			ids[k] = id
		}
		out[i] = id
	}
	return out
}
