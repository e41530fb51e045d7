// Package podresources is the agent's adapter to the kubelet's
// pod-resources API (k8s.io/kubelet/pkg/apis/podresources/v1, the gRPC
// List on /var/lib/kubelet/pod-resources/kubelet.sock): which container
// holds which GPU, MIG instance or time-slice replica.
package podresources

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/gpupack/gpupack/agent"
	"github.com/gpupack/gpupack/cluster"
)

// DefaultSocket is where the kubelet serves the API.
const DefaultSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"

// maxMessage bounds the List answer read: 16 MiB holds a node's pods many
// times over.
const maxMessage = 16 << 20

// Client lists the kubelet's pod resources over one connection.
type Client struct {
	conn   *grpc.ClientConn
	lister podresourcesv1.PodResourcesListerClient
}

// Dial connects to the kubelet's socket (the connection is made on the
// first List).
func Dial(socket string) (*Client, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage)))
	if err != nil {
		return nil, fmt.Errorf("kubelet pod-resources socket %s: %w", socket, err)
	}
	return &Client{conn: conn, lister: podresourcesv1.NewPodResourcesListerClient(conn)}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Holders lists the containers that hold each GPU device, by
// agent.HolderKey of the device ID, for the GPU resources
// (cluster.GPUResource): whole GPUs, MIG instances and shared replicas.
func (c *Client) Holders(ctx context.Context) (map[string][]agent.Holder, error) {
	resp, err := c.lister.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("kubelet pod-resources List: %w; is the kubelet's pod-resources socket mounted, and the agent running as root to connect to it?", err)
	}
	return holders(resp), nil
}

func holders(resp *podresourcesv1.ListPodResourcesResponse) map[string][]agent.Holder {
	out := map[string][]agent.Holder{}
	for _, pod := range resp.GetPodResources() {
		for _, c := range pod.GetContainers() {
			h := agent.Holder{Namespace: pod.GetNamespace(), Pod: pod.GetName(), Container: c.GetName()}
			for _, d := range c.GetDevices() {
				if !cluster.GPUResource(d.GetResourceName()) {
					continue
				}
				for _, id := range d.GetDeviceIds() {
					key := agent.HolderKey(id)
					out[key] = append(out[key], h)
				}
			}
		}
	}
	return out
}
