// Command gpupack measures, diagnoses, plans and packs GPU workloads on
// Kubernetes. main only wires the signal context, the memory limit and the
// root command; each verb lives in its own package under internal/cli.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/KimMachineGun/automemlimit/memlimit"

	"github.com/gpupack/gpupack/internal/cli"
)

func main() {
	if _, err := setMemoryLimit(memlimit.FromCgroup); err != nil {
		fmt.Fprintf(os.Stderr, "gpupack: warning: the Go runtime keeps no memory limit: %v\n", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cli.NewRoot(ctx).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "gpupack:", err)
		os.Exit(1)
	}
}

// setMemoryLimit makes 90% of the memory limit that p reports (the
// container's cgroup limit) the Go runtime's soft limit, so that a month's
// report or a long-running serve collects garbage harder near the limit
// instead of being killed at it. GOMEMLIMIT, or AUTOMEMLIMIT (a ratio, or
// "off"), overrides it. Where p reports no limit (no cgroup limit, not
// Linux, in no cgroup) the runtime keeps its default of none; an error
// says why no limit could be set (an AUTOMEMLIMIT that is not a ratio, an
// unreadable cgroup).
func setMemoryLimit(p memlimit.Provider) (int64, error) {
	limit, err := memlimit.Set(memlimit.WithProvider(p), memlimit.WithRatio(0.9))
	if errors.Is(err, memlimit.ErrCgroupsNotSupported) || errors.Is(err, memlimit.ErrNoCgroup) {
		err = nil // not Linux, or in no cgroup: no container limit to follow
	}
	return limit, err
}
