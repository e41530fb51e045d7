// Package snapshot is the `gpupack snapshot` verb: it reads the live cluster
// through client-go and writes gpupack's snapshot file, so that a cluster can
// be analysed offline and shared. The reading is internal/source/kube's.
package snapshot

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/cli/clio"
	"github.com/gpupack/gpupack/internal/source/kube"
)

type options struct {
	kubeconfig string
	catalogue  string
	output     string
}

// NewCommand returns the snapshot command.
func NewCommand(ctx context.Context) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Write the live cluster's GPU nodes and pods to a snapshot file",
		Long: `snapshot reads the cluster's nodes, pods, the scheduler's FailedScheduling
events, ResourceQuotas on GPUs with the controllers' FailedCreate events that a
quota refused, and DRA objects (read-only: list on nodes, pods, events,
resourcequotas, deviceclasses, resourceslices, resourceclaims and
resourceclaimtemplates; see deploy/rbac.yaml) and
writes gpupack's snapshot file, which diagnose --snapshot and the other verbs
read offline.

GPUs come from each node's allocatable nvidia.com/gpu and nvidia.com/mig-<profile>
and GPU feature discovery's labels (nvidia.com/gpu.product, .memory, .count,
.replicas, .sharing-strategy, nvidia.com/mig.strategy); time-slicing and MPS
nodes have allocatable/replicas GPUs (nvidia.com/gpu.shared under the device
plugin's renameByDefault: sharedResource: true); MIG mixed-strategy counts are
laid out per GPU. A pod's annotation gpupack.io/gpu-memory is its VRAM per GPU. GPUs that
ResourceSlices of NVIDIA's DRA driver (gpu.nvidia.com) offer are read with
their driver, pool, device and DeviceClasses (dra:), and pods' ResourceClaims
with their allocation (claims:).
What cannot be represented is reported as a warning on stderr.

The file (YAML):
  apiVersion: ` + cluster.FileAPIVersion + `
  kind: ` + cluster.FileKind + `
  nodes:
  - name: gpu-a-1
    cpu: "96"
    memory: 1Ti
    labels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
    taints: [{key: gpu, value: reserved, effect: NoSchedule}]
    gpus:
    - {model: H100-80GB, count: 4}
    - {model: H100-80GB, count: 4, sharing: mig, mig: [3g.40gb, 4g.40gb]}
  - name: l4-1
    cpu: "32"
    memory: 128Gi
    gpus:
    - {model: L4, count: 2, sharing: time-slicing, replicas: 4, sharedResource: true}
  pods:
  - namespace: ml
    name: train-0
    cpu: "8"
    memory: 64Gi
    gpu: {count: 1}            # or {milli: 250}, {memory: 20Gi}, {mig: 1g.10gb},
                               # {count: 1, shared: true, memory: 8Gi}
    node: gpu-a-1              # omitted while pending`,
		Example: `  gpupack snapshot -o cluster.yaml
  gpupack snapshot --kubeconfig ~/.kube/prod -o prod.yaml
  gpupack diagnose --snapshot prod.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", clio.KubeconfigUsage)
	clio.AddCatalogueFlag(f, &o.catalogue)
	f.StringVarP(&o.output, "output", "o", "-", "file to write the snapshot to; - for standard output")
	return cmd
}

func run(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	c, err := app.LoadCatalogue(o.catalogue)
	if err != nil {
		return err
	}
	st, err := kube.LoadFrom(ctx, o.kubeconfig, c)
	if err != nil {
		return err
	}
	for _, w := range st.Warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	data, err := cluster.MarshalFile(st.Snapshot)
	if err != nil {
		return err
	}
	s := st.Snapshot
	summary := fmt.Sprintf("%d nodes, %d GPUs, %d pods (%d pending)", len(s.Nodes), s.GPUCount(), len(s.Pods), len(s.Pending()))
	if o.output == "-" {
		_, err = stdout.Write(data)
		return err
	}
	if err := os.WriteFile(o.output, data, 0o644); err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	fmt.Fprintf(stderr, "wrote %s: %s\n", o.output, summary)
	return nil
}
