package planout_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpupack/gpupack/internal/render/planout"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// TestDRACapacityClaimsAccepted creates the shared ResourceClaims that the
// plan writes for GPUs with consumable memory capacity (each asking the
// memory its pods need) on a real kube-apiserver (v1.37.2, no feature
// flags), whose validation must accept them.
func TestDRACapacityClaimsAccepted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real kube-apiserver")
	}
	p, _ := draPlanOf(t, "dracapacity.cluster.yaml")
	objs, err := planout.DRAObjectsOf(p.DRA)
	if err != nil {
		t.Fatal(err)
	}
	c := testcluster.Start(t, testcluster.Options{})
	claims := c.Client().ResourceV1()
	namespaces := map[string]bool{}
	asking := 0
	for i := range objs.Claims {
		claim := &objs.Claims[i]
		if claim.Spec.Devices.Requests[0].Exactly.Capacity == nil {
			continue
		}
		asking++
		if !namespaces[claim.Namespace] {
			c.CreateNamespace(claim.Namespace)
			namespaces[claim.Namespace] = true
		}
		got, err := claims.ResourceClaims(claim.Namespace).Create(t.Context(), claim, metav1.CreateOptions{})
		if err != nil {
			t.Errorf("ResourceClaim %s/%s refused: %v", claim.Namespace, claim.Name, err)
			continue
		}
		if want, have := claim.Spec.Devices.Requests[0].Exactly.Capacity.Requests["memory"], got.Spec.Devices.Requests[0].Exactly.Capacity.Requests["memory"]; want.Cmp(have) != 0 {
			t.Errorf("ResourceClaim %s/%s: stored capacity request %s, sent %s", claim.Namespace, claim.Name, have.String(), want.String())
		}
	}
	if asking < 2 {
		t.Errorf("%d claims ask memory capacity, want at least 2", asking)
	}
}
