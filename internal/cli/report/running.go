package report

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/gpupack/gpupack/internal/render/adviceout"
	"github.com/gpupack/gpupack/usage"
)

// writeRunning writes what limits each running GPU pod and what to change
// instead of adding GPUs: the pods whose change frees most first, GPU-bound
// ones last, top of them.
func writeRunning(b *strings.Builder, r *usage.Report, top int) {
	pods := r.Judged()
	fmt.Fprintf(b, "\nWhat limits the running pods (%s)\n", orNone(adviceout.Counts(r.Bottlenecks)))
	if len(pods) == 0 {
		b.WriteString("no pod with measured activity\n")
		return
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "POD\tALLOCATED\tPATTERN\tVERDICT\tEVIDENCE\tCHANGE INSTEAD OF MORE GPUS\n")
	for i, p := range pods {
		if i == top {
			break
		}
		v := p.Bottleneck
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Key(), hours(p.AllocatedGPUSeconds), v.Pattern, v.Verdict, adviceout.Evidence(v), adviceout.Change(v))
	}
	tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "none judged"
	}
	return s
}
