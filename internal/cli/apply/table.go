package apply

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/gpupack/gpupack/change"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/util/listing"
)

// printDryRun writes the change set as a table or JSON, and how to
// approve it.
func printDryRun(w io.Writer, format string, set *change.Set) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(set)
	}
	stops := 0
	for _, n := range set.Nodes {
		stops += len(n.Stop)
	}
	fmt.Fprintf(w, "change set %s: %s change, %s stop, %.2f GPU-hours lost (estimate)\n", set.Hash, plural(len(set.Nodes), "node"), pods(stops), set.GPUHoursLost)
	g := set.Gain
	fmt.Fprintf(w, "expected gain of the whole plan: %d GPUs freed, nodes freed: %s; pending GPU pods %d -> %d; %.2f %s a month\n",
		g.GPUsFreed, listing.Some(orNone(g.NodesFreed)), g.PendingBefore, g.PendingAfter, g.MonthlySaving, g.Currency)
	for _, warning := range set.Warnings {
		fmt.Fprintln(w, "warning:", warning)
	}
	for _, r := range set.TaintRules {
		fmt.Fprintf(w, "first: DeviceTaintRule %s taints %s/%s/%s (XID %d) NoSchedule; nothing is evicted\n", r.Name, r.Driver, r.Pool, r.Device, r.XID)
	}
	for _, n := range set.Nodes {
		fmt.Fprintln(w)
		printNode(w, n)
	}
	fmt.Fprintln(w)
	if len(set.Nodes) == 0 && len(set.TaintRules) == 0 {
		fmt.Fprintln(w, "dry run: the cluster already has every label the plan sets; nothing to apply")
		return nil
	}
	fmt.Fprintf(w, "dry run: nothing was written. To apply it, run the same command with --approve %s\n", set.Hash)
	return nil
}

func printNode(w io.Writer, n change.Node) {
	fence := "cordon the node"
	if n.DRA {
		fence = "taint the changed DRA GPUs"
	}
	fmt.Fprintf(w, "NODE %s (pool %s, role %s): %s stop, %.2f GPU-hours lost; fence: %s\n", n.Name, n.Pool, n.Role, pods(len(n.Stop)), n.GPUHoursLost, fence)
	for _, l := range n.Labels {
		fmt.Fprintf(w, "  label %s: %s -> %s\n", l.Key, orAbsent(l.From), orAbsent(l.To))
	}
	for _, g := range n.GPUs {
		fmt.Fprintf(w, "  GPU %d: %s -> %s\n", g.Index, g.From, g.To)
	}
	if n.Allocatable != nil {
		fmt.Fprintf(w, "  allocatable after: %s\n", formatAllocatable(n.Allocatable))
	}
	if len(n.Stop) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  POD\tHOLDS\tWHY\tPDB ALLOWS NOW\tGOES TO")
		for _, s := range n.Stop {
			fmt.Fprintf(tw, "  %s\t%d %s\t%s\t%s\t%s\n", s.Pod, s.Count, s.Resource, s.Why, budget(s), orPending(s.Destination))
		}
		tw.Flush()
	}
	if len(n.Fits) > 0 {
		fmt.Fprintf(w, "  pending pods that fit after: %s\n", listing.Some(keys(n.Fits)))
	}
}

func budget(s change.Stop) string {
	if s.Budget == nil {
		return "no PDB"
	}
	verdict := "yes"
	if !s.EvictableNow() {
		verdict = "no"
	}
	return fmt.Sprintf("%s (%s/%s: %d)", verdict, s.Budget.Namespace, s.Budget.Name, s.Budget.DisruptionsAllowed)
}

func formatAllocatable(a map[string]int64) string {
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(a)) {
		parts = append(parts, fmt.Sprintf("%s=%d", r, a[r]))
	}
	if len(parts) == 0 {
		return "no GPU resources"
	}
	return strings.Join(parts, ", ")
}

// printResults writes what happened to each node.
func printResults(w io.Writer, results []app.NodeResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tOUTCOME\tEVICTED\tGPU-HOURS LOST\tSECONDS\tREASON")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%.0f\t%s\n", r.Node, r.Outcome, len(r.Evicted), r.GPUHoursLost, r.Ended.Sub(r.Started).Seconds(), orDash(r.Reason))
	}
	tw.Flush()
	for _, r := range results {
		if len(r.StillPending) > 0 {
			fmt.Fprintf(w, "%s: pending pods the change was for that do not fit it yet: %s\n", r.Node, listing.Some(keys(r.StillPending)))
		}
	}
}

func keys(ks []cluster.PodKey) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.String()
	}
	return out
}

func orAbsent(s string) string {
	if s == "" {
		return "(absent)"
	}
	return s
}

func orPending(s string) string {
	if s == "" {
		return "(stays pending)"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func orNone(xs []string) []string {
	if len(xs) == 0 {
		return []string{"none"}
	}
	return xs
}

func pods(n int) string { return plural(n, "pod") }

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
