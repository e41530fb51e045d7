// Package cli assembles the gpupack command line from its verbs. Each verb is
// a small package under internal/cli with NewCommand(ctx) and a private
// options struct; this package only lists them.
package cli

import (
	"context"

	"github.com/spf13/cobra"
)

// NewRoot returns the gpupack root command with every verb attached.
func NewRoot(ctx context.Context) *cobra.Command {
	root := &cobra.Command{
		Use:   "gpupack",
		Short: "Measure, diagnose, plan and pack GPU workloads on Kubernetes",
		Long: `gpupack makes GPU waste visible and fixes it:
  measure   GPU-seconds allocated next to GPU-seconds active, VRAM and cost
  diagnose  why each Pending GPU pod waits, with evidence and the fix
  plan      sharing (time-slicing, MIG, MPS) and bin-packing, proven by simulation
  pack      a scheduler plugin and an admission webhook

Every verb runs on an embedded demo when given no input.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(verbs(ctx)...)
	return root
}
