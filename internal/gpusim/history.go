package gpusim

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/usage"
)

// Faults are what goes wrong in a history: NaN samples, gaps without any
// sample and energy counters that restart from zero (a driver reload).
type Faults struct {
	// NaNEvery makes every n-th activity sample (GR engine, SM and GPU
	// utilisation) of the devices in NaNDevices NaN, as DCGM reports a
	// field it could not read; 0 for none.
	NaNEvery   int
	NaNDevices []string
	// Gaps are spans in which a device has no sample at all.
	Gaps []Gap
	// Resets restart a device's energy counter from zero at a time.
	Resets []Reset
}

// Gap is a span [From, To) after the scenario's start with no sample of
// the device with key Device (usage.Device.Key).
type Gap struct {
	Device   string
	From, To time.Duration
}

// Reset restarts the energy counter of the device with key Device at At.
type Reset struct {
	Device string
	At     time.Duration
}

// WriteOpenMetrics writes the scenario's history over [from, to) after its
// start, sampled every scrape, as OpenMetrics text that promtool tsdb
// create-blocks-from openmetrics loads: dcgm-exporter's metric names,
// labels, HELP and TYPE, one series per device and holder (a device held
// by nobody keeps its series without pod labels), timestamps from start.
// It streams: memory stays bounded by one device's pods, whatever the span.
func (s *Scenario) WriteOpenMetrics(out io.Writer, start time.Time, from, to, scrape time.Duration, f Faults) error {
	if scrape <= 0 || to <= from {
		return fmt.Errorf("openmetrics history [%s, %s) every %s: want a positive scrape interval and an end after the start", from, to, scrape)
	}
	w := bufio.NewWriterSize(out, 1<<20)
	nan := map[string]bool{}
	for _, d := range f.NaNDevices {
		nan[d] = true
	}
	devices := s.devices()
	// Each device's pods, so that a reading looks at a handful, not all.
	onDevice := s.podsByDevice(devices)
	activity := map[string]bool{usage.GREngineActive: true, usage.SMActive: true, usage.GPUUtil: true}
	for _, fam := range s.served() {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", fam.name, fam.help, fam.name, fam.typ)
		for di, d := range devices {
			key := d.Key()
			pods := onDevice[di]
			labels := deviceLabels(d)
			// One series per holder, and one for the steps held by nobody.
			for hi := -1; hi < len(pods); hi++ {
				var series string
				if hi < 0 {
					series = fam.name + "{" + labels + "}"
				} else {
					p := pods[hi]
					series = fam.name + "{" + labels + "," + p.labels() + "}"
				}
				n := 0
				for t := from; t < to; t += scrape {
					n++
					if inGap(f.Gaps, key, t) {
						continue
					}
					r := s.readDevice(d, pods, t, f.Resets)
					if hi < 0 && len(r.holders) > 0 || hi >= 0 && !holdsNow(r.holders, pods[hi]) {
						continue
					}
					v := fam.value(&r)
					if activity[fam.name] && nan[key] && f.NaNEvery > 0 && n%f.NaNEvery == 0 {
						v = math.NaN()
					}
					ts := start.Add(t)
					w.WriteString(series)
					w.WriteByte(' ')
					w.WriteString(formatValue(v))
					w.WriteByte(' ')
					w.WriteString(strconv.FormatFloat(float64(ts.UnixMilli())/1000, 'f', -1, 64))
					w.WriteByte('\n')
				}
			}
		}
	}
	w.WriteString("# EOF\n")
	return w.Flush()
}

