package reclaim

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/reclaim"
)

// printSet writes the detection as a table or JSON, and what to do next.
func printSet(w io.Writer, format string, s *reclaim.Set) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	cost := "cost unknown"
	if s.CostPerDay != nil {
		cost = fmt.Sprintf("%.2f a day", *s.CostPerDay)
	}
	noun := "candidates"
	if len(s.Candidates) == 1 {
		noun = "candidate"
	}
	fmt.Fprintf(w, "reclaim set %s at %s: %d %s holding %.2f GPUs idle, %s\n", s.Hash, s.At.UTC().Format(time.RFC3339), len(s.Candidates), noun, s.GPUs, cost)
	if s.BusinessHours {
		fmt.Fprintln(w, "now is in the policy's business hours: notices only, no action")
	}
	for _, warning := range s.Warnings {
		fmt.Fprintln(w, "warning:", warning)
	}
	if len(s.Candidates) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "\nID\tOWNER\tCLASS\tACTION\tGPUS\tIDLE GPU-H\tLAST ACTIVE\tCOST/DAY\tSTATE\tAPPROVAL")
		for _, c := range s.Candidates {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2f\t%.1f\t%s\t%s\t%s\t%s\n", c.ID, c.Owner, c.Class, action(c), c.GPUs(), c.Evidence.IdleGPUHours,
				lastActive(c.Evidence.LastActive), money(c.Evidence.CostPerDay), state(c), approval(c))
		}
		tw.Flush()
		for _, c := range s.Candidates {
			fmt.Fprintf(w, "  %s: %s\n", c.ID, app.Summary(c))
		}
	}
	if len(s.Skipped) > 0 {
		fmt.Fprintf(w, "\nleft alone (%d):\n", len(s.Skipped))
		for _, k := range s.Skipped {
			fmt.Fprintf(w, "  %s [%s]: %s\n", k.Owner, k.Reason, k.Detail)
		}
	}
	fmt.Fprintln(w)
	if len(s.Candidates) == 0 {
		fmt.Fprintln(w, "dry run: nothing holds GPUs idle by the policy; nothing to do")
		return nil
	}
	fmt.Fprintf(w, "dry run: nothing was written. Notify the owners with --notify; once their notice has run out, act with --approve %s\n", s.Hash)
	return nil
}

func action(c reclaim.Candidate) string {
	a := string(c.Action)
	if c.Scaler != nil && c.Action == reclaim.ScaleToZero {
		a += " (pauses " + string(c.Scaler.Kind) + ")"
	}
	if !c.Restorable {
		a += " (not restorable)"
	}
	return a
}

func lastActive(t *time.Time) string {
	if t == nil {
		return "not in window"
	}
	return t.UTC().Format("01-02 15:04")
}

func money(v *float64) string {
	if v == nil {
		return "unknown"
	}
	return fmt.Sprintf("%.2f", *v)
}

func state(c reclaim.Candidate) string {
	if c.State == reclaim.StateNoticed && c.Deadline != nil {
		return "noticed until " + c.Deadline.UTC().Format("01-02 15:04")
	}
	return c.State
}

func approval(c reclaim.Candidate) string {
	switch {
	case !c.Restorable:
		return "explicit only"
	case c.AutoApproved:
		return "policy"
	}
	return "needed"
}

// printOutcome writes what a run did.
func printOutcome(w io.Writer, out *app.ReclaimOutcome) {
	for _, id := range out.Notified {
		fmt.Fprintf(w, "notified %s\n", id)
	}
	for _, r := range out.Records {
		line := fmt.Sprintf("%s %s: %s %s (approved by %s)", r.Outcome, r.ID, r.Action, r.Owner, r.ApprovedBy)
		if r.Reason != "" {
			line += ": " + r.Reason
		}
		fmt.Fprintln(w, line)
	}
	for _, wt := range out.Waiting {
		fmt.Fprintf(w, "waiting %s %s: %s\n", wt.ID, wt.Owner, wt.Reason)
	}
	if len(out.Notified)+len(out.Records)+len(out.Waiting) == 0 {
		fmt.Fprintln(w, "no candidates")
	}
}

// printLedger writes the ledger's entries with predicted and measured
// saving, and their totals.
func printLedger(w io.Writer, entries []app.LedgerEntry, t app.LedgerTotals) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAT\tOWNER\tACTION\tOUTCOME\tGPUS\tPREDICTED GPU-H\tFREED GPU-H\tREUSED GPU-H\tFREED COST")
	for _, e := range entries {
		pred, freed, reused, cost := "-", "-", "-", "-"
		if m := e.Measured; m != nil {
			pred, freed, reused, cost = fmt.Sprintf("%.2f", m.PredictedGPUHrs), fmt.Sprintf("%.2f", m.FreedGPUHours), fmt.Sprintf("%.2f", m.ReusedGPUHours), money(m.FreedCost)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.2f\t%s\t%s\t%s\t%s\n", e.ID, e.At.UTC().Format("01-02 15:04"), e.Owner, e.Action, e.Outcome, e.Predicted.GPUs, pred, freed, reused, cost)
	}
	tw.Flush()
	var outcomes []string
	for _, k := range slices.Sorted(maps.Keys(t.ByOutcome)) {
		outcomes = append(outcomes, fmt.Sprintf("%s %d", k, t.ByOutcome[k]))
	}
	fmt.Fprintf(w, "\n%d records (%s); %d measured: predicted %.2f GPU-hours, freed %.2f, reused by other pods %.2f, unused %.2f; freed cost %.2f (%d priced)\n",
		t.Records, strings.Join(outcomes, ", "), t.Measured, t.PredictedGPUHrs, t.FreedGPUHours, t.ReusedGPUHours, t.UnusedGPUHours, t.FreedCost, t.CostKnown)
	fmt.Fprintln(w, "unused GPU-hours save money only where that capacity is released (a node scaled away); reused ones served other pods")
	for _, e := range entries {
		if e.MeasureError != "" {
			fmt.Fprintf(w, "%s not measured: %s\n", e.ID, e.MeasureError)
		}
	}
}
