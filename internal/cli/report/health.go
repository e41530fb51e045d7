package report

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/gpupack/gpupack/internal/render/planout"
	"github.com/gpupack/gpupack/usage"
)

// writeHealth writes the GPUs that reported XID errors in the window, what
// the XIDs mean (critical, or application XIDs that leave the GPU
// healthy) and the fix (planout.ReportHealth, as serve's page words
// them); nothing when none did.
func writeHealth(b *strings.Builder, r *usage.Report) {
	hs := planout.ReportHealth(r)
	if len(hs) == 0 {
		return
	}
	fmt.Fprintf(b, "\nGPU health (dcgm-exporter's XID errors in the window)\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "NODE\tGPU\tUUID\tXIDS\tSTATE\tFIX\n")
	for _, h := range hs {
		xids := make([]string, len(h.XIDs))
		for i, x := range h.XIDs {
			xids[i] = fmt.Sprint(x)
		}
		state := "application"
		if h.Critical != 0 {
			state = fmt.Sprintf("critical (XID %d)", h.Critical)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", h.Node, h.GPU, h.UUID, strings.Join(xids, ","), state, h.Fix)
	}
	tw.Flush()
}
