package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/gpupack/gpupack/internal/cli/diagnose"
	"github.com/gpupack/gpupack/internal/cli/plan"
	"github.com/gpupack/gpupack/internal/cli/simulate"
	"github.com/gpupack/gpupack/internal/cli/vram"
)

// verbs lists gpupack's commands, one line each.
func verbs(ctx context.Context) []*cobra.Command {
	return []*cobra.Command{
		simulate.NewCommand(ctx),
		diagnose.NewCommand(ctx),
		plan.NewCommand(ctx),
		vram.NewCommand(ctx),
	}
}
