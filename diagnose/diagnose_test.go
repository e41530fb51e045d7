package diagnose

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/usage"
)

// A measured 0 is written as 0 and a value nobody measured as null, so a
// script reading the JSON can tell an idle holder from an unmeasured one.
func TestHolderJSONKeepsMeasuredZero(t *testing.T) {
	zero := 0.0
	cases := map[string]struct {
		v    any
		want string
	}{
		"measured idle holder": {Holder{Pod: "ml/a", Node: "n", Request: "1 GPU", Measured: true, ActiveRatio: &zero, Pattern: usage.IdleHeld},
			`{"pod":"ml/a","node":"n","request":"1 GPU","measured":true,"activeRatio":0,"pattern":"idle-held"}`},
		"unmeasured holder": {Holder{Pod: "ml/b", Node: "n", Request: "1 GPU"},
			`{"pod":"ml/b","node":"n","request":"1 GPU","measured":false,"activeRatio":null}`},
		"no holder measured": {HolderStats{Pods: 2},
			`{"pods":2,"measured":0,"meanActiveRatio":null,"idleHeld":0}`},
		"holders measured idle": {HolderStats{Pods: 1, Measured: 1, MeanActiveRatio: &zero, IdleHeld: 1},
			`{"pods":1,"measured":1,"meanActiveRatio":0,"idleHeld":1}`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := json.Marshal(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("JSON (-want +got):\n%s", diff)
			}
		})
	}
}

// TestUsageDoesNotChangeFitsNowCause: two pods that both fit now get the
// same cause whether or not one has usage facts; the facts add evidence.
func TestUsageDoesNotChangeFitsNowCause(t *testing.T) {
	s, u, _ := loadScenario(t, "testdata/corpus/other-fits-now-bursty.yaml")
	with, err := Diagnose(s, u)
	if err != nil {
		t.Fatal(err)
	}
	without, err := Diagnose(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := with.Findings[0], without.Findings[0]
	if a.Cause != b.Cause || a.Cause != Other {
		t.Errorf("cause with usage facts %q, without %q; want %q for both", a.Cause, b.Cause, Other)
	}
	if a.Evidence.Usage == nil || b.Evidence.Usage != nil {
		t.Errorf("usage evidence with facts %v, without %v; want it only with them", a.Evidence.Usage, b.Evidence.Usage)
	}
}

// TestDiagnoseContextStops: a done context (a signal) stops the diagnosis
// with its error and no report; a live one diagnoses every pending pod.
func TestDiagnoseContextStops(t *testing.T) {
	s, u, _ := loadScenario(t, "testdata/corpus/alloc-and-placement.yaml")
	ctx, cancel := context.WithCancel(context.Background())
	rep, err := DiagnoseContext(ctx, s, u)
	if err != nil || len(rep.Findings) == 0 {
		t.Fatalf("live context: %v, %v; want findings", rep, err)
	}
	cancel()
	rep, err = DiagnoseContext(ctx, s, u)
	if !errors.Is(err, context.Canceled) || rep != nil {
		t.Errorf("done context: %v, %v; want no report and context.Canceled", rep, err)
	}
}
