package report

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpupack/gpupack/internal/render/adviceout"
	"github.com/gpupack/gpupack/usage"
)

// writeStartup writes the start-ups of the pods that started in the
// window: per workload (the costliest top), then per storage path of the
// model weights.
func writeStartup(b *strings.Builder, r *usage.Report, top int) {
	s := r.Startup
	fmt.Fprintf(b, "\nStart-up by workload (p50 of the pods that started in the window; first GPU use read at %s resolution)\n", dur(usage.Known(float64(s.ResolutionSeconds))))
	if len(s.Workloads) == 0 {
		b.WriteString("no GPU pod started in the window\n")
		return
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "WORKLOAD\tPODS\tMODELS FROM\tSCHEDULING\tIMAGE PULL\tINIT\tTO FIRST GPU USE\tFIRST USE TO READY\tTOTAL P50/P95\tGPU-H HELD (IDLE)\tHELD COST %s\n", r.Currency)
	row := func(g *usage.StartupGroup) {
		fmt.Fprintf(tw, "%s\t%d\t%s", g.Key, g.Pods, g.Storage)
		for _, ph := range g.Phases {
			fmt.Fprintf(tw, "\t%s", dur(ph.Seconds.P50))
		}
		fmt.Fprintf(tw, "\t%s/%s\t%s (%s)\t%s\n", dur(g.Total.P50), dur(g.Total.P95), amountHours(g.HeldGPUSeconds), amountHours(g.HeldIdleGPUSeconds), money(g.HeldCost))
	}
	for i := range s.Workloads {
		if i == top {
			break
		}
		row(&s.Workloads[i])
	}
	if s.Others != nil {
		// The workloads past usage.StartupWorkloads, summed.
		row(s.Others)
	}
	tw.Flush()

	fmt.Fprintf(b, "\nModel load by storage path (load: containers started to app ready)\n")
	tw = tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "MODELS FROM\tPODS\tIMAGE PULL P50\tIMAGE SIZE P50\tINIT P50\tLOAD P50/P95\tTOTAL P50/P95\tHELD COST %s\n", r.Currency)
	for _, g := range s.StoragePaths {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s/%s\t%s/%s\t%s\n", g.Key, g.Pods, dur(g.ImagePull.P50), gb(g.ImageBytes.P50), dur(phaseOf(g, usage.PhaseInit).Seconds.P50),
			dur(g.Load.P50), dur(g.Load.P95), dur(g.Total.P50), dur(g.Total.P95), money(g.HeldCost))
	}
	tw.Flush()
	if line := loadLine(s.StoragePaths); line != "" {
		fmt.Fprintln(b, line)
	}
	if len(s.Fixes) > 0 {
		fmt.Fprintf(b, "\nStart-up fixes (GPU-hours held during the phase removed, scaled to 30 days)\n")
		for i := range s.Fixes {
			fmt.Fprintln(b, adviceout.StartupFix(&s.Fixes[i]))
		}
	}
}

// loadLine says in one sentence how long models take to load from each
// storage path whose load is known, slowest first.
func loadLine(paths []usage.StartupGroup) string {
	var parts []string
	for _, g := range paths {
		if g.Load.P50.Known() {
			parts = append(parts, fmt.Sprintf("from %s %s", g.Key, dur(g.Load.P50)))
		}
	}
	if len(parts) < 2 {
		return ""
	}
	return "Models load (p50) " + strings.Join(parts, ", ") + "."
}

func phaseOf(g usage.StartupGroup, name string) usage.PhaseStats {
	for _, p := range g.Phases {
		if p.Phase == name {
			return p
		}
	}
	return usage.PhaseStats{Phase: name}
}

// dur prints seconds as a duration rounded to the second ("4m0s").
func dur(a usage.Amount) string {
	if !a.Known() {
		return "unknown"
	}
	return (time.Duration(a.Value()*float64(time.Second)) + time.Second/2).Truncate(time.Second).String()
}

// gb prints bytes in GB (10^9), as registries state image sizes.
func gb(a usage.Amount) string {
	if !a.Known() {
		return "unknown"
	}
	return fmt.Sprintf("%.2f GB", a.Value()/1e9)
}
