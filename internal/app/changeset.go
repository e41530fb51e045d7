package app

import (
	"context"
	"fmt"
	"io"

	"github.com/gpupack/gpupack/change"
	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/plan"
)

// ChangeSetRequest names the plan a change set is built from and the
// estimates it is costed with.
type ChangeSetRequest struct {
	Plan   PlanRequest
	Change change.Options
}

// BuildChangeSet plans as MakePlan does and turns the plan into its
// change set, with the PodDisruptionBudgets of the live cluster (a
// snapshot file and the demo have none). It returns the plan and the
// snapshot too. Warnings go to stderr.
func BuildChangeSet(ctx context.Context, req ChangeSetRequest, stderr io.Writer) (*change.Set, *plan.Plan, *cluster.Snapshot, error) {
	p, s, err := MakePlan(ctx, req.Plan, stderr)
	if err != nil {
		return nil, nil, nil, err
	}
	budgets := map[cluster.PodKey]change.Budget{}
	if req.Plan.Cluster.IsLive() {
		client, err := kube.NewClient(req.Plan.Cluster.Kubeconfig)
		if err != nil {
			return nil, nil, nil, err
		}
		var warnings []string
		if budgets, warnings, err = kube.Budgets(ctx, client); err != nil {
			return nil, nil, nil, err
		}
		for _, w := range warnings {
			fmt.Fprintln(stderr, "warning:", w)
		}
	}
	set, err := change.Build(s, p, budgets, req.Change)
	if err != nil {
		return nil, nil, nil, err
	}
	return set, p, s, nil
}
