// Package serve is the `gpupack serve` verb: the dashboard, the JSON API
// and the health endpoints of internal/serve, on the embedded demo (for
// now the only source). It only wires flags and the provider.
package serve

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gpupack/gpupack/internal/serve"
)

type options struct {
	demo   bool
	listen string
}

// NewCommand returns the serve command.
func NewCommand(ctx context.Context) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve a web dashboard and a JSON API: GPU-hours allocated vs active, idle cost, pending pods, the plan",
		Long: `serve runs gpupack as a service: a web dashboard at / (fleet GPU-hours
allocated against active per hour, idle cost and cost per active GPU-hour,
a sortable and filterable table of pods with their pattern and
recommendation, the pending GPU pods with cause, fix and wait, start-up
phases, the plan with its configs to download, and the simulator's curve),
the same data as JSON under /api/v1/ (report, pending, plan, hours, view:
the structures the CLI prints), /healthz and /readyz.

It is read-only and listens on loopback unless --listen says otherwise;
the page loads nothing from outside the server.

--demo (the default) serves the embedded demos of report, diagnose, plan
and simulate, with no cluster.`,
		Example: `  gpupack serve
  gpupack serve --demo --listen 127.0.0.1:9400`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(ctx, o, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.demo, "demo", false, "serve the embedded demo (the default: no other source yet)")
	f.StringVar(&o.listen, "listen", serve.DefaultAddr, "address to serve on; a port of 0 picks a free one; give 0.0.0.0:PORT to serve beyond this machine")
	return cmd
}

func run(ctx context.Context, o *options, stderr io.Writer) error {
	fmt.Fprintln(stderr, "serve: building the demo view (report, diagnose, plan and a simulator run)...")
	v, err := DemoView(ctx)
	if err != nil {
		return fmt.Errorf("serve --demo: %w", err)
	}
	return serve.Serve(ctx, serve.Options{Addr: o.listen, Provider: fixed{v}}, stderr)
}

// fixed is a provider of one view that never changes: the demo's.
type fixed struct{ v *serve.View }

func (f fixed) View() *serve.View { return f.v }
func (f fixed) Ready() error      { return nil }
