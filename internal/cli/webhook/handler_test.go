package webhook

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	evanphx "gopkg.in/evanphx/json-patch.v4"

	"github.com/gpupack/gpupack/plan"
)

// serveHandler serves the webhook's routes over plain HTTP with the given
// planned requests, logging to the returned buffer.
func serveHandler(t *testing.T, requests func() map[string]plan.WorkloadRequest) (*httptest.Server, *syncBuffer) {
	t.Helper()
	log := &syncBuffer{}
	mux, err := newMux(requests, logr.FromSlogHandler(slog.NewTextHandler(log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, log
}

// rankerPlan returns rankerRequests as the webhook holds them.
func rankerPlan(t *testing.T) func() map[string]plan.WorkloadRequest {
	t.Helper()
	r, err := plan.ParseWorkloadRequests([]byte(rankerRequests))
	if err != nil {
		t.Fatal(err)
	}
	return func() map[string]plan.WorkloadRequest { return r }
}

const (
	// rankerPod is a pod of workload packed/ranker asking for one GPU.
	rankerPod = `{"apiVersion": "v1", "kind": "Pod",
	 "metadata": {"namespace": "packed", "name": "ranker-0", "labels": {"app": "ranker"}},
	 "spec": {"containers": [{"name": "main", "image": "ranker", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}`
	// confusedPod asks for a whole GPU and a MIG slice at once.
	confusedPod = `{"apiVersion": "v1", "kind": "Pod",
	 "metadata": {"namespace": "packed", "name": "confused"},
	 "spec": {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/mig-1g.10gb": "1"}}}]}}`
)

// TestFailureAdmitsUnchanged checks what the apiserver gets when the
// webhook fails: it obeys allowed: false whatever the failurePolicy, so a
// pod that does not decode, a panic, or a patch that would not apply
// admits the pod unchanged with a warning, logged and counted; only a pod
// that contradicts itself is denied, and that is logged too.
func TestFailureAdmitsUnchanged(t *testing.T) {
	panics := func() map[string]plan.WorkloadRequest { panic("the plan is gone") }
	cases := map[string]struct {
		pod         string
		requests    func() map[string]plan.WorkloadRequest
		wantAllowed bool
		wantWarning string // a substring of the one warning; "" for none
		wantMessage string // a substring of the denial's message
		wantLog     string // a regexp that the log must match
	}{
		"a pod that does not decode": {
			pod: `{"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "packed", "name": "broken"},
			 "spec": {"containers": "main"}}`,
			wantAllowed: true,
			wantWarning: "gpupack webhook failed and admitted pod packed/broken unchanged (not sent to gpupack-scheduler, GPU request not rewritten): decoding the pod: ",
			wantLog:     `level=ERROR msg="admitted the pod unchanged" err="decoding the pod: .*" pod=packed/broken stage=decode`,
		},
		"a panic": {
			pod: rankerPod, requests: panics,
			wantAllowed: true,
			wantWarning: "admitted pod packed/ranker-0 unchanged (not sent to gpupack-scheduler, GPU request not rewritten): panic: the plan is gone",
			wantLog:     `level=ERROR msg="admitted the pod unchanged" err="panic: the plan is gone" pod=packed/ranker-0 stage=panic stack="goroutine `,
		},
		// The apiserver refuses a pod whose patch does not apply, whatever
		// the failurePolicy; it sends metadata always, but the webhook
		// must not trust that.
		"a patch that would not apply: no metadata to annotate": {
			pod:         `{"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}`,
			wantAllowed: true,
			wantWarning: "admitted pod packed/ranker-0 unchanged (not sent to gpupack-scheduler, GPU request not rewritten): the patch does not apply to the pod as sent: ",
			wantLog:     `level=ERROR msg="admitted the pod unchanged" err="the patch does not apply to the pod as sent: .*/metadata/annotations.*" pod=packed/ranker-0 stage=patch`,
		},
		"whole GPU and MIG slice: denied": {
			pod:         confusedPod,
			wantMessage: "pod packed/confused asks for nvidia.com/gpu and nvidia.com/mig-1g.10gb together",
			wantLog:     `level=INFO msg="denied the pod" pod=packed/confused reason="pod packed/confused asks for`,
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			requests := c.requests
			if requests == nil {
				requests = rankerPlan(t)
			}
			srv, log := serveHandler(t, requests)
			got := admit(t, http.DefaultClient, srv.URL+Path, "packed", "ranker-0", []byte(c.pod))
			if got.Allowed != c.wantAllowed {
				t.Errorf("allowed = %v, want %v; response %+v", got.Allowed, c.wantAllowed, got)
			}
			if c.wantAllowed && got.Patch != nil {
				t.Errorf("a pod admitted unchanged got the patch %s", got.Patch)
			}
			switch {
			case c.wantWarning == "" && len(got.Warnings) > 0:
				t.Errorf("warnings %q, want none", got.Warnings)
			case c.wantWarning != "" && (len(got.Warnings) != 1 || !strings.Contains(got.Warnings[0], c.wantWarning)):
				t.Errorf("warnings %q, want one containing %q", got.Warnings, c.wantWarning)
			}
			if c.wantMessage != "" && (got.Result == nil || !strings.Contains(got.Result.Message, c.wantMessage)) {
				t.Errorf("result %+v, want a message containing %q", got.Result, c.wantMessage)
			}
			if !regexp.MustCompile(c.wantLog).MatchString(log.String()) {
				t.Errorf("log does not match %q:\n%s", c.wantLog, log)
			}
		})
	}
}

// TestMetricsServed checks that the webhook serves controller-runtime's
// webhook metrics and its own count of failures at /metrics.
func TestMetricsServed(t *testing.T) {
	srv, _ := serveHandler(t, rankerPlan(t))
	admit(t, http.DefaultClient, srv.URL+Path, "packed", "ranker-0", []byte(rankerPod))
	admit(t, http.DefaultClient, srv.URL+Path, "packed", "broken", []byte(`{"metadata": []}`))
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s\n%s", resp.Status, body)
	}
	for _, want := range []string{
		`controller_runtime_webhook_requests_total{code="200",webhook="/mutate-pods"} [1-9]`,
		`controller_runtime_webhook_latency_seconds_count{webhook="/mutate-pods"} [1-9]`,
		`controller_runtime_webhook_panics_total \d`,
		`gpupack_webhook_failures_total{stage="decode"} [1-9]`,
		`gpupack_webhook_failures_total{stage="panic"} \d`,
	} {
		if !regexp.MustCompile(`(?m)^` + want).Match(body) {
			t.Errorf("/metrics has no line matching %s:\n%s", want, body)
		}
	}
}

// TestPatchKeepsUnknownFields sends a pod with fields that this build's
// k8s.io/api does not know, as a newer apiserver does, at pod and at
// container level: the patch must touch only what the webhook changed, so
// applying it keeps them (and keeps "2000m" as the user wrote it).
func TestPatchKeepsUnknownFields(t *testing.T) {
	raw := []byte(`{"apiVersion": "v1", "kind": "Pod",
	 "metadata": {"namespace": "packed", "name": "ranker-0", "labels": {"app": "ranker"}},
	 "spec": {
	  "futureField": {"enabled": true},
	  "containers": [{"name": "main", "image": "ranker", "futureField": "kept",
	    "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "2000m"}, "futureField": 3}}]},
	 "status": {"futureField": "kept"}}`)
	unknown := []string{"/spec/futureField", "/spec/containers/0/futureField", "/spec/containers/0/resources/futureField", "/status/futureField"}

	srv, _ := serveHandler(t, rankerPlan(t))
	got := admit(t, http.DefaultClient, srv.URL+Path, "packed", "ranker-0", raw)
	if !got.Allowed || len(got.Warnings) > 0 {
		t.Fatalf("response %+v, want allowed without warnings", got)
	}
	var ops []struct{ Op, Path string }
	if err := json.Unmarshal(got.Patch, &ops); err != nil {
		t.Fatalf("patch %s: %v", got.Patch, err)
	}
	var paths []string
	for _, op := range ops {
		paths = append(paths, op.Op+" "+op.Path)
		for _, u := range unknown {
			if op.Path == u || strings.HasPrefix(u, op.Path+"/") || strings.HasPrefix(op.Path, u+"/") {
				t.Errorf("operation %s %s touches %s, a field this build does not know", op.Op, op.Path, u)
			}
		}
	}
	slices.Sort(paths)
	want := []string{
		"add /metadata/annotations",
		"add /spec/containers/0/resources/limits/nvidia.com~1mig-1g.10gb",
		"add /spec/schedulerName",
		"remove /spec/containers/0/resources/limits/nvidia.com~1gpu",
	}
	if diff := cmp.Diff(want, paths); diff != "" {
		t.Errorf("patch operations (-want +got):\n%s\npatch %s", diff, got.Patch)
	}

	patch, err := evanphx.DecodePatch(got.Patch)
	if err != nil {
		t.Fatal(err)
	}
	patched, err := patch.Apply(raw)
	if err != nil {
		t.Fatalf("the patch does not apply to the pod sent: %v", err)
	}
	var pod struct {
		Spec struct {
			FutureField   map[string]bool `json:"futureField"`
			SchedulerName string          `json:"schedulerName"`
			Containers    []struct {
				FutureField string `json:"futureField"`
				Resources   struct {
					Limits      map[string]string `json:"limits"`
					FutureField int               `json:"futureField"`
				} `json:"resources"`
			} `json:"containers"`
		} `json:"spec"`
		Status map[string]string `json:"status"`
	}
	if err := json.Unmarshal(patched, &pod); err != nil {
		t.Fatal(err)
	}
	c := pod.Spec.Containers[0]
	if !pod.Spec.FutureField["enabled"] || c.FutureField != "kept" || c.Resources.FutureField != 3 || pod.Status["futureField"] != "kept" {
		t.Errorf("the patched pod lost a field this build does not know:\n%s", patched)
	}
	if diff := cmp.Diff(map[string]string{"nvidia.com/mig-1g.10gb": "1", "cpu": "2000m"}, c.Resources.Limits); diff != "" {
		t.Errorf("patched limits (-want +got):\n%s", diff)
	}
	if pod.Spec.SchedulerName != "gpupack" {
		t.Errorf("patched schedulerName %q, want gpupack", pod.Spec.SchedulerName)
	}
}
