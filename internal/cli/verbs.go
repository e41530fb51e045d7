package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/gpupack/gpupack/internal/cli/agent"
	"github.com/gpupack/gpupack/internal/cli/apply"
	"github.com/gpupack/gpupack/internal/cli/diagnose"
	"github.com/gpupack/gpupack/internal/cli/fakedcgm"
	"github.com/gpupack/gpupack/internal/cli/plan"
	"github.com/gpupack/gpupack/internal/cli/reclaim"
	"github.com/gpupack/gpupack/internal/cli/report"
	"github.com/gpupack/gpupack/internal/cli/restore"
	"github.com/gpupack/gpupack/internal/cli/rules"
	"github.com/gpupack/gpupack/internal/cli/serve"
	"github.com/gpupack/gpupack/internal/cli/simulate"
	"github.com/gpupack/gpupack/internal/cli/snapshot"
	"github.com/gpupack/gpupack/internal/cli/version"
	"github.com/gpupack/gpupack/internal/cli/vram"
	"github.com/gpupack/gpupack/internal/cli/webhook"
)

// verbs lists gpupack's commands, one line each, in the order of the
// mission: measure, diagnose, plan, act, then the engine's own tools.
func verbs(ctx context.Context) []*cobra.Command {
	return []*cobra.Command{
		report.NewCommand(ctx),
		diagnose.NewCommand(ctx),
		plan.NewCommand(ctx),
		apply.NewCommand(ctx),
		reclaim.NewCommand(ctx),
		restore.NewCommand(ctx),
		serve.NewCommand(ctx),
		agent.NewCommand(ctx),
		rules.NewCommand(),
		snapshot.NewCommand(ctx),
		simulate.NewCommand(ctx),
		vram.NewCommand(ctx),
		webhook.NewCommand(ctx),
		fakedcgm.NewCommand(ctx),
		version.NewCommand(),
	}
}
