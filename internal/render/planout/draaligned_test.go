package planout_test

import (
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/internal/render/planout"
	"github.com/gpupack/gpupack/internal/testkit/golden"
	"github.com/gpupack/gpupack/plan"
)

// TestAlignedClaimTemplates: the ResourceClaimTemplate of a MIG share
// whose workload aligns its GPU with another driver's devices asks the
// MIG device, those devices as the workload's claim asked them (exactly or
// firstAvailable, with selectors, tolerations and capacity), and a
// matchAttribute constraint over the MIG request and theirs; without
// alignment, only the MIG device. Golden files in testdata/aligned,
// refreshed with -update.
func TestAlignedClaimTemplates(t *testing.T) {
	nic := cluster.ClaimRequest{Name: "nic", DeviceClass: "nic.dra.net", Count: 1, Selectors: []string{"device.attributes['dra.net'].rdma == true"},
		Tolerations: []cluster.DeviceToleration{{Key: "dra.net/maintenance", Operator: "Exists", Effect: "NoSchedule"}}}
	for name, tmpl := range map[string]plan.MIGClaimTemplate{
		"numa-nic": {Namespace: "ml", Name: "gpupack-rank-1g-10gb", Profile: "1g.10gb", MatchAttribute: "resource.kubernetes.io/numaNode", Aligned: []cluster.ClaimRequest{nic}},
		"pcieroot-alternatives": {Namespace: "ml", Name: "gpupack-rank-2g-20gb", Profile: "2g.20gb", MatchAttribute: "resource.kubernetes.io/pcieRoot",
			Aligned: []cluster.ClaimRequest{{Name: "net", FirstAvailable: []cluster.ClaimRequest{
				{Name: "rdma", DeviceClass: "rdma.dra.net", Count: 2, Capacity: map[string]cluster.Quantity{"bandwidth": 10 << 30}},
				{Name: "any", DeviceClass: "nic.dra.net", All: true}}}}},
		"unaligned": {Namespace: "ml", Name: "gpupack-rank-1g-10gb", Profile: "1g.10gb"},
	} {
		t.Run(name, func(t *testing.T) {
			objs, err := planout.DRAObjectsOf(&plan.DRAPlan{MIGProfiles: []string{tmpl.Profile}, ClaimTemplates: []plan.MIGClaimTemplate{tmpl}})
			if err != nil {
				t.Fatal(err)
			}
			b, err := yaml.Marshal(objs.ClaimTemplates[0])
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", "aligned", name+".yaml"), b)
		})
	}
}
