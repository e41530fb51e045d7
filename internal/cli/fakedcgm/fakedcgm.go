// Package fakedcgm is the `gpupack fake-dcgm` verb: it serves a scripted
// scenario's GPUs on /metrics in dcgm-exporter's exposition format, with the
// scenario's clock starting when the server starts, and writes the ground
// truth when the scenario ends or the command is interrupted.
//
// It only wires flags, the HTTP server and files; the simulator is
// internal/gpusim's.
package fakedcgm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpupack/gpupack/gpu"
	sim "github.com/gpupack/gpupack/internal/gpusim"
	"github.com/gpupack/gpupack/internal/source/demo"
)

// StateMetricsPath is where fake-dcgm serves what kube-state-metrics would
// expose of the scenario's scripted pod times.
const StateMetricsPath = "/kube-state-metrics/metrics"

// CAdvisorMetricsPath is where fake-dcgm serves what the kubelet's
// cAdvisor endpoint would expose of the pods whose CPU or input the
// scenario scripts: the kubelet's own path.
const CAdvisorMetricsPath = "/metrics/cadvisor"

type options struct {
	scenario string
	listen   string
	truth    string
	// --openmetrics writes a fleet's history instead of serving.
	openMetrics string
	gpus, days  int
	day         int
	start       string
	scrape      time.Duration
	seed        uint64
}

// NewCommand returns the fake-dcgm command.
func NewCommand(ctx context.Context) *cobra.Command {
	opts := &options{}
	cmd := &cobra.Command{
		Use:   "fake-dcgm",
		Short: "Serve scripted GPUs in dcgm-exporter's exposition format, for tests and demos",
		Long: `fake-dcgm serves /metrics as dcgm-exporter would for the GPUs, MIG slices, pods
and activity patterns of a scenario file (without --scenario, the week of
the embedded demo world that gpupack report --demo accounts). Time 0 of the
scenario is when the server starts; after the scenario's duration every GPU
is free. Beside it, /kube-state-metrics/metrics serves what kube-state-metrics
would expose of the pods whose start-up the scenario scripts (creation,
scheduling, container start and readiness times, and the owner), and
/agent/metrics what gpupack agent would serve on each node (each pod's own
activity and memory on its device), and on /metrics/cadvisor what the
kubelet's cAdvisor would expose of the pods that script their CPU or input
(CFS periods, throttling, CPU seconds and quota, disk and network reads).
With --truth it writes the true
allocated and active GPU-seconds per pod as JSON when the scenario ends and
again when interrupted.

With --openmetrics FILE it serves nothing: it writes the history of a fleet
of --gpus H100 GPUs over --days days (pods coming and going, time-slicing,
a MIG GPU), scraped every --scrape, as OpenMetrics text for
promtool tsdb create-blocks-from openmetrics; --day K writes only day K
(from 0), so that a long history can be backfilled a day at a time.`,
		Example: `  gpupack fake-dcgm --scenario e2e.yaml --listen 127.0.0.1:9400 --truth truth.json
  gpupack fake-dcgm --openmetrics day0.om --gpus 1000 --days 30 --day 0 --start 2026-01-01T00:00:00Z
  promtool tsdb create-blocks-from openmetrics day0.om /var/lib/prometheus/data`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(ctx, opts, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.scenario, "scenario", "", "scenario YAML file; empty serves the embedded demo week")
	f.StringVar(&opts.listen, "listen", "127.0.0.1:9400", "address to serve /metrics on (port 0: any free port; stderr says which)")
	f.StringVar(&opts.truth, "truth", "", "file to write the ground truth to (JSON)")
	f.StringVar(&opts.openMetrics, "openmetrics", "", "write a fleet's history to this OpenMetrics file instead of serving")
	f.IntVar(&opts.gpus, "gpus", 1000, "GPUs of the fleet (--openmetrics)")
	f.IntVar(&opts.days, "days", 30, "days of the fleet's history (--openmetrics)")
	f.IntVar(&opts.day, "day", -1, "write only this day of the history, from 0 (--openmetrics); -1 writes all")
	f.StringVar(&opts.start, "start", "", "RFC 3339 start of the history (--openmetrics); default the start of the UTC day --days ago")
	f.DurationVar(&opts.scrape, "scrape", 30*time.Second, "scrape interval of the history (--openmetrics)")
	f.Uint64Var(&opts.seed, "seed", 1, "seed of the fleet's random pods (--openmetrics)")
	return cmd
}

func run(ctx context.Context, opts *options, stderr io.Writer) error {
	if opts.openMetrics != "" {
		return writeHistory(opts, stderr)
	}
	s, err := demo.Scenario(gpu.Default())
	if err != nil {
		return err
	}
	if opts.scenario != "" {
		data, err := os.ReadFile(opts.scenario)
		if err != nil {
			return fmt.Errorf("--scenario: %v", err)
		}
		if s, err = sim.Parse(data, opts.scenario, gpu.Default()); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", opts.listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %v; pick a free address such as 127.0.0.1:9400, or 127.0.0.1:0 for any free port", opts.listen, err)
	}
	start := time.Now()
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_ = s.WriteMetrics(w, time.Since(start))
	})
	mux.HandleFunc(StateMetricsPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_ = s.WriteStateMetrics(w, start, time.Since(start))
	})
	mux.Handle(AgentMetricsPath, agentHandler(s, start))
	mux.HandleFunc(CAdvisorMetricsPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_ = s.WriteCAdvisorMetrics(w, start, time.Since(start))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "fake-dcgm: serving %d nodes on http://%s/metrics for %s\n", len(s.Nodes), ln.Addr(), s.Duration.D())
	writeTruth := func() error {
		if opts.truth == "" {
			return nil
		}
		b, err := json.MarshalIndent(s.Truth(start, min(time.Since(start), s.Duration.D())), "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(opts.truth, append(b, '\n'), 0o644)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	ended := time.NewTimer(s.Duration.D())
	defer ended.Stop()
	for {
		select {
		case <-ended.C:
			if err := writeTruth(); err != nil {
				return fmt.Errorf("--truth %s: %v", opts.truth, err)
			}
		case err := <-errc:
			return err
		case <-ctx.Done():
			shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shut)
			if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			if err := writeTruth(); err != nil {
				return fmt.Errorf("--truth %s: %v", opts.truth, err)
			}
			return nil
		}
	}
}

