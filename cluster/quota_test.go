package cluster

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/gpu"
)

func TestParseQuotaExceeded(t *testing.T) {
	cases := map[string]struct {
		message string
		want    QuotaRefusal
		ok      bool
	}{
		"replica set": {
			message: `Error creating: pods "train-7d9c5-" is forbidden: exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=4, limited: requests.nvidia.com/gpu=4`,
			want: QuotaRefusal{Pod: "train-7d9c5-", Quota: "gpu-quota",
				Requested: map[string]int64{"requests.nvidia.com/gpu": 1}, Used: map[string]int64{"requests.nvidia.com/gpu": 4}, Limited: map[string]int64{"requests.nvidia.com/gpu": 4}},
			ok: true,
		},
		"memory too, left out": {
			message: `Error creating: pods "j-x" is forbidden: exceeded quota: q, requested: memory=20Gi,nvidia.com/mig-1g.10gb=2, used: memory=1Gi,nvidia.com/mig-1g.10gb=6, limited: memory=10Gi,nvidia.com/mig-1g.10gb=7`,
			want: QuotaRefusal{Pod: "j-x", Quota: "q",
				Requested: map[string]int64{"nvidia.com/mig-1g.10gb": 2}, Used: map[string]int64{"nvidia.com/mig-1g.10gb": 6}, Limited: map[string]int64{"nvidia.com/mig-1g.10gb": 7}},
			ok: true,
		},
		"nothing used yet, canonical thousands": {
			message: `pods "p" is forbidden: exceeded quota: q, requested: limits.nvidia.com/gpu=2k, used: , limited: limits.nvidia.com/gpu=1`,
			want: QuotaRefusal{Pod: "p", Quota: "q",
				Requested: map[string]int64{"limits.nvidia.com/gpu": 2000}, Used: map[string]int64{"limits.nvidia.com/gpu": 0}, Limited: map[string]int64{"limits.nvidia.com/gpu": 1}},
			ok: true,
		},
		"memory only":       {message: `Error creating: pods "p" is forbidden: exceeded quota: q, requested: memory=2Gi, used: memory=1Gi, limited: memory=2Gi`},
		"no covering quota": {message: `Error creating: pods "p" is forbidden: insufficient quota to consume: requests.nvidia.com/gpu`},
		"another error":     {message: `Error creating: pods "p" is forbidden: error looking up service account ml/x: serviceaccount "x" not found`},
		"fraction":          {message: `pods "p" is forbidden: exceeded quota: q, requested: requests.nvidia.com/gpu=500m, used: requests.nvidia.com/gpu=1, limited: requests.nvidia.com/gpu=1`},
		"no quota name":     {message: `pods "p" is forbidden: exceeded quota: , requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=1, limited: requests.nvidia.com/gpu=1`},
		"cut short":         {message: `pods "p" is forbidden: exceeded quota: q, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=1`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := ParseQuotaExceeded(tc.message)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v (%+v)", ok, tc.ok, got)
			}
			if diff := cmp.Diff(tc.want, got); ok && diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseQuotaExceeded(f *testing.F) {
	f.Add(`Error creating: pods "train-7d9c5-" is forbidden: exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=4, limited: requests.nvidia.com/gpu=4`)
	f.Add(`pods "p" is forbidden: exceeded quota: q, requested: memory=20Gi,nvidia.com/gpu=9223372036854775807k, used: , limited: nvidia.com/gpu=1`)
	f.Fuzz(func(t *testing.T, message string) {
		r, ok := ParseQuotaExceeded(message)
		if !ok {
			return
		}
		if r.Quota == "" || len(r.Limited) == 0 {
			t.Fatalf("accepted %q without a quota or a limit: %+v", message, r)
		}
		for k, v := range r.Limited {
			if !GPUResource(k) || v < 0 || r.Requested[k] < 0 || r.Used[k] < 0 {
				t.Fatalf("accepted %q with %s: %+v", message, k, r)
			}
			if _, ok := r.Requested[k]; !ok {
				t.Fatalf("accepted %q with no request of %s", message, k)
			}
		}
		// A refusal read from a message is one a snapshot file carries.
		r.Workload, r.Count = Workload{Kind: "ReplicaSet", Namespace: "ns", Name: "w"}, 1
		f := File{APIVersion: FileAPIVersion, Kind: FileKind, QuotaRefusals: []QuotaRefusal{r}}
		if _, err := f.Snapshot(gpu.Default()); err != nil {
			t.Fatalf("refusal read from %q is not a valid snapshot: %v", message, err)
		}
	})
}

func TestQuotasReadBack(t *testing.T) {
	doc := `apiVersion: gpupack.io/v1alpha2
kind: ClusterSnapshot
nodes: []
quotas:
- {namespace: ml, name: gpu-quota, hard: {requests.nvidia.com/gpu: 4}, used: {requests.nvidia.com/gpu: 4}}
quotaRefusals:
- workload: {kind: ReplicaSet, namespace: ml, name: train-7d9c5}
  pod: train-7d9c5-
  quota: gpu-quota
  requested: {requests.nvidia.com/gpu: 1}
  used: {requests.nvidia.com/gpu: 4}
  limited: {requests.nvidia.com/gpu: 4}
  count: 3
`
	s, err := ParseFile([]byte(doc), "q.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	again, out := readBack(t, s)
	want := []QuotaRefusal{{Workload: Workload{Kind: "ReplicaSet", Namespace: "ml", Name: "train-7d9c5"}, Pod: "train-7d9c5-", Quota: "gpu-quota",
		Requested: map[string]int64{"requests.nvidia.com/gpu": 1}, Used: map[string]int64{"requests.nvidia.com/gpu": 4}, Limited: map[string]int64{"requests.nvidia.com/gpu": 4}, Count: 3}}
	for _, got := range []*Snapshot{s, again} {
		if diff := cmp.Diff(want, got.QuotaRefusals); diff != "" {
			t.Errorf("refusals (-want +got):\n%s\n%s", diff, out)
		}
		if diff := cmp.Diff([]ResourceQuota{{Namespace: "ml", Name: "gpu-quota", Hard: map[string]int64{"requests.nvidia.com/gpu": 4}, Used: map[string]int64{"requests.nvidia.com/gpu": 4}}}, got.Quotas); diff != "" {
			t.Errorf("quotas (-want +got):\n%s", diff)
		}
	}
	for name, bad := range map[string]string{
		"not a GPU resource": "quotas:\n- {namespace: ml, name: q, hard: {memory: 4}}\n",
		"negative":           "quotas:\n- {namespace: ml, name: q, hard: {nvidia.com/gpu: -1}}\n",
		"no limit":           "quotaRefusals:\n- {workload: {kind: Job, namespace: ml, name: j}, quota: q}\n",
		"no request":         "quotaRefusals:\n- {workload: {kind: Job, namespace: ml, name: j}, quota: q, limited: {nvidia.com/gpu: 1}}\n",
	} {
		_, err := ParseFile([]byte("apiVersion: gpupack.io/v1alpha2\nkind: ClusterSnapshot\nnodes: []\n"+bad), name, gpu.Default())
		if err == nil || !strings.Contains(err.Error(), "quota") {
			t.Errorf("%s: err = %v, want one naming the quota entry", name, err)
		}
	}
}
