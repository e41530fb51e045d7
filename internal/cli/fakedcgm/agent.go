package fakedcgm

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gpupack/gpupack/agent"
	"github.com/gpupack/gpupack/internal/app"
	sim "github.com/gpupack/gpupack/internal/gpusim"
)

// AgentMetricsPath is where fake-dcgm serves what `gpupack agent` would
// serve on each of the scenario's nodes: the agent's own sampling and
// exposition, fed the scenario's per-pod processes instead of NVML's.
const AgentMetricsPath = "/agent/metrics"

// nodeView is one node's agent input at the moment of a scrape.
type nodeView struct {
	samples []agent.DeviceSample
	node    agent.Node
}

func (v *nodeView) Sample() ([]agent.DeviceSample, error) { return v.samples, nil }

func (v *nodeView) cgroup(pid uint32) (agent.CgroupRef, bool, error) {
	ref, ok := v.node.Cgroups[pid]
	if !ok {
		return agent.CgroupRef{}, false, fmt.Errorf("process %d is gone", pid)
	}
	return ref, true, nil
}

// agentHandler serves every node's agent series: each scrape samples the
// scenario at that moment, then the agents' collectors write it.
func agentHandler(s *sim.Scenario, start time.Time) http.Handler {
	reg := prometheus.NewRegistry()
	views := make([]*nodeView, len(s.Nodes))
	agents := make([]*app.Agent, len(s.Nodes))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for i, n := range s.Nodes {
		v := &nodeView{}
		views[i] = v
		agents[i] = app.NewAgent(n.Name, app.AgentSources{
			GPUs:    v,
			Cgroup:  v.cgroup,
			Holders: func(context.Context) (map[string][]agent.Holder, error) { return v.node.Holders, nil },
			Pods:    func(context.Context) (map[string]agent.Pod, error) { return v.node.Pods, nil },
		}, log)
		reg.MustRegister(agents[i])
	}
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := time.Since(start)
		for i, n := range s.Nodes {
			views[i].samples, views[i].node = s.AgentView(n.Name, t)
			if err := agents[i].Sample(r.Context()); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		metrics.ServeHTTP(w, r)
	})
}
