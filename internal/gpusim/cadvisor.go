package gpusim

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpupack/gpupack/usage"
)

// cfsPeriod is the CFS enforcement period the kubelet sets, 100 ms, in
// microseconds as container_spec_cpu_period reports it.
const cfsPeriod = 100000

// cadvisorFamily is one of cAdvisor's metric families as the kubelet's
// /metrics/cadvisor serves it: its name, HELP, TYPE and, for a running
// container of a pod, its value elapsed after the container started
// (ok false: no sample).
type cadvisorFamily struct {
	name, help, typ string
	// podLevel families are the pod cgroup's (container=""), such as its
	// network, which every container shares.
	podLevel bool
	// extra is the family's own label, such as cpu="total".
	extra string
	value func(p *Pod, elapsed time.Duration) (float64, bool)
}

// cadvisorFamilies are the families WriteCAdvisorMetrics serves, in the
// order cAdvisor's registry writes them (by name), with its HELP texts
// (google/cadvisor's metrics/prometheus.go).
var cadvisorFamilies = []cadvisorFamily{
	{name: usage.CFSPeriods, help: "Number of elapsed enforcement period intervals.", typ: "counter", value: func(p *Pod, e time.Duration) (float64, bool) {
		return periods(e), p.CPU != nil && p.CPU.LimitCores > 0
	}},
	{name: usage.CFSThrottledPeriods, help: "Number of throttled period intervals.", typ: "counter", value: func(p *Pod, e time.Duration) (float64, bool) {
		if p.CPU == nil || p.CPU.LimitCores <= 0 {
			return 0, false
		}
		return math.Floor(periods(e) * p.CPU.ThrottledRatio), true
	}},
	{name: usage.CPUUsageSeconds, help: "Cumulative cpu time consumed in seconds.", typ: "counter", extra: label("cpu", "total"), value: func(p *Pod, e time.Duration) (float64, bool) {
		if p.CPU == nil {
			return 0, false
		}
		return p.CPU.UsedCores * e.Seconds(), true
	}},
	{name: usage.FSReadsBytes, help: "Cumulative count of bytes read", typ: "counter", extra: label("device", "/dev/nvme0n1"), value: func(p *Pod, e time.Duration) (float64, bool) {
		if p.Input == nil {
			return 0, false
		}
		return math.Floor(p.Input.DiskReadBytesPerSecond * e.Seconds()), true
	}},
	{name: usage.NetworkReceiveBytes, help: "Cumulative count of bytes received", typ: "counter", podLevel: true, extra: label("interface", "eth0"), value: func(p *Pod, e time.Duration) (float64, bool) {
		if p.Input == nil {
			return 0, false
		}
		return math.Floor(p.Input.NetworkReceiveBytesPerSecond * e.Seconds()), true
	}},
	{name: usage.CPUPeriod, help: "CPU period of the container.", typ: "gauge", value: func(p *Pod, _ time.Duration) (float64, bool) {
		return cfsPeriod, p.CPU != nil && p.CPU.LimitCores > 0
	}},
	{name: usage.CPUQuota, help: "CPU quota of the container.", typ: "gauge", value: func(p *Pod, _ time.Duration) (float64, bool) {
		if p.CPU == nil || p.CPU.LimitCores <= 0 {
			return 0, false
		}
		return math.Round(p.CPU.LimitCores * cfsPeriod), true
	}},
}

// periods is the CFS periods elapsed in e.
func periods(e time.Duration) float64 {
	return math.Floor(float64(e) / float64(cfsPeriod*time.Microsecond))
}

// WriteCAdvisorMetrics writes, t after the scenario's start (at start),
// what the kubelet's /metrics/cadvisor would expose of the scenario's pods
// that script their CPU or input and run at t (from their from to their
// to): the CFS period, throttling and CPU-seconds counters and the quota
// of their container, its disk reads, and the pod's network receive, in
// cAdvisor's text exposition with the kubelet's labels (container, id,
// image, name, namespace, pod) and the sample times cAdvisor writes.
func (s *Scenario) WriteCAdvisorMetrics(w io.Writer, start time.Time, t time.Duration) error {
	var b strings.Builder
	ts := strconv.FormatInt(start.Add(t).UnixMilli(), 10)
	for _, f := range cadvisorFamilies {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", f.name, f.help, f.name, f.typ)
		for i := range s.Pods {
			p := &s.Pods[i]
			if (p.CPU == nil && p.Input == nil) || t < p.From.D() || t >= p.To.D() {
				continue
			}
			v, ok := f.value(p, t-p.From.D())
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "%s{%s} %s %s\n", f.name, cadvisorLabels(p, i, f), strconv.FormatFloat(v, 'g', -1, 64), ts)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// cadvisorLabels are the kubelet's labels of pod i's container (or its
// pod cgroup, for a pod-level family), in the exposition's order: by name,
// the family's own label among them.
func cadvisorLabels(p *Pod, i int, f cadvisorFamily) string {
	uid := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
	cgroup := "/kubepods/burstable/pod" + uid
	container, id, image, name := p.container(), cgroup+"/"+containerID(i), p.image(), containerID(i)
	if f.podLevel {
		container, id, image, name = "", cgroup, "", ""
	}
	labels := []string{label("container", container), label("id", id), label("image", image), label("name", name), label("namespace", p.Namespace), label("pod", p.Name)}
	if f.extra != "" {
		labels = append(labels, f.extra)
		slices.Sort(labels)
	}
	return strings.Join(labels, ",")
}

// containerID is the runtime's ID of pod i's container.
func containerID(i int) string { return fmt.Sprintf("%064x", i+1) }

// image is the pod's container image: its scripted pull's, or a name of
// its own.
func (p *Pod) image() string {
	for _, pull := range p.Startup.Pulls {
		if pull.Container == "" || pull.Container == p.container() {
			return pull.Image
		}
	}
	return "registry.example/" + p.Namespace + "/" + p.Name + ":latest"
}

// WriteCAdvisorOpenMetrics writes the history of what WriteCAdvisorMetrics
// serves over [from, to) after the scenario's start, sampled every scrape,
// as OpenMetrics text that promtool tsdb create-blocks-from openmetrics
// loads: the same names, labels and values, a counter's family named
// without its _total as OpenMetrics names it.
func (s *Scenario) WriteCAdvisorOpenMetrics(out io.Writer, start time.Time, from, to, scrape time.Duration) error {
	if scrape <= 0 || to <= from {
		return fmt.Errorf("cAdvisor history [%s, %s) every %s: want a positive scrape interval and an end after the start", from, to, scrape)
	}
	w := bufio.NewWriter(out)
	for _, f := range cadvisorFamilies {
		family := f.name
		if f.typ == "counter" {
			family = strings.TrimSuffix(f.name, "_total")
		}
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", family, f.help, family, f.typ)
		for i := range s.Pods {
			p := &s.Pods[i]
			if p.CPU == nil && p.Input == nil {
				continue
			}
			labels := cadvisorLabels(p, i, f)
			for t := max(from, p.From.D()); t < min(to, p.To.D()); t += scrape {
				v, ok := f.value(p, t-p.From.D())
				if !ok {
					break
				}
				fmt.Fprintf(w, "%s{%s} %s %s\n", f.name, labels, formatValue(v), strconv.FormatFloat(float64(start.Add(t).UnixMilli())/1000, 'f', -1, 64))
			}
		}
	}
	w.WriteString("# EOF\n")
	return w.Flush()
}
