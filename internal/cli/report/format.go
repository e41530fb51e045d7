package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/internal/render/adviceout"
	"github.com/gpupack/gpupack/internal/util/mempolicy"
	"github.com/gpupack/gpupack/usage"
)

func write(out io.Writer, r *usage.Report, format, source string, top int) error {
	switch format {
	case "json":
		// The report is all that stays live; what came before it (the
		// queue waits) left garbage: a large one's is collected first,
		// and written with the collector's margin at half the report.
		defer mempolicy.OneShot.Writing(len(r.Pods))()
		return r.WriteJSON(out)
	case "csv":
		return writeCSV(out, r)
	case "podusage":
		return writePodUsage(out, r)
	}
	return writeTable(out, r, source, top)
}

func hours(s usage.Seconds) string { return strconv.FormatFloat(s.Hours(), 'f', 2, 64) }

func amountHours(a usage.Amount) string {
	if !a.Known() {
		return "unknown"
	}
	return hours(usage.Seconds(a.Value()))
}

func money(a usage.Amount) string { return a.Fixed(1, 2, "") }

// perActiveHour is the cost per active GPU-hour, or "no active hour" where
// activity was measured and was none: the figure has no value then, which
// "unknown" would misstate.
func perActiveHour(t usage.Totals) string {
	if t.NoActiveHour() {
		return "no active hour"
	}
	return money(t.CostPerActiveGPUHour)
}

func ratio(a usage.Amount) string { return a.Fixed(100, 1, "%") }

func mib(a usage.Amount) string {
	if !a.Known() {
		return "unknown"
	}
	return strconv.FormatFloat(a.Value(), 'f', 0, 64)
}

func idleOf(t usage.Totals) float64 {
	if !t.IdleAllocatedGPUSeconds.Known() {
		return -1
	}
	return t.IdleAllocatedGPUSeconds.Value()
}

