// Package agent is the `gpupack agent` verb: the node agent that reads
// NVML's per-process samples, names the pod and container of each process
// and serves per-pod series on /metrics. It only wires flags, the
// adapters (internal/source/nvml, procfs, podresources, kube) and the HTTP
// server; the sampling loop is internal/app's Agent.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	core "github.com/gpupack/gpupack/agent"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/source/nvml"
	"github.com/gpupack/gpupack/internal/source/podresources"
	"github.com/gpupack/gpupack/internal/source/procfs"
)

type options struct {
	listen       string
	node         string
	interval     time.Duration
	procRoot     string
	podResources string
	kubeconfig   string
}

// NewCommand returns the agent command.
func NewCommand(ctx context.Context) *cobra.Command {
	opts := &options{}
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Node agent: per-pod GPU activity and memory on shared GPUs, from NVML's per-process samples",
		Long: `agent runs on each GPU node (the chart's agent DaemonSet) and serves, on
/metrics, what each pod's processes used of each GPU or MIG instance over
the last interval: GPUPACK_POD_SM_ACTIVE and GPUPACK_POD_MEM_ACTIVE (0..1),
GPUPACK_POD_FB_USED (MiB), labelled as dcgm-exporter labels a device and
its pod, and GPUPACK_DEV_ATTRIBUTED_RATIO, the share of each device's
activity it could attribute to the pods holding it. gpupack report reads
them to split a time-sliced or MPS GPU among its pods by what each used
instead of evenly.

Each interval it reads NVML's running processes and per-process
utilisation, the cgroup of each process under --proc-root (cgroup v1 or
v2, containerd or CRI-O), the kubelet's pod-resources API for the
containers holding each device, and, when a process's pod is new, the
node's pods from the API server. It needs the NVIDIA driver (NVML is
loaded when it starts; without it the agent says so and exits), the
host's PID namespace (so NVML's PIDs are /proc's), the pod-resources
socket, and permission to list pods.`,
		Example: `  # on a GPU node, as the chart runs it
  gpupack agent --node "$NODE_NAME" --listen :9410`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(ctx, opts, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.listen, "listen", ":9410", "address to serve /metrics on")
	f.StringVar(&opts.node, "node", os.Getenv("NODE_NAME"), "this node's name, the Hostname label of the series and the node whose pods are listed (default $NODE_NAME)")
	f.DurationVar(&opts.interval, "interval", 10*time.Second, "sampling interval; keep it at or below Prometheus' scrape interval")
	f.StringVar(&opts.procRoot, "proc-root", "/proc", "where the processes' /proc entries are (the host's, with the host's PID namespace)")
	f.StringVar(&opts.podResources, "pod-resources-socket", podresources.DefaultSocket, "the kubelet's pod-resources socket")
	f.StringVar(&opts.kubeconfig, "kubeconfig", "", "kubeconfig for listing the node's pods (default: in-cluster, then $KUBECONFIG and ~/.kube/config)")
	return cmd
}

func run(ctx context.Context, opts *options, stderr io.Writer) error {
	if opts.node == "" {
		return errors.New("--node is empty: give this node's name, or set NODE_NAME (the chart sets it from spec.nodeName)")
	}
	if opts.interval < time.Second {
		return fmt.Errorf("--interval %s: want 1s or more (NVML's per-process samples are about 1/6 s apart)", opts.interval)
	}
	gpus, err := nvml.Open()
	if err != nil {
		return fmt.Errorf("gpupack agent reads GPUs through NVML: %w", err)
	}
	defer gpus.Close()
	holders, err := podresources.Dial(opts.podResources)
	if err != nil {
		return fmt.Errorf("--pod-resources-socket: %w", err)
	}
	defer holders.Close()
	client, err := kube.NewClient(opts.kubeconfig)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	a := app.NewAgent(opts.node, app.AgentSources{
		GPUs:    gpus,
		Cgroup:  procfs.Reader{Root: opts.procRoot}.Cgroup,
		Holders: holders.Holders,
		Pods: func(ctx context.Context) (map[string]core.Pod, error) {
			return kube.NodePods(ctx, client, opts.node)
		},
	}, log)
	return serve(ctx, opts, a, log)
}

// serve samples and serves /metrics until ctx ends (SIGINT, SIGTERM).
func serve(ctx context.Context, opts *options, a *app.Agent, log *slog.Logger) error {
	ln, err := net.Listen("tcp", opts.listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %v; pick a free address such as :9410", opts.listen, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(a)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Info("gpupack agent serving", "metrics", "http://"+ln.Addr().String()+"/metrics", "node", opts.node, "interval", opts.interval)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	sampled := make(chan struct{})
	go func() {
		a.Run(ctx, opts.interval)
		close(sampled)
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shut)
	<-sampled
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
