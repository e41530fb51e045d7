package plan

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/gpupack/gpupack/api/nvidiadra"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/render/planout"
	"github.com/gpupack/gpupack/plan"
)

// TestDRAClaimsAskMemoryCapacity: where the DRA GPUs allow multiple
// allocations and offer memory as a consumable capacity, each shared
// workload's claim asks for the memory its pods need together (the
// measured VRAM need, or the MPS limit, times its pods); without consumable
// capacity (dra.cluster.yaml) no claim asks any.
func TestDRAClaimsAskMemoryCapacity(t *testing.T) {
	for fixture, shared := range map[string]bool{"testdata/dracapacity.cluster.yaml": true, "testdata/dra.cluster.yaml": false} {
		t.Run(fixture, func(t *testing.T) {
			o := defaults()
			o.cluster.Snapshot, o.usage = fixture, "testdata/dra.usage.yaml"
			p, _, err := app.MakePlan(context.Background(), o.request(), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := planout.DRAObjectsOf(p.DRA)
			if err != nil {
				t.Fatal(err)
			}
			asked := map[string]int64{}
			for _, c := range objs.Claims {
				if capacity := c.Spec.Devices.Requests[0].Exactly.Capacity; capacity != nil {
					m := capacity.Requests[nvidiadra.CapacityMemory]
					asked[c.Namespace+"/"+c.Name] = m.Value()
				}
			}
			claims := 0
			for _, d := range p.Decisions {
				if d.After.ResourceClaim == "" {
					continue
				}
				claims++
				per := d.VRAMNeed
				if d.Method == plan.MPS {
					per = d.After.VRAMLimit
				}
				want := int64(per*gpu.MiB(d.Pods)) << 20
				got, ok := asked[strings.Split(d.Workload, "/")[0]+"/"+d.After.ResourceClaim]
				switch {
				case shared && (!ok || got != want || want == 0):
					t.Errorf("%s (%s, %d pods of %s): claim asks %d bytes of memory, want %d", d.Workload, d.Method, d.Pods, per, got, want)
				case !shared && ok:
					t.Errorf("%s: claim asks %d bytes of memory of devices without consumable capacity", d.Workload, got)
				}
			}
			if claims < 2 {
				t.Errorf("%d shared claims, want at least 2", claims)
			}
		})
	}
}