func formatValue(v float64) string {
	if math.IsNaN(v) {
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func holdsNow(holders []*Pod, p *Pod) bool {
	for _, h := range holders {
		if h == p {
			return true
		}
	}
	return false
}

func inGap(gaps []Gap, key string, t time.Duration) bool {
	for _, g := range gaps {
		if g.Device == key && t >= g.From && t < g.To {
			return true
		}
	}
	return false
}

// readDevice is one device's reading at t from the pods that ever hold it
// (podsByDevice), with its energy counter restarted at the last reset
// before t.
func (s *Scenario) readDevice(d usage.Device, pods []*Pod, t time.Duration, resets []Reset) reading {
	r := reading{device: d}
	for _, n := range s.Nodes {
		if n.Name == d.Node {
			r.xid = float64(n.XIDs[d.GPU])
		}
	}
	for _, p := range pods {
		if !s.holds(p, d, t) {
			continue
		}
		r.holders = append(r.holders, p)
		r.activity += p.Activity.level(t - p.From.D())
		r.fbUsed += p.MemoryMiB
		r.dram += p.DRAM
		if in := p.Input; in != nil {
			r.pcieRx += in.PCIeRxBytesPerSecond
			r.pcieTx += in.PCIeTxBytesPerSecond
			r.nvlinkRx += in.NVLinkRxBytesPerSecond
			r.nvlinkTx += in.NVLinkTxBytesPerSecond
		}
	}
	r.activity = math.Min(1, r.activity)
	r.dram = math.Min(1, r.dram)
	r.fbFree = s.memory(d) - r.fbUsed
	r.powerW = idleWatts + (peakWatts-idleWatts)*r.activity
	energy := func(t time.Duration) float64 {
		j := idleWatts * t.Seconds()
		for _, p := range pods {
			if end := min(t, p.To.D()); end > p.From.D() {
				j += (peakWatts - idleWatts) * p.Activity.integral(end-p.From.D())
			}
		}
		return j * 1000
	}
	r.energyMJ = energy(t)
	key := d.Key()
	var last time.Duration = -1
	for _, rs := range resets {
		if rs.Device == key && rs.At <= t && rs.At > last {
			last = rs.At
		}
	}
	if last >= 0 {
		r.energyMJ -= energy(last)
	}
	return r
}

// Fleet makes a scenario of about gpus H100 GPUs (nodes of eight) busy for
// days: each GPU is held by a succession of pods of a few hours to a day
// with idle stretches between them, in patterns from idle to busy, pods
// ending and starting at odd minutes (owners change mid-hour); every fifth
// GPU is time-sliced by a second pod for part of its time, and the last GPU
// of the first node is MIG-partitioned 3g+2g+1g (one compute slice left
// uninstantiated). The second node's GPUs are offered through DRA: each pod
// there holds its GPU through a ResourceClaim of its own (a time-sliced
// GPU's two pods, two claims on one device), and its series carry
// dcgm-exporter's DRA labels. seed makes it reproducible.
func Fleet(gpus, days int, seed uint64, c *gpu.Catalogue) (*Scenario, error) {
	if gpus < 1 || days < 1 {
		return nil, fmt.Errorf("fleet of %d GPUs for %d days: want at least one GPU and one day", gpus, days)
	}
	m, err := c.Resolve("H100-80GB")
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 17))
	dur := time.Duration(days) * 24 * time.Hour
	s := &Scenario{Duration: Duration(dur), models: map[string]*gpu.Model{}}
	nodes := (gpus + 7) / 8
	for n := range nodes {
		node := Node{Name: fmt.Sprintf("node-%03d", n), Model: m.Name, GPUs: min(8, gpus-8*n)}
		if n == 0 && node.GPUs == 8 {
			node.MIG = map[string][]string{"7": {"3g.40gb", "2g.20gb", "1g.10gb"}}
		}
		s.Nodes = append(s.Nodes, node)
		s.models[node.Name] = m
	}
	minute := func(lo, hi int) time.Duration { return time.Duration(lo+rng.IntN(hi-lo+1)) * time.Minute }
	patterns := []Activity{
		{Pattern: "constant", Level: 0.85},
		{Pattern: "constant", Level: 0.15},
		{Pattern: "idle"},
		{Pattern: "square", Level: 0.9, Low: 0.02, On: Duration(2 * time.Minute), Off: Duration(5 * time.Minute)},
		{Pattern: "constant", Level: 0.45},
	}
	pods := 0
	place := func(node string, g int, slice *int, from, to time.Duration, memory float64) {
		a := patterns[rng.IntN(len(patterns))]
		s.Pods = append(s.Pods, Pod{Namespace: fmt.Sprintf("team-%d", rng.IntN(8)), Name: fmt.Sprintf("job-%05d", pods), Container: "main",
			Node: node, GPU: g, Slice: slice, From: Duration(from), To: Duration(to), MemoryMiB: memory, DRAM: math.Round(rng.Float64()*50) / 100, Activity: a})
		if node == "node-001" {
			s.Pods[len(s.Pods)-1].DRA = &DRAClaim{Claim: fmt.Sprintf("job-%05d-gpu", pods), Device: fmt.Sprintf("gpu-%d", g)}
		}
		pods++
	}
	gi := 0
	for _, n := range s.Nodes {
		for g := range n.GPUs {
			gi++
			slots := []*int{nil}
			if profiles := n.MIG[strconv.Itoa(g)]; len(profiles) > 0 {
				slots = nil
				for i := range profiles {
					slots = append(slots, &i)
				}
			}
			for _, slice := range slots {
				memory := 30000.0
				if slice != nil {
					memory = 8000
				}
				for t := minute(0, 180); t < dur; {
					end := min(dur, t+minute(120, 1440))
					place(n.Name, g, slice, t, end, memory)
					if slice == nil && gi%5 == 0 && end-t > 2*time.Hour {
						// A second pod time-slices the GPU for part of it.
						place(n.Name, g, nil, t+minute(30, 60), end-minute(10, 50), 20000)
					}
					t = end + minute(7, 240)
				}
			}
		}
	}
	return s, nil
}
