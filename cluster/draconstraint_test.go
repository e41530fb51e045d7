package cluster

import (
	"strings"
	"testing"

	"github.com/gpupack/gpupack/gpu"
)

// TestParseFileDRAConstraints: a claim's constraints are read from the
// snapshot file, and a bad one is named.
func TestParseFileDRAConstraints(t *testing.T) {
	doc := func(constraint string) string {
		return "apiVersion: gpupack.io/v1alpha2\nkind: ClusterSnapshot\nnodes: []\npods: [{name: p, claims: [{podClaim: c, requests: [{name: gpu, deviceClass: g, count: 2}], constraints: [" + constraint + "]}]}]\n"
	}
	s, err := ParseFile([]byte(doc("{matchAttribute: resource.kubernetes.io/pcieRoot, requests: [gpu], evaluated: true, values: {d/p/gpu-0: 'string:a'}}")), "d.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	if k := s.Pods[0].Claims[0].Constraints; len(k) != 1 || k[0].Attribute() != "resource.kubernetes.io/pcieRoot" || k[0].Values["d/p/gpu-0"] != "string:a" || !k[0].Applies("gpu/sub") || k[0].Applies("other") {
		t.Errorf("constraints read as %+v", k)
	}
	cases := map[string]struct{ constraint, want string }{
		"neither":        {"{requests: [gpu]}", "give exactly one of matchAttribute and distinctAttribute"},
		"both":           {"{matchAttribute: a.io/x, distinctAttribute: a.io/x}", "give exactly one"},
		"unqualified":    {"{matchAttribute: pcieRoot}", "want a fully qualified name"},
		"no such":        {"{matchAttribute: a.io/x, requests: [nic]}", `"nic" names no request`},
		"values unasked": {"{matchAttribute: a.io/x, values: {d/p/x: 'int:1'}}", "values: given without evaluated"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseFile([]byte(doc(tc.constraint)), "d.yaml", gpu.Default())
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "constraints[0]") {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
