package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/util/listing"
	"github.com/gpupack/gpupack/placement"
	"github.com/gpupack/gpupack/usage"
)

// Cluster names the cluster a use case reads: a snapshot file, the live
// cluster (Kubeconfig, or Live for the default kubeconfig) or, when none is
// named, the embedded demo; Catalogue is a file whose GPU models extend the
// built-in catalogue ("" for none). The CLI fills it from --snapshot,
// --kubeconfig, --live and --catalogue (sourceflag.AddCluster).
type Cluster struct {
	Snapshot   string
	Kubeconfig string
	Live       bool
	Catalogue  string
}

// LoadCatalogue returns the built-in catalogue, extended by the catalogue
// file at path when path is not empty.
func LoadCatalogue(path string) (*gpu.Catalogue, error) {
	if path == "" {
		return gpu.Default(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--catalogue: %w", err)
	}
	return gpu.Default().Extend(data, path)
}

// IsLive reports whether the live cluster was named.
func (c *Cluster) IsLive() bool { return c.Live || c.Kubeconfig != "" }

// IsDemo reports whether no cluster was named, so the demo runs.
func (c *Cluster) IsDemo() bool { return c.Snapshot == "" && !c.IsLive() }

// Name says which cluster was read, for messages.
func (c *Cluster) Name(demoName string) string {
	switch {
	case c.IsLive():
		return "the live cluster"
	case c.Snapshot != "":
		return c.Snapshot
	}
	return demoName
}

// Load reads the named cluster: the live one (its warnings go to stderr and
// its state is returned too), the snapshot file, or the demo document.
func (c *Cluster) Load(ctx context.Context, demo []byte, demoName string, stderr io.Writer) (*cluster.Snapshot, *kube.State, error) {
	cat, err := LoadCatalogue(c.Catalogue)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case c.IsLive() && c.Snapshot != "":
		return nil, nil, errors.New("--snapshot and --kubeconfig/--live both name a cluster; give one")
	case c.IsLive():
		st, err := kube.LoadFrom(ctx, c.Kubeconfig, cat)
		if err != nil {
			return nil, nil, err
		}
		for _, w := range st.Warnings {
			fmt.Fprintln(stderr, "warning:", w)
		}
		return st.Snapshot, st, nil
	case c.Snapshot != "":
		data, err := os.ReadFile(c.Snapshot)
		if err != nil {
			return nil, nil, fmt.Errorf("--snapshot: %w", err)
		}
		s, err := parseFile(data, c.Snapshot, cat)
		return s, nil, err
	}
	s, err := parseFile(demo, demoName, cat)
	return s, nil, err
}

// parseFile reads a snapshot file and refuses one that binds more to a
// node than it has. A live cluster is only warned about (its warnings say
// which pods no longer fit): a node can lose a GPU under running pods.
func parseFile(data []byte, name string, c *gpu.Catalogue) (*cluster.Snapshot, error) {
	s, err := cluster.ParseFile(data, name, c)
	if err != nil {
		return nil, err
	}
	if err := placement.CheckBound(s); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return s, nil
}

// ReadUsage parses the usage file name (its content data) and checks it
// against s, the cluster clusterName that it is to describe. Entries that
// name no pod of s (pods that ended since the measurement, or typos) are
// named in a warning on stderr; a file of which no entry names a pod of s
// describes another cluster and is refused.
func ReadUsage(data []byte, name string, s *cluster.Snapshot, clusterName string, stderr io.Writer) (*usage.Facts, error) {
	u, err := usage.ParseFacts(data, name)
	if err != nil {
		return nil, err
	}
	return CheckUsage(u, name, s, clusterName, stderr)
}

// CheckUsage checks the usage facts u (read from name) against s, as
// ReadUsage does, and returns them.
func CheckUsage(u *usage.Facts, name string, s *cluster.Snapshot, clusterName string, stderr io.Writer) (*usage.Facts, error) {
	unmatched := u.Unmatched(s)
	switch {
	case len(unmatched) == 0:
	case len(unmatched) == len(u.Pods):
		return nil, fmt.Errorf("%s: none of its %d pods is in %s (%s): it describes another cluster; give the usage measured on this one (gpupack report --format podusage), or leave out --usage",
			name, len(u.Pods), clusterName, listing.Some(unmatched))
	default:
		fmt.Fprintf(stderr, "warning: %s: %d of its %d pods are not in %s, so their facts are not used: %s\n",
			name, len(unmatched), len(u.Pods), clusterName, listing.Some(unmatched))
	}
	return u, nil
}

// LoadLive reads the live cluster for a report: its snapshot (every node's
// labels, so that price rules match nodes even where Prometheus has no
// kube_node_labels; the pending pods and when they were created, for their
// queue wait) and the start-up of its GPU pods (kube.LoadStartup: phases,
// the kubelet's image pulls, model storage), which the report merges over
// kube-state-metrics' pod times. Warnings go to stderr.
func LoadLive(ctx context.Context, kubeconfig string, stderr io.Writer) (*kube.State, []usage.PodEvents, error) {
	client, err := kube.NewClient(kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	st, err := kube.Load(ctx, client, gpu.Default())
	if err != nil {
		return nil, nil, err
	}
	pods, warnings, err := kube.LoadStartup(ctx, client)
	if err != nil {
		return nil, nil, err
	}
	if stderr != nil {
		for _, w := range append(st.Warnings, warnings...) {
			fmt.Fprintln(stderr, "warning:", w)
		}
	}
	return st, pods, nil
}
