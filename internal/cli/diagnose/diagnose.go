// Package diagnose is the `gpupack diagnose` verb: why each Pending GPU pod
// waits, with evidence and the fix. It reads the snapshot and usage files
// and formats the diagnose package's findings; the diagnosis is there.
package diagnose

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/cli/clio"
)

var (
	//go:embed demo/cluster.yaml
	demoCluster []byte
	//go:embed demo/usage.yaml
	demoUsage []byte
)

type options struct {
	snapshot string
	usage    string
	pod      string
	format   string
}

// NewCommand returns the diagnose command.
func NewCommand(ctx context.Context) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "diagnose",
		Short: "Explain why each Pending GPU pod waits: allocation, memory, placement or application",
		Long: `diagnose explains every Pending GPU pod of a cluster snapshot with the first
cause in this order, the evidence and the fix:
  allocation        matching GPUs exist but all are held (names the holders and how active they are)
  memory            the pod's GPU memory need fits no free VRAM or MIG slice
  placement         GPUs are free but the pod's selector, affinity, tolerations or GPU model exclude them
  application       the pod fits; its workload underuses its GPUs, so more GPUs would not help
  no-such-hardware  no node could run it, even empty
  quota/other       the cause is outside GPUs (CPU, memory, quota, the queue)

With no flags it runs on an embedded demo cluster with pending pods of every cause.
--usage adds per-pod usage facts (activity, pattern, VRAM used, model for a memory estimate).`,
		Example: `  gpupack diagnose
  gpupack diagnose --snapshot cluster.yaml --usage usage.yaml
  gpupack diagnose --snapshot cluster.yaml --pod ml/train-7b --format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.snapshot, "snapshot", "", "cluster snapshot file (YAML or JSON); the embedded demo when empty")
	f.StringVar(&o.usage, "usage", "", "usage file of per-pod facts (kind PodUsage); with the demo, the demo's usage")
	f.StringVar(&o.pod, "pod", "", "diagnose only this pending pod (namespace/name)")
	f.StringVar(&o.format, "format", "table", "output format: table or json")
	return cmd
}

func run(_ context.Context, o *options, stdout io.Writer) error {
	if err := clio.CheckFormat(o.format, "table", "json"); err != nil {
		return err
	}
	snapData, snapName, usageData, usageName := demoCluster, "demo/cluster.yaml", []byte(nil), ""
	if o.snapshot == "" && o.usage == "" {
		usageData, usageName = demoUsage, "demo/usage.yaml"
	}
	var err error
	if o.snapshot != "" {
		if snapData, err = os.ReadFile(o.snapshot); err != nil {
			return fmt.Errorf("--snapshot: %w", err)
		}
		snapName = o.snapshot
	}
	if o.usage != "" {
		if usageData, err = os.ReadFile(o.usage); err != nil {
			return fmt.Errorf("--usage: %w", err)
		}
		usageName = o.usage
	}
	s, err := cluster.ParseFile(snapData, snapName, gpu.Default())
	if err != nil {
		return err
	}
	var u *diagnose.Usage
	if usageData != nil {
		if u, err = diagnose.ParseUsage(usageData, usageName); err != nil {
			return err
		}
	}
	rep, err := diagnose.Diagnose(s, u)
	if err != nil {
		return err
	}
	if o.pod != "" {
		var keep []diagnose.Finding
		for _, f := range rep.Findings {
			if f.Pod == o.pod {
				keep = append(keep, f)
			}
		}
		if len(keep) == 0 {
			return fmt.Errorf("--pod %s: no pending pod of that name in %s (%d pending)", o.pod, snapName, rep.Pending)
		}
		rep.Findings = keep
	}
	if o.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	writeTable(stdout, rep)
	return nil
}

func writeTable(w io.Writer, rep *diagnose.Report) {
	fmt.Fprintf(w, "cluster: %d nodes, %d GPUs; %d pending pods\n", rep.Nodes, rep.GPUs, rep.Pending)
	for _, warn := range rep.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	for _, f := range rep.Findings {
		fmt.Fprintln(w)
		if f.Cause == "" {
			fmt.Fprintf(w, "%s: %s\n", f.Pod, f.Note)
			continue
		}
		cause := strings.ToUpper(string(f.Cause))
		if len(f.Also) > 0 {
			also := make([]string, len(f.Also))
			for i, c := range f.Also {
				also[i] = string(c)
			}
			cause += " (also " + strings.Join(also, ", ") + ")"
		}
		fmt.Fprintf(w, "%s (%s): %s\n", f.Pod, f.Request, cause)
		fmt.Fprintf(w, "  scheduler: %s\n", f.Summary)
		for _, line := range evidenceLines(f) {
			fmt.Fprintf(w, "  %s\n", line)
		}
		for i, fix := range f.Fix {
			label := "  fix:      "
			if i > 0 {
				label = "  or:       "
			}
			fmt.Fprintf(w, "%s%s\n", label, fix)
		}
	}
}

func evidenceLines(f diagnose.Finding) []string {
	ev := f.Evidence
	var out []string
	nodes := diagnose.JoinNames(ev.Nodes, ev.NodeCount)
	switch f.Cause {
	case diagnose.Allocation:
		h := ev.Holders
		line := fmt.Sprintf("evidence: all %d %s GPUs on %s are held by %d pods", ev.GPUs, strings.Join(ev.GPUModels, "/"), nodes, h.Pods)
		if h.Measured > 0 {
			line += fmt.Sprintf("; mean activity of the holders over %s: %s; %d of them are idle-held", h.Window, pct(h.MeanActiveRatio), h.IdleHeld)
		}
		out = append(out, line)
		var hs []string
		for _, x := range h.Listed {
			if x.Measured {
				hs = append(hs, fmt.Sprintf("%s %s %s", x.Pod, x.Pattern, pct(x.ActiveRatio)))
			} else {
				hs = append(hs, x.Pod)
			}
		}
		out = append(out, "holders:  "+diagnose.JoinNames(hs, h.Pods))
	case diagnose.Memory:
		m := ev.Memory
		line := fmt.Sprintf("evidence: needs %s per GPU (%s)", m.Need, m.Source)
		if e := m.Estimate; e != nil {
			line += fmt.Sprintf(" = weights %s + KV cache %s + overhead %s", e.Weights, e.KVCache, e.Overhead)
		}
		line += fmt.Sprintf("; the most free on one usable GPU is %s, the largest usable GPU has %s", m.LargestFree, m.LargestGPU)
		if ev.NodeCount > 0 && len(ev.Nodes) > 0 {
			line += " (" + nodes + ")"
		}
		out = append(out, line)
	case diagnose.Placement:
		out = append(out, fmt.Sprintf("evidence: %d %s GPUs on %s have room, but the pod's rules exclude them", ev.GPUs, strings.Join(ev.GPUModels, "/"), nodes))
		for _, r := range ev.Rules {
			rule := r.Rule
			if r.Message != r.Rule {
				rule += " (" + r.Message + ")"
			}
			out = append(out, fmt.Sprintf("rule:     %s excludes %s", rule, diagnose.JoinNames(r.Excludes, r.ExcludesCount)))
		}
	case diagnose.Application:
		u := ev.Usage
		out = append(out, fmt.Sprintf("evidence: fits %s now; its workload's GPUs are %s, %s active over %s", nodes, u.Pattern, pct(u.ActiveRatio), u.Window))
	case diagnose.NoSuchHardware, diagnose.Other:
		if ev.NodeCount > 0 && len(ev.Nodes) > 0 {
			out = append(out, "evidence: fits "+nodes+" now")
		}
		for _, r := range ev.Blocking {
			out = append(out, "blocking: "+r.String())
		}
	}
	return out
}

func pct(r float64) string { return fmt.Sprintf("%.0f%%", 100*r) }
