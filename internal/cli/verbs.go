package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/gpupack/gpupack/internal/cli/diagnose"
	"github.com/gpupack/gpupack/internal/cli/fakedcgm"
	"github.com/gpupack/gpupack/internal/cli/report"
	"github.com/gpupack/gpupack/internal/cli/simulate"
	"github.com/gpupack/gpupack/internal/cli/vram"
)

// verbs lists gpupack's commands, one line each.
func verbs(ctx context.Context) []*cobra.Command {
	return []*cobra.Command{
		report.NewCommand(ctx),
		fakedcgm.NewCommand(ctx),
		simulate.NewCommand(ctx),
		diagnose.NewCommand(ctx),
		vram.NewCommand(ctx),
	}
}
