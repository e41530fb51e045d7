package plan

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpupack/gpupack/api/nvidiadra"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/render/planout"
	"github.com/gpupack/gpupack/plan"
)

// TestDRAOutFiles checks the files written for the DRA fixture against
// their golden copies: the DRA objects, and node labels and workload
// requests that leave the DRA nodes' device plugin alone.
func TestDRAOutFiles(t *testing.T) {
	dir := t.TempDir()
	o := defaults()
	o.out = dir
	o.cluster.Snapshot, o.usage = "testdata/dra.cluster.yaml", "testdata/dra.usage.yaml"
	if err := run(context.Background(), &o, &bytes.Buffer{}, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{planout.FileDRA, planout.FileNodeLabels, planout.FileRequests, planout.FileDevicePlugin} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		check(t, "dra-out-"+name, b)
	}
}

// TestDRAClaimsDoWhatThePlanSays checks that each shared workload on DRA
// GPUs gets a claim whose driver config shares one GPU as the plan sized
// it, that all its pods fit that one GPU (they all reference the claim),
// and that DRA nodes get no device plugin config.
func TestDRAClaimsDoWhatThePlanSays(t *testing.T) {
	o := defaults()
	o.cluster.Snapshot, o.usage = "testdata/dra.cluster.yaml", "testdata/dra.usage.yaml"
	p, s, err := app.MakePlan(context.Background(), o.request(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if p.DRA == nil {
		t.Fatal("no DRA objects for a cluster with DRA GPUs")
	}
	objs, err := planout.DRAObjectsOf(p.DRA)
	if err != nil {
		t.Fatal(err)
	}
	usable := gpu.Default().MustLookup("H100-80GB").Usable
	claims := map[string]int{}
	for i, c := range objs.Claims {
		claims[c.Namespace+"/"+c.Name] = i
	}
	shared, kept := 0, 0
	for _, d := range p.Decisions {
		if !strings.HasSuffix(d.Pool, "-dra") {
			if d.After.ResourceClaim != "" || d.After.ResourceClaimTemplate != "" {
				t.Errorf("%s (pool %s, device plugin): names a claim", d.Workload, d.Pool)
			}
			continue
		}
		if d.Reason.Code == plan.ClaimSpansGPUs {
			kept++
			if d.Action != plan.Keep || d.Method != plan.Whole {
				t.Errorf("%s: %s %s, want kept whole", d.Workload, d.Action, d.Method)
			}
		}
		if d.Method != plan.TimeSlicing && d.Method != plan.MPS {
			continue
		}
		shared++
		ns := strings.Split(d.Workload, "/")[0]
		i, ok := claims[ns+"/"+d.After.ResourceClaim]
		if !ok {
			t.Errorf("%s: claim %q is not among the DRA objects", d.Workload, d.After.ResourceClaim)
			continue
		}
		var cfg planout.GpuConfig
		if err := json.Unmarshal(objs.Claims[i].Spec.Devices.Config[0].Opaque.Parameters.Raw, &cfg); err != nil {
			t.Fatal(err)
		}
		if d.VRAMNeed*gpu.MiB(d.Pods) > usable || d.ComputeNeed*float64(d.Pods) > 1 {
			t.Errorf("%s: %d pods of %s and %.2f GPU each share one claim's GPU, which they do not fit", d.Workload, d.Pods, d.VRAMNeed, d.ComputeNeed)
		}
		switch d.Method {
		case plan.TimeSlicing:
			if cfg.Sharing.Strategy != nvidiadra.TimeSlicingStrategy {
				t.Errorf("%s: time-sliced by the plan, strategy %s in its claim", d.Workload, cfg.Sharing.Strategy)
			}
		case plan.MPS:
			m := cfg.Sharing.MpsConfig
			if cfg.Sharing.Strategy != nvidiadra.MPSStrategy || m == nil || m.DefaultActiveThreadPercentage == nil || m.DefaultPinnedDeviceMemoryLimit == nil {
				t.Fatalf("%s: MPS by the plan, config %+v in its claim", d.Workload, cfg.Sharing)
			}
			limit := gpu.MiB(m.DefaultPinnedDeviceMemoryLimit.Value() >> 20)
			threads := float64(*m.DefaultActiveThreadPercentage) / 100
			if limit != d.After.VRAMLimit || limit < d.VRAMNeed || threads < d.ComputeNeed || limit*gpu.MiB(d.Pods) > usable {
				t.Errorf("%s: MPS limit %s and %.0f%% threads per client for %d pods needing %s and %.2f GPU each (plan's limit %s)", d.Workload, limit, 100*threads, d.Pods, d.VRAMNeed, d.ComputeNeed, d.After.VRAMLimit)
			}
		}
	}
	if shared != len(objs.Claims) || shared < 2 || kept != 1 {
		t.Errorf("%d shared DRA workloads, %d claims, %d kept because one claim cannot hold them: want a claim each, at least 2, and 1 kept", shared, len(objs.Claims), kept)
	}
	for _, nc := range p.Nodes {
		n, _ := s.Node(nc.Node)
		if n.GPUs[0].DRA != nil {
			if _, ok := nc.Labels[plan.DevicePluginConfigLabel]; ok {
				t.Errorf("DRA node %s labelled with a device plugin config", nc.Node)
			}
		}
	}
}
