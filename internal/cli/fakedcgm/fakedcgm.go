// Package fakedcgm is the `gpupack fake-dcgm` verb: it serves a scripted
// scenario's GPUs on /metrics in dcgm-exporter's exposition format, with the
// scenario's clock starting when the server starts, and writes the ground
// truth when the scenario ends or the command is interrupted.
//
// It only wires flags, the HTTP server and files; the simulator is
// internal/fakedcgm's.
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
	sim "github.com/gpupack/gpupack/internal/fakedcgm"
)

type options struct {
	scenario string
	listen   string
	truth    string
}

// NewCommand returns the fake-dcgm command.
func NewCommand(ctx context.Context) *cobra.Command {
	opts := &options{}
	cmd := &cobra.Command{
		Use:   "fake-dcgm",
		Short: "Serve scripted GPUs in dcgm-exporter's exposition format, for tests and demos",
		Long: `fake-dcgm serves /metrics as dcgm-exporter would for the GPUs, MIG slices, pods
and activity patterns of a scenario file (the embedded demo day without
--scenario). Time 0 of the scenario is when the server starts; after the
scenario's duration every GPU is free. With --truth it writes the true
allocated and active GPU-seconds per pod as JSON when the scenario ends and
again when interrupted.`,
		Example: `  gpupack fake-dcgm --scenario e2e.yaml --listen 127.0.0.1:9400 --truth truth.json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(ctx, opts, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.scenario, "scenario", "", "scenario YAML file; empty serves the embedded demo")
	f.StringVar(&opts.listen, "listen", "127.0.0.1:9400", "address to serve /metrics on (port 0: any free port; stderr says which)")
	f.StringVar(&opts.truth, "truth", "", "file to write the ground truth to (JSON)")
	return cmd
}

func run(ctx context.Context, opts *options, stderr io.Writer) error {
	s := sim.Demo(gpu.Default())
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
