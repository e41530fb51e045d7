package cluster

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/gpu"
)

func TestParseQuantity(t *testing.T) {
	cases := map[string]struct {
		in   string
		want Quantity
		err  string
	}{
		"binary":      {in: "80Gi", want: 80 << 30},
		"decimal":     {in: "10G", want: 10e9},
		"plain":       {in: "132", want: 132},
		"fraction up": {in: "1.5", want: 2},
		"milli up":    {in: "500m", want: 1},
		"exponent":    {in: "5e3", want: 5000},
		"exa":         {in: "1E", want: 1e18},
		"exbi":        {in: "1Ei", want: 1 << 60},
		"half gibi":   {in: "0.5Gi", want: 1 << 29},
		"negative":    {in: "-1", err: `"-1" is not a quantity`},
		"word":        {in: "lots", err: `"lots" is not a quantity`},
		"empty":       {in: "", err: "is not a quantity"},
		"too large":   {in: "9Ei", err: "is larger than"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseQuantity(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseQuantity(%q) = %d, %v; want error %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseQuantity(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
			back, err := ParseQuantity(got.String())
			if err != nil || back != got {
				t.Errorf("%d written as %q reads back as %d, %v", got, got.String(), back, err)
			}
		})
	}
}

func TestQuantityJSON(t *testing.T) {
	var got struct{ A, B Quantity }
	if err := json.Unmarshal([]byte(`{"A": "80Gi", "B": "132"}`), &got); err != nil {
		t.Fatal(err)
	}
	if got.A != 80<<30 || got.B != 132 {
		t.Errorf("read %+v, want 80Gi and 132", got)
	}
	out, _ := json.Marshal(got)
	if diff := cmp.Diff(`{"A":"80Gi","B":"132"}`, string(out)); diff != "" {
		t.Errorf("written (-want +got):\n%s", diff)
	}
}

// TestParseFileDRACapacity reads a shared device's capacities with their
// request policies, a request's capacity and an allocation's consumed
// capacity, and checks that they read back from the written file.
func TestParseFileDRACapacity(t *testing.T) {
	data, err := os.ReadFile("testdata/dracapacity.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseFile(data, "dracapacity.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	q := func(v Quantity) *Quantity { return &v }
	want := []DeviceCapacity{
		{Name: "memory", Value: 80 << 30, Policy: &CapacityPolicy{Default: q(10 << 30), Min: q(10 << 30), Max: q(80 << 30), Step: q(10 << 30)}},
		{Name: "multiprocessors", Value: 132, Policy: &CapacityPolicy{ValidValues: []Quantity{33, 66, 132}}},
	}
	if diff := cmp.Diff(want, s.Nodes[0].GPUs[0].DRA.Capacity); diff != "" {
		t.Errorf("capacities (-want +got):\n%s", diff)
	}
	if got := s.Pods[1].Claims[0].Requests[0].Capacity; got["memory"] != 25<<30 {
		t.Errorf("waiting's capacity request = %v, want memory 25Gi", got)
	}
	checkRoundTrip(t, s)
}

func TestParseFileDRACapacityErrors(t *testing.T) {
	dev := func(capacity string) string {
		return "apiVersion: gpupack.io/v1alpha2\nkind: ClusterSnapshot\nnodes:\n- {name: n, cpu: \"8\", memory: 8Gi, gpus: [{model: T4, count: 1, dra: {driver: d, pool: p, device: x, capacity: [" + capacity + "]}}]}\n"
	}
	cases := map[string]parseErrorCase{
		"no name":      {dev("{value: 1Gi}"), "capacity[0].name: missing"},
		"twice":        {dev("{name: memory, value: 1Gi}, {name: memory, value: 2Gi}"), "capacity[1]: memory is given twice"},
		"bad value":    {dev("{name: memory, value: lots}"), `"lots" is not a quantity`},
		"both":         {dev("{name: memory, value: 8Gi, requestPolicy: {validValues: [1Gi], min: 1Gi}}"), "both validValues and a range"},
		"no min":       {dev("{name: memory, value: 8Gi, requestPolicy: {max: 4Gi}}"), "range needs min"},
		"zero step":    {dev("{name: memory, value: 8Gi, requestPolicy: {min: 1Gi, step: 0}}"), "step is 0"},
		"max below":    {dev("{name: memory, value: 8Gi, requestPolicy: {min: 2Gi, max: 1Gi}}"), "max 1Gi is below its min 2Gi"},
		"not rising":   {dev("{name: memory, value: 8Gi, requestPolicy: {validValues: [2Gi, 1Gi]}}"), "validValues must rise"},
		"alt capacity": {"apiVersion: gpupack.io/v1alpha2\nkind: ClusterSnapshot\nnodes: []\npods: [{name: p, claims: [{podClaim: c, requests: [{name: r, capacity: {memory: 1Gi}, firstAvailable: [{name: s, deviceClass: g, count: 1}]}]}]}]\n", "no deviceClass, count, all, selectors, tolerations, capacity"},
	}
	checkParseErrors(t, "d.yaml", cases)
}
