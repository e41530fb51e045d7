// Command gpupack measures, diagnoses, plans and packs GPU workloads on
// Kubernetes. main only wires the signal context and the root command; each
// verb lives in its own package under internal/cli.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/gpupack/gpupack/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cli.NewRoot(ctx).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "gpupack:", err)
		os.Exit(1)
	}
}
