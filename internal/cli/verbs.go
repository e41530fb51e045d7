package cli

import (
	"context"

	"github.com/spf13/cobra"
)

// verbs lists gpupack's commands, one line each.
func verbs(ctx context.Context) []*cobra.Command {
	return []*cobra.Command{}
}
