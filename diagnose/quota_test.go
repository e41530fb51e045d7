package diagnose

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestQuotaEvidence: the figures of a quota-exhausted finding come from the
// quota's status where the snapshot has it, else from the refusal; a quota
// that has room again gets advice, not a patch.
func TestQuotaEvidence(t *testing.T) {
	refusal := `quotaRefusals:
- workload: {kind: Job, namespace: ml, name: sweep}
  pod: sweep-x7k2p
  quota: q
  requested: {requests.nvidia.com/gpu: 2, limits.nvidia.com/gpu: 2}
  used: {requests.nvidia.com/gpu: 3, limits.nvidia.com/gpu: 1}
  limited: {requests.nvidia.com/gpu: 4, limits.nvidia.com/gpu: 8}
  count: 7
`
	cases := map[string]struct {
		quotas    string
		resources []QuotaResource
		fix       []string
	}{
		"no status: the refusal's figures": {
			resources: []QuotaResource{
				{Resource: "limits.nvidia.com/gpu", Requested: 2, Used: 1, Hard: 8, Needed: 3},
				{Resource: "requests.nvidia.com/gpu", Requested: 2, Used: 3, Hard: 4, Needed: 5},
			},
			fix: []string{"raise the hard limit of resourcequota ml/q: requests.nvidia.com/gpu from 4 to 5, enough for one more pod of job ml/sweep (each further pod it lacks needs limits.nvidia.com/gpu=2,requests.nvidia.com/gpu=2 more)"},
		},
		"status: today's usage": {
			quotas: "quotas:\n- {namespace: ml, name: q, hard: {requests.nvidia.com/gpu: 6, limits.nvidia.com/gpu: 8}, used: {requests.nvidia.com/gpu: 6}}\n",
			resources: []QuotaResource{
				{Resource: "limits.nvidia.com/gpu", Requested: 2, Used: 0, Hard: 8, Needed: 2},
				{Resource: "requests.nvidia.com/gpu", Requested: 2, Used: 6, Hard: 6, Needed: 8},
			},
			fix: []string{"raise the hard limit of resourcequota ml/q: requests.nvidia.com/gpu from 6 to 8, enough for one more pod of job ml/sweep (each further pod it lacks needs limits.nvidia.com/gpu=2,requests.nvidia.com/gpu=2 more)"},
		},
		"room again": {
			quotas: "quotas:\n- {namespace: ml, name: q, hard: {requests.nvidia.com/gpu: 6, limits.nvidia.com/gpu: 8}, used: {requests.nvidia.com/gpu: 2}}\n",
			resources: []QuotaResource{
				{Resource: "limits.nvidia.com/gpu", Requested: 2, Used: 0, Hard: 8, Needed: 2},
				{Resource: "requests.nvidia.com/gpu", Requested: 2, Used: 2, Hard: 6, Needed: 4},
			},
			fix: []string{"resourcequota ml/q has room for the pod now: the job's controller creates it on its next try"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f, ok := diagnoseDoc(t, "nodes: []\n"+tc.quotas+refusal, "")["job ml/sweep"]
			if !ok {
				t.Fatal("no finding for job ml/sweep")
			}
			q := f.Evidence.Quota
			want := &QuotaFacts{Quota: Object{Kind: "ResourceQuota", Namespace: "ml", Name: "q"}, Pod: "sweep-x7k2p", Refusals: 7, Resources: tc.resources}
			if diff := cmp.Diff(want, q); diff != "" {
				t.Errorf("evidence (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.fix, f.Fix); diff != "" {
				t.Errorf("fix (-want +got):\n%s", diff)
			}
			if f.Cause != QuotaExhausted || f.Request != "limits.nvidia.com/gpu=2,requests.nvidia.com/gpu=2 per pod" || f.Pod != "" {
				t.Errorf("cause %s, request %q, pod %q", f.Cause, f.Request, f.Pod)
			}
		})
	}
}
