// Package rules is the `gpupack rules` verb: it prints the Prometheus
// recording rules that record every figure of report --accounting hourly's
// buckets over 5-minute windows, so that a month of a fleet is read from a
// few recorded numbers per device-hour. The rules themselves are
// internal/source/promql's.
package rules

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpupack/gpupack/internal/source/promql"
)

type options struct {
	step     time.Duration
	selector string
}

// NewCommand returns the rules command.
func NewCommand() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "rules",
		Short: "Print the Prometheus recording rules that make hourly accounting of a month fast",
		Long: `rules prints a Prometheus rules file with one recording rule per figure
of report --accounting hourly's buckets (held steps, shares, activity,
VRAM, power, energy, data quality), each over a 5-minute window of
dcgm-exporter's series at --step, the scrape interval, evaluated every
5 minutes and named gpupack:<figure>:5m with the label gpupack_step.
With --selector (such as job="dcgm-exporter") every rule reads only the
DCGM series it matches, and its series carry the label gpupack_selector:
report and serve read them only with the same --prometheus-selector.
Load it into the Prometheus that scrapes dcgm-exporter (rule_files: in
prometheus.yml; the Helm chart ships it as a ConfigMap and, with
prometheusRule.enabled, as a PrometheusRule). Where the recorded series
cover a day of the window, report and serve read that day's buckets from
them instead of computing them from the series. To record the past too:
promtool tsdb create-blocks-from rules.`,
		Example: `  gpupack rules > gpupack-rules.yaml
  gpupack rules --step 15s > gpupack-rules.yaml
  gpupack rules --selector 'job="dcgm-exporter"' > gpupack-rules.yaml
  promtool tsdb create-blocks-from rules --start 2026-01-01T00:00:00Z --url http://prometheus:9090 gpupack-rules.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(o, cmd.OutOrStdout())
		},
	}
	cmd.Flags().DurationVar(&o.step, "step", 30*time.Second, "the evaluation step: dcgm-exporter's scrape interval, which must divide 5m and be the --step of the reports that read the rules")
	cmd.Flags().StringVar(&o.selector, "selector", "", `PromQL label matchers that select dcgm-exporter's series, such as job="dcgm-exporter"; must be the --prometheus-selector of the reports and serve that read the rules (empty: every series of the DCGM names)`)
	return cmd
}

func run(o *options, stdout io.Writer) error {
	sel, err := promql.ParseSelector(o.selector)
	if err != nil {
		return fmt.Errorf("--selector: %w", err)
	}
	b, err := promql.RulesYAML(o.step, sel)
	if err != nil {
		return err
	}
	_, err = stdout.Write(b)
	return err
}