// writeHistory writes a fleet's history (or one day of it) as OpenMetrics,
// and its ground truth with --truth.
func writeHistory(opts *options, stderr io.Writer) error {
	if opts.scenario != "" {
		return errors.New("--openmetrics writes a generated fleet (--gpus, --days); drop --scenario")
	}
	if opts.day < -1 || opts.day >= opts.days {
		return fmt.Errorf("--day %d: want a day from 0 to %d of the --days %d, or -1 for all", opts.day, opts.days-1, opts.days)
	}
	start := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -opts.days)
	if opts.start != "" {
		var err error
		if start, err = time.Parse(time.RFC3339, opts.start); err != nil {
			return fmt.Errorf("--start %q: %v; write a time such as 2026-01-01T00:00:00Z", opts.start, err)
		}
	}
	s, err := sim.Fleet(opts.gpus, opts.days, opts.seed, gpu.Default())
	if err != nil {
		return fmt.Errorf("--gpus %d --days %d: %v", opts.gpus, opts.days, err)
	}
	from, to := time.Duration(0), s.Duration.D()
	if opts.day >= 0 {
		from = time.Duration(opts.day) * 24 * time.Hour
		to = from + 24*time.Hour
	}
	f, err := os.Create(opts.openMetrics)
	if err != nil {
		return fmt.Errorf("--openmetrics: %v", err)
	}
	if err := s.WriteOpenMetrics(f, start, from, to, opts.scrape, sim.Faults{}); err != nil {
		f.Close()
		return fmt.Errorf("--openmetrics %s: %v", opts.openMetrics, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--openmetrics %s: %v", opts.openMetrics, err)
	}
	fmt.Fprintf(stderr, "fake-dcgm: wrote %d GPUs, %d pods, %s..%s to %s\n", opts.gpus, len(s.Pods), start.Add(from).Format(time.RFC3339), start.Add(to).Format(time.RFC3339), opts.openMetrics)
	if opts.truth == "" {
		return nil
	}
	b, err := json.MarshalIndent(s.Truth(start, to), "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(opts.truth, append(b, '\n'), 0o644)
}
