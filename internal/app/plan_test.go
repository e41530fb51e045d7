package app

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestDemoPlanScaledObjectQueriesParse checks that every query gpupack
// writes into the demo plan's KEDA ScaledObjects parses as PromQL.
func TestDemoPlanScaledObjectQueriesParse(t *testing.T) {
	p, _, err := DemoPlan(context.Background(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ys, err := p.KEDAScaledObjects()
	if err != nil {
		t.Fatal(err)
	}
	var queries int
	for i, d := range strings.Split(string(ys), "---\n") {
		var so struct {
			Kind string `json:"kind"`
			Spec struct {
				Triggers []struct {
					Metadata struct {
						Query string `json:"query"`
					} `json:"metadata"`
				} `json:"triggers"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(d), &so); err != nil {
			t.Fatalf("ScaledObject %d: %v", i, err)
		}
		if so.Kind != "ScaledObject" {
			t.Fatalf("document %d is a %q, want a ScaledObject", i, so.Kind)
		}
		for _, tr := range so.Spec.Triggers {
			queries++
			if err := parsePromQL(tr.Metadata.Query); err != nil {
				t.Errorf("ScaledObject %d: query %q: %v", i, tr.Metadata.Query, err)
			}
		}
	}
	if queries == 0 {
		t.Error("the demo plan's ScaledObjects hold no query")
	}
}

// TestReadAutoscalingRefusesBadPromQL checks that `plan --autoscaling`
// refuses a query that does not parse, at its file and line.
func TestReadAutoscalingRefusesBadPromQL(t *testing.T) {
	file := filepath.Join(t.TempDir(), "scale.yaml")
	data := "apiVersion: gpupack.io/v1alpha1\nkind: Autoscaling\nprometheus: http://prometheus:9090\nworkloads:\n- workload: shop/ranker\n  kind: StatefulSet\n  metric: queue_depth\n  query: sum(vllm:num_requests_waiting{namespace=\"shop\"}\n  target: 8\n"
	if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := readAutoscaling(file, false)
	want := file + `:8: workloads[0].query: "sum(vllm:num_requests_waiting{namespace=\"shop\"}" does not parse as PromQL: `
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("readAutoscaling with an unbalanced parenthesis = %v, want an error starting %q", err, want)
	}
}