func writeTable(out io.Writer, r *usage.Report, source string, top int) error {
	c := r.Cluster
	cur := r.Currency
	var b strings.Builder
	fmt.Fprintf(&b, "GPU usage %s .. %s (step %gs), from %s\n\n", r.Start.Format("2006-01-02T15:04:05Z"), r.End.Format("2006-01-02T15:04:05Z"), float64(r.StepSecond), source)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "GPU-hours capacity\t%s\t(allocated + unallocated + unsampled)\n", hours(c.CapacityGPUSeconds))
	fmt.Fprintf(tw, "GPU-hours allocated\t%s\n", hours(c.AllocatedGPUSeconds))
	fmt.Fprintf(tw, "GPU-hours active\t%s\t(%s of allocated; activity known for %s)\n", amountHours(c.ActiveGPUSeconds), ratio(div(c.ActiveGPUSeconds, float64(c.AllocatedGPUSeconds))), ratio(c.ActivityCoverage))
	fmt.Fprintf(tw, "GPU-hours idle while allocated\t%s\n", amountHours(c.IdleAllocatedGPUSeconds))
	fmt.Fprintf(tw, "GPU-hours unallocated\t%s\t(%s of them MIG slices no instance covers)\n", hours(c.UnallocatedGPUSeconds), hours(uninstantiated(r)))
	fmt.Fprintf(tw, "GPU-hours unsampled\t%s\t(no sample: allocation unknown)\n", hours(c.UnsampledGPUSeconds))
	fmt.Fprintf(tw, "cost of allocation (%s)\t%s\n", cur, money(c.Cost))
	fmt.Fprintf(tw, "cost of idle allocation (%s)\t%s\n", cur, money(c.IdleCost))
	fmt.Fprintf(tw, "cost of unallocated capacity (%s)\t%s\n", cur, money(c.UnallocatedCost))
	fmt.Fprintf(tw, "%s per allocated GPU-hour\t%s\n", cur, money(c.CostPerAllocatedGPUHour))
	fmt.Fprintf(tw, "%s per active GPU-hour\t%s\n", cur, perActiveHour(c.Totals))
	tw.Flush()
	if line := adviceout.Field(r.Field); line != "" {
		fmt.Fprintln(&b, line)
	}

	ns := append([]usage.GroupUsage(nil), r.Namespaces...)
	sort.SliceStable(ns, func(i, j int) bool { return idleOf(ns[i].Totals) > idleOf(ns[j].Totals) })
	fmt.Fprintf(&b, "\nWorst namespaces by idle-held GPU-hours\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "NAMESPACE\tPODS\tALLOCATED\tACTIVE\tIDLE-HELD\tIDLE COST %s\t%s/ACTIVE GPU-H\n", cur, cur)
	for i, g := range ns {
		if i == top {
			break
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", g.Name, g.Pods, hours(g.AllocatedGPUSeconds), amountHours(g.ActiveGPUSeconds), amountHours(g.IdleAllocatedGPUSeconds), money(g.IdleCost), perActiveHour(g.Totals))
	}
	tw.Flush()

	pods := append([]usage.PodUsage(nil), r.Pods...)
	sort.SliceStable(pods, func(i, j int) bool { return idleOf(pods[i].Totals) > idleOf(pods[j].Totals) })
	fmt.Fprintf(&b, "\nWorst pods by idle-held GPU-hours\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "POD\tNODE\tALLOCATED\tACTIVE\tIDLE-HELD\tIDLE COST %s\tVRAM P95 MiB\tPATTERN\tEVIDENCE\tRECOMMENDATION\n", cur)
	for i, p := range pods {
		if i == top {
			break
		}
		e := p.Pattern
		evidence := fmt.Sprintf("mean %s p95 %s idle %s dram %s", ratio(e.MeanActivity), ratio(e.P95Activity), ratio(e.IdleRatio), ratio(e.DRAMActive))
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Key(), p.Node, hours(p.AllocatedGPUSeconds), amountHours(p.ActiveGPUSeconds), amountHours(p.IdleAllocatedGPUSeconds), money(p.IdleCost), mib(p.VRAMUsedMiB.P95), e.Name, evidence, e.Recommendation)
	}
	tw.Flush()

	writeRunning(&b, r, top)
	writeHealth(&b, r)
	writeStartup(&b, r, top)
	writeShared(&b, r, top)

	var appLines []string
	for _, p := range r.Pods {
		for _, a := range p.App {
			appLines = append(appLines, fmt.Sprintf("%s\t%s\t%s\t%s\t%s %s\n", p.Key(), a.Name, num(a.Mean), num(a.PerActiveGPUHour), cur, money(a.CostPerMillion)))
		}
	}
	if len(appLines) > 0 {
		fmt.Fprintf(&b, "\nApplication metrics\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "POD\tMETRIC\tMEAN\tTOTAL PER ACTIVE GPU-HOUR\tGPU COST PER MILLION\n")
		for _, l := range appLines {
			fmt.Fprint(tw, l)
		}
		tw.Flush()
	}

	writeQueueWait(&b, r.QueueWait)

	q := r.Quality
	fmt.Fprintf(&b, "\nData: %d samples, coverage %s, %d NaN, %d gaps, %d counter resets; activity from", q.Samples, ratio(q.Coverage), q.NaNSamples, q.Gaps, q.CounterResets)
	for _, src := range sortedSources(q.ActivitySources) {
		fmt.Fprintf(&b, " %s (%d devices)", src, q.ActivitySources[src])
	}
	b.WriteString("\n")
	for _, m := range q.MissingMetrics {
		fmt.Fprintf(&b, "missing %s: %s\n", m.Metric, m.Consequence)
	}
	for _, w := range q.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// uninstantiated sums the unallocated GPU-seconds of the compute slices
// that MIG layouts leave without an instance.
func uninstantiated(r *usage.Report) usage.Seconds {
	var s usage.Seconds
	for _, d := range r.Devices {
		if d.Uninstantiated {
			s += d.UnallocatedGPUSeconds
		}
	}
	return s
}

func num(a usage.Amount) string {
	if !a.Known() {
		return "unknown"
	}
	return strconv.FormatFloat(a.Value(), 'f', 0, 64)
}

func div(a usage.Amount, by float64) usage.Amount {
	if !a.Known() || by == 0 {
		return usage.Unknown
	}
	return usage.Known(a.Value() / by)
}

func sortedSources(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// writeCSV writes one row per pod; unknown figures are empty cells.
func writeCSV(out io.Writer, r *usage.Report) error {
	w := csv.NewWriter(out)
	cell := func(a usage.Amount) string {
		if !a.Known() {
			return ""
		}
		return strconv.FormatFloat(a.Value(), 'f', -1, 64)
	}
	_ = w.Write([]string{"namespace", "pod", "node", "allocated_gpu_seconds", "active_gpu_seconds", "idle_allocated_gpu_seconds", "activity_coverage_ratio",
		"cost", "idle_cost", "cost_per_active_gpu_hour", "currency", "vram_used_p50_mib", "vram_used_p95_mib", "vram_used_max_mib", "dram_active_ratio", "power_watts", "energy_joules", "pattern", "activity_sources", "attribution"})
	for _, p := range r.Pods {
		_ = w.Write([]string{p.Namespace, p.Pod, p.Node, strconv.FormatFloat(float64(p.AllocatedGPUSeconds), 'f', -1, 64), cell(p.ActiveGPUSeconds), cell(p.IdleAllocatedGPUSeconds), cell(p.ActivityCoverage),
			cell(p.Cost), cell(p.IdleCost), cell(p.CostPerActiveGPUHour), r.Currency, cell(p.VRAMUsedMiB.P50), cell(p.VRAMUsedMiB.P95), cell(p.VRAMUsedMiB.Max), cell(p.DRAMActive), cell(p.PowerWatts), cell(p.EnergyJoules), string(p.Pattern.Name), strings.Join(p.ActivitySources, " "), p.Attribution})
	}
	w.Flush()
	return w.Error()
}

func writePodUsage(out io.Writer, r *usage.Report) error {
	b, err := yaml.Marshal(r.Facts().File())
	if err != nil {
		return err
	}
	_, err = out.Write(b)
	return err
}

// writeShared lists the GPUs that two or more pods held at once, longest
// shared first, with how their time was split among the pods, the DRA
// device and the pods' claims where dcgm-exporter's DRA labels name them.
func writeShared(b *strings.Builder, r *usage.Report, top int) {
	var shared []usage.DeviceUsage
	for _, d := range r.Devices {
		if d.SharedSeconds > 0 {
			shared = append(shared, d)
		}
	}
	if len(shared) == 0 {
		return
	}
	sort.SliceStable(shared, func(i, j int) bool { return shared[i].SharedSeconds > shared[j].SharedSeconds })
	claims := map[string][]string{}
	for _, p := range r.Pods {
		claims[p.Key()] = p.Claims
	}
	fmt.Fprintf(b, "\nShared GPUs (held by two or more pods at once)\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "NODE\tGPU\tDRA DEVICE\tSHARED HOURS\tSPLIT\tPODS (CLAIMS)\n")
	for i, d := range shared {
		if i == top {
			break
		}
		gpu := d.GPU
		if d.MIGProfile != "" {
			gpu += " " + d.MIGProfile
		}
		var pods []string
		for _, p := range d.SharedBy {
			if c := claims[p]; len(c) > 0 {
				p += " (" + strings.Join(c, ", ") + ")"
			}
			pods = append(pods, p)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", d.Node, gpu, orDash(d.DRADevice), hours(d.SharedSeconds), split(d), strings.Join(pods, ", "))
	}
	tw.Flush()
}

// split says how a shared GPU's time was split among its pods: by their
// processes (gpupack agent), evenly, or the share of it by processes.
func split(d usage.DeviceUsage) string {
	switch {
	case d.PerProcessSeconds <= 0:
		return "even"
	case d.PerProcessSeconds >= d.SharedSeconds:
		return "per-process"
	}
	return fmt.Sprintf("per-process %.0f%%", 100*float64(d.PerProcessSeconds/d.SharedSeconds))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
