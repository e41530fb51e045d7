package promql

import (
	"testing"

	"github.com/VictoriaMetrics/metricsql"

	"github.com/gpupack/gpupack/internal/testkit/ksmref"
)

// TestKubeStateMetricsReadExist: every kube-state-metrics family that
// gpupack's queries read exists in the real project (the pinned table of
// internal/testkit/ksmref), with every label the queries select on or the
// code reads from the result.
func TestKubeStateMetricsReadExist(t *testing.T) {
	ref, err := ksmref.Load()
	if err != nil {
		t.Fatal(err)
	}
	type read struct {
		metric string
		labels []string
	}
	var reads []read
	// LoadMeta and LoadPodTimes key each pod time by namespace and pod.
	for _, fam := range podTimeFamilies {
		reads = append(reads, read{fam.metric, []string{"namespace", "pod"}})
	}
	// The owners: the selector's matchers, and the owner's kind and name
	// that Workload reads.
	owners := selectorOf(t, podOwners)
	reads = append(reads, read{owners.metric, append(owners.labels, "namespace", "pod", "owner_kind", "owner_name")},
		// evidence's CPU limits: by namespace, pod and container, of resource cpu.
		read{KSMContainerLimits, []string{"namespace", "pod", "container", "resource"}},
		// --prices' nodeRules: the node and its label_<name> labels.
		read{KSMNodeLabels, []string{"node", "label_pool"}})
	for _, r := range reads {
		f, ok := ref.Family(r.metric)
		if !ok {
			t.Errorf("gpupack reads %s, which kube-state-metrics %s does not generate", r.metric, ref.Version)
			continue
		}
		for _, l := range r.labels {
			if !f.HasLabel(l) {
				t.Errorf("gpupack reads %s's label %s, which kube-state-metrics %s does not write (it writes %v)", r.metric, l, ref.Version, f.Labels)
			}
		}
	}
}

// selector is a selector's metric name and the labels it matches on.
type selector struct {
	metric string
	labels []string
}

func selectorOf(t *testing.T, q string) selector {
	t.Helper()
	e, err := metricsql.Parse(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	me, ok := e.(*metricsql.MetricExpr)
	if !ok || len(me.LabelFilterss) != 1 {
		t.Fatalf("%s: want one selector", q)
	}
	var s selector
	for _, f := range me.LabelFilterss[0] {
		if f.Label == "__name__" {
			s.metric = f.Value
			continue
		}
		s.labels = append(s.labels, f.Label)
	}
	return s
}
