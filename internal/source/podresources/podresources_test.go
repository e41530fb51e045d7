package podresources

import (
	"context"
	"net"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/gpupack/gpupack/agent"
)

// kubelet stands in for the kubelet's pod-resources service.
type kubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	resp *podresourcesv1.ListPodResourcesResponse
}

func (k *kubelet) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	return k.resp, nil
}

// serve starts the stand-in on a unix socket in a temporary directory.
func serve(t *testing.T, resp *podresourcesv1.ListPodResourcesResponse) string {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "kubelet.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(s, &kubelet{resp: resp})
	go s.Serve(l) //nolint:errcheck // Serve returns when the test stops it
	t.Cleanup(s.Stop)
	return socket
}

func container(name string, devs ...*podresourcesv1.ContainerDevices) *podresourcesv1.ContainerResources {
	return &podresourcesv1.ContainerResources{Name: name, Devices: devs}
}

func devices(resource string, ids ...string) *podresourcesv1.ContainerDevices {
	return &podresourcesv1.ContainerDevices{ResourceName: resource, DeviceIds: ids}
}

func TestHolders(t *testing.T) {
	resp := &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{
		{Namespace: "ml", Name: "a", Containers: []*podresourcesv1.ContainerResources{container("main", devices("nvidia.com/gpu", "GPU-aaaa::0"))}},
		{Namespace: "ml", Name: "b", Containers: []*podresourcesv1.ContainerResources{
			container("main", devices("nvidia.com/gpu", "GPU-aaaa::3")),
			container("sidecar", devices("example.com/nic", "eth1")),
		}},
		{Namespace: "ml", Name: "c", Containers: []*podresourcesv1.ContainerResources{container("main", devices("nvidia.com/mig-1g.10gb", "MIG-cccc"))}},
		{Namespace: "web", Name: "d", Containers: []*podresourcesv1.ContainerResources{container("nginx")}},
	}}
	c, err := Dial(serve(t, resp))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := c.Holders(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]agent.Holder{
		"GPU-aaaa": {{Namespace: "ml", Pod: "a", Container: "main"}, {Namespace: "ml", Pod: "b", Container: "main"}},
		"MIG-cccc": {{Namespace: "ml", Pod: "c", Container: "main"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Holders (-want +got):\n%s", diff)
	}
}

func TestHoldersNoKubelet(t *testing.T) {
	c, err := Dial(filepath.Join(t.TempDir(), "absent.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Holders(context.Background()); err == nil {
		t.Error("Holders without a kubelet: no error")
	}
}
