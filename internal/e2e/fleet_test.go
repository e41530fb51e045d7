package e2e

import (
	"bytes"
	"cmp"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/cli"
	"github.com/gpupack/gpupack/internal/gpusim"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/usage"
)

// Two clusters of a fleet, each scraped by a Prometheus of its own: a
// shard each, behind one Thanos Query. Their node names differ, as two
// clusters' do; the series of each carry its external label (cluster).
const (
	shardA = `duration: 3h
nodes:
  - {name: a-node, model: H100-80GB, gpus: 3}
pods:
  - {namespace: train, name: busy, node: a-node, gpu: 0, memoryMiB: 60000, activity: {pattern: constant, level: 0.9}}
  - {namespace: serve, name: idle, node: a-node, gpu: 1, from: 40m, to: 2h20m, memoryMiB: 900, activity: {pattern: constant, level: 0.01}}
`
	shardB = `duration: 3h
nodes:
  - {name: b-node, model: L4, gpus: 2}
pods:
  - {namespace: lab, name: bursty, node: b-node, gpu: 0, from: 10m, memoryMiB: 9000, activity: {pattern: square, level: 0.8, low: 0, on: 1m, off: 3m}}
`
)

// thanosScrape is the shards' scrape interval; their lookback (and Thanos
// Query's) is a second less, so that a pod's series ends at its last
// sample, as a live scrape's staleness marker ends it.
const thanosScrape = 30 * time.Second

// shardHistory writes a scenario's history from start at thanosScrape
// into a new TSDB directory and returns the directory (a shard's Dir). The
// simulator numbers GPU UUIDs by node and GPU in each scenario, so the
// first GPU of every cluster would have the same UUID; cluster (a hex
// digit) replaces the UUIDs' first one, as real GPUs' UUIDs differ.
func shardHistory(t *testing.T, scenario, cluster string, start time.Time) string {
	t.Helper()
	sc, err := gpusim.Parse([]byte(scenario), "shard.yaml", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := sc.WriteOpenMetrics(&b, start, 0, sc.Duration.D(), thanosScrape, gpusim.Faults{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "history.om")
	if err := os.WriteFile(file, bytes.ReplaceAll(b.Bytes(), []byte(`"GPU-0`), []byte(`"GPU-`+cluster)), 0o644); err != nil {
		t.Fatal(err)
	}
	testcluster.Backfill(t, filepath.Join(dir, "data"), file, 0)
	return dir
}

// lookback is the flag both Prometheus and Thanos Query take.
var lookback = "--query.lookback-delta=" + (thanosScrape - time.Second).String()

// gpupackCommand is the gpupack command line with args, its output in out.
func gpupackCommand(t *testing.T, out *bytes.Buffer, args ...string) *cobra.Command {
	root := cli.NewRoot(t.Context())
	root.SetArgs(args)
	root.SetOut(out)
	root.SetErr(out)
	return root
}

// reportArgs are report's arguments for the three hours to end.
func reportArgs(url, accounting string, end time.Time) []string {
	return []string{"report", "--prometheus", url, "--accounting", accounting, "--window", "3h", "--end", end.Format(time.RFC3339), "--step", thanosScrape.String(), "--format", "json"}
}

// fleetReport runs report against url and decodes it. Its quality
// warnings must be none, or each hold one of want, and each of want be
// held by one.
func fleetReport(t *testing.T, url, accounting string, end time.Time, want ...string) *usage.Report {
	t.Helper()
	var out bytes.Buffer
	if err := gpupackCommand(t, &out, reportArgs(url, accounting, end)...).ExecuteContext(t.Context()); err != nil {
		t.Fatalf("report --accounting %s against %s: %v\n%s", accounting, url, err, out.String())
	}
	var r usage.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("report JSON: %v\n%s", err, out.String())
	}
	var warned []string
	for _, w := range r.Quality.Warnings {
		if !slices.ContainsFunc(want, func(part string) bool { return strings.Contains(w, part) }) {
			t.Errorf("report --accounting %s against %s warns %q", accounting, url, w)
			continue
		}
		warned = append(warned, w)
	}
	if len(warned) < len(want) {
		t.Errorf("report --accounting %s against %s warns %q; want warnings holding %q", accounting, url, r.Quality.Warnings, want)
	}
	return &r
}

// sortedDevices orders device rows by node, GPU and MIG instance.
func sortedDevices(ds []usage.DeviceUsage) []usage.DeviceUsage {
	out := slices.Clone(ds)
	slices.SortFunc(out, func(x, y usage.DeviceUsage) int {
		return cmp.Or(cmp.Compare(x.Node, y.Node), cmp.Compare(x.GPU, y.GPU), cmp.Compare(x.MIGInstance, y.MIGInstance))
	})
	return out
}
