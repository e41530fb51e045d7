package gpusim

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/testkit/ksmref"
)

// TestStateMetricsAreKubeStateMetrics: every family the kube-state-metrics
// stand-in writes exists in the real project (the pinned table of
// internal/testkit/ksmref) with its type and HELP, and every series
// carries exactly the labels the real one does.
func TestStateMetricsAreKubeStateMetrics(t *testing.T) {
	ref, err := ksmref.Load()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Parse([]byte(startups), "startups.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := s.WriteStateMetrics(&b, time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), s.Duration.D()); err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(b.String()))
	if err != nil {
		t.Fatalf("the stand-in's exposition does not parse: %v\n%s", err, b.String())
	}
	if len(fams) == 0 {
		t.Fatal("the stand-in wrote no family")
	}
	for name, f := range fams {
		want, ok := ref.Family(name)
		if !ok {
			t.Errorf("the stand-in writes %s, which kube-state-metrics %s does not generate", name, ref.Version)
			continue
		}
		if got := strings.ToLower(f.GetType().String()); got != want.Type {
			t.Errorf("%s: type %s, kube-state-metrics %s writes %s", name, got, ref.Version, want.Type)
		}
		if f.GetHelp() != want.ExposedHelp() {
			t.Errorf("%s: HELP %q, kube-state-metrics %s writes %q", name, f.GetHelp(), ref.Version, want.ExposedHelp())
		}
		if len(f.Metric) == 0 {
			t.Errorf("%s: no series for the scenario's pods", name)
		}
		for _, m := range f.Metric {
			var labels []string
			for _, l := range m.Label {
				labels = append(labels, l.GetName())
			}
			if d := cmp.Diff(slices.Sorted(slices.Values(want.Labels)), slices.Sorted(slices.Values(labels))); d != "" {
				t.Errorf("%s: labels differ from kube-state-metrics %s (-real +stand-in):\n%s", name, ref.Version, d)
			}
		}
	}
}
