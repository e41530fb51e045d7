package testcluster

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// TestWithCompletesAfter edits kwok's own default stages (the file beside
// the cached binaries): pod-complete skips pods labelled keeps-running or
// annotated completes-after, and pod-complete-after completes annotated
// running pods after the annotation's delay with pod-complete's status
// template. TestSmoke runs the result on kwok.
func TestWithCompletesAfter(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(binDir(t), kwokStagesFile))
	if err != nil {
		t.Fatal(err)
	}
	text, err := withCompletesAfter(string(data))
	if err != nil {
		t.Fatal(err)
	}
	stages := map[string]map[string]any{}
	for doc := range strings.SplitSeq(text, "\n---\n") {
		var stage struct {
			Metadata struct{ Name string }
			Spec     map[string]any
		}
		if err := yaml.Unmarshal([]byte(doc), &stage); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		stages[stage.Metadata.Name] = stage.Spec
	}
	complete, after := stages["pod-complete"], stages["pod-complete-after"]
	if complete == nil || after == nil {
		t.Fatalf("stages %v: want pod-complete and pod-complete-after", slices.Sorted(maps.Keys(stages)))
	}
	expr := func(key, op string, values ...any) any {
		m := map[string]any{"key": key, "operator": op}
		if len(values) > 0 {
			m["values"] = values
		}
		return m
	}
	annotation := `.metadata.annotations["` + AnnotationCompletesAfter + `"]`
	common := []any{expr(".metadata.deletionTimestamp", "DoesNotExist"), expr(".status.phase", "In", "Running")}
	want := map[string]any{
		"pod-complete": map[string]any{"matchExpressions": append(append([]any{}, common...),
			expr(".metadata.ownerReferences.[].kind", "In", "Job"),
			expr(`.metadata.labels["`+LabelKeepsRunning+`"]`, "DoesNotExist"),
			expr(annotation, "DoesNotExist"))},
		"pod-complete-after": map[string]any{"matchExpressions": append(append([]any{}, common...), expr(annotation, "Exists"))},
	}
	got := map[string]any{"pod-complete": complete["selector"], "pod-complete-after": after["selector"]}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("selectors (-want +got):\n%s", diff)
	}
	wantDelay := map[string]any{"durationFrom": map[string]any{"jq": map[string]any{"expression": annotation}}}
	if diff := cmp.Diff(wantDelay, after["delay"]); diff != "" {
		t.Errorf("pod-complete-after's delay (-want +got):\n%s", diff)
	}
	if _, ok := complete["delay"]; ok {
		t.Errorf("pod-complete has a delay: %v", complete["delay"])
	}
	if diff := cmp.Diff(complete["next"], after["next"]); diff != "" {
		t.Errorf("pod-complete-after's next differs from pod-complete's (-pod-complete +pod-complete-after):\n%s", diff)
	}

	if _, err := withCompletesAfter("apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata:\n  name: pod-ready\n"); err == nil || !strings.Contains(err.Error(), "update withCompletesAfter") {
		t.Errorf("stages without pod-complete: error %v, want one saying to update withCompletesAfter", err)
	}
}
