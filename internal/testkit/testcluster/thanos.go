package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Thanos: Prometheus shards, each with a Thanos sidecar that serves its
// TSDB (backfilled blocks included, through Prometheus' remote read) over
// the Store API, and a Thanos Query that answers Prometheus' HTTP API over
// them all, as a fleet past one Prometheus runs. The thanos binary is
// built by hack/thanos-bins.sh.

const (
	// envThanosBinDir names the directory holding the thanos binary.
	envThanosBinDir = "GPUPACK_THANOS_BINDIR"
	thanosBinary    = "thanos"
)

// ThanosBinary returns the path of the thanos binary: in
// $GPUPACK_THANOS_BINDIR, else in the cache directory that
// hack/thanos-bins.sh --print-dir names. Without it the test is skipped,
// unless $GPUPACK_E2E is set, in which case it fails.
func ThanosBinary(t testing.TB) string {
	t.Helper()
	dir, err := locateThanosBinDir()
	path := filepath.Join(dir, thanosBinary)
	if err == nil {
		_, err = os.Stat(path)
	}
	if err == nil {
		return path
	}
	if _, required := os.LookupEnv(envE2E); required {
		t.Fatalf("testcluster: no thanos binary: %v; %s is set, so this is a failure, not a skip: run hack/thanos-bins.sh", err, envE2E)
	}
	t.Skipf("testcluster: no thanos binary: %v; run hack/thanos-bins.sh to build it", err)
	return ""
}

// locateThanosBinDir returns $GPUPACK_THANOS_BINDIR, or asks the
// repository's hack/thanos-bins.sh.
func locateThanosBinDir() (string, error) {
	if dir := os.Getenv(envThanosBinDir); dir != "" {
		return dir, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", fmt.Errorf("%s is unset and %w", envThanosBinDir, err)
	}
	script := filepath.Join(root, "hack", "thanos-bins.sh")
	out, err := exec.Command("bash", script, "--print-dir").Output()
	if err != nil {
		return "", fmt.Errorf("%s is unset and %s --print-dir failed: %w", envThanosBinDir, script, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// ShardOptions configures StartShard.
type ShardOptions struct {
	// ExternalLabels name the shard (cluster: a); Thanos requires at least
	// one, and adds them to every series the shard serves.
	ExternalLabels map[string]string
	// Dir is as PrometheusOptions.Dir: backfill into Dir/data before the
	// start, or give the directory of a TSDB built before (a benchmark's
	// cached month), which the shard serves as it is.
	Dir string
	// Args are extra flags of Prometheus.
	Args []string
}

// Shard is a Prometheus and the Thanos sidecar beside it.
type Shard struct {
	Prometheus *Prometheus
	// StoreAddress is the sidecar's Store API (gRPC), host:port.
	StoreAddress string

	sidecar *process
}

// StartShard starts a Prometheus with o's external labels, then a Thanos
// sidecar for it, and waits until the sidecar has read the labels.
func StartShard(t testing.TB, o ShardOptions) *Shard {
	t.Helper()
	if len(o.ExternalLabels) == 0 {
		t.Fatal("testcluster: a shard needs external labels (Thanos tells shards apart by them)")
	}
	bin := ThanosBinary(t)
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 15s\n  external_labels:\n")
	for _, k := range slices.Sorted(maps.Keys(o.ExternalLabels)) {
		fmt.Fprintf(&cfg, "    %s: %q\n", k, o.ExternalLabels[k])
	}
	prom := StartPrometheus(t, PrometheusOptions{Config: cfg.String(), Dir: o.Dir, Args: o.Args})
	name := "thanos-sidecar-" + strings.Join(slices.Sorted(maps.Values(o.ExternalLabels)), "-")
	// ports[0]: HTTP (ready once the sidecar has Prometheus' labels), ports[1]: gRPC.
	proc, ports, err := startOnPorts(t.Context(), DefaultStartTimeout, func(name string, args ...string) *process {
		return startProcess(t, name, prom.dir, prom.dir, bin, args...)
	}, name, 2, func(ports []int) []string {
		return []string{"sidecar", "--prometheus.url=" + prom.URL, "--tsdb.path=" + prom.DataDir(),
			"--http-address=" + hostPort(ports[0]), "--grpc-address=" + hostPort(ports[1]),
			// A shard's outage is seen within a second.
			"--prometheus.get_config_interval=1s"}
	}, func(ports []int) func(ctx context.Context) error {
		return httpProbe(http.DefaultClient, "http://"+hostPort(ports[0])+"/-/ready")
	})
	if err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	s := &Shard{Prometheus: prom, StoreAddress: hostPort(ports[1]), sidecar: proc}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("testcluster: ----- %s log -----\n%s", proc.name, proc.logTail())
		}
	})
	return s
}

// ThanosQuery is a Thanos Query over Store API endpoints: Prometheus' HTTP
// API, answered from every store.
type ThanosQuery struct {
	// URL is its base URL, such as http://127.0.0.1:20123.
	URL string

	proc   *process
	stores int
}

// StartThanosQuery starts a Thanos Query over stores (Store API
// addresses), each a strict endpoint: one that does not answer stays in
// the set, so a query that needs it answers partially, with a warning,
// rather than leaving its series out unsaid. args are extra flags, such
// as --query.lookback-delta to match the shards'. It waits until every
// store answers.
func StartThanosQuery(t testing.TB, stores []string, args ...string) *ThanosQuery {
	t.Helper()
	bin := ThanosBinary(t)
	dir := t.TempDir()
	var sd strings.Builder
	sd.WriteString("endpoints:\n")
	for _, s := range stores {
		fmt.Fprintf(&sd, "  - {address: %q, strict: true}\n", s)
	}
	proc, ports, err := startOnPorts(t.Context(), DefaultStartTimeout, func(name string, a ...string) *process {
		return startProcess(t, name, dir, dir, bin, a...)
	}, "thanos-query", 2, func(ports []int) []string {
		return append([]string{"query", "--http-address=" + hostPort(ports[0]), "--grpc-address=" + hostPort(ports[1]),
			"--endpoint.sd-config=" + sd.String()}, args...)
	}, func(ports []int) func(ctx context.Context) error {
		return storesUp("http://"+hostPort(ports[0]), len(stores))
	})
	if err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("testcluster: ----- thanos query log -----\n%s", proc.logTail())
		}
	})
	return &ThanosQuery{URL: "http://" + hostPort(ports[0]), proc: proc, stores: len(stores)}
}

// WaitStoresUp waits until every store answers the query's health check
// again: after a shard's Prometheus restarted (BackfillRules restarts
// it), a query that reaches its store before then answers partially.
func (q *ThanosQuery) WaitStoresUp(t testing.TB) {
	t.Helper()
	if err := waitReady(t.Context(), q.proc, DefaultStartTimeout, storesUp(q.URL, q.stores)); err != nil {
		t.Fatalf("testcluster: %v", err)
	}
}

// storesUp returns a probe that succeeds when the query at base lists n
// stores, none with an error.
func storesUp(base string, n int) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/stores", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var answer struct {
			Data map[string][]struct {
				Name      string  `json:"name"`
				LastError *string `json:"lastError"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
			return fmt.Errorf("/api/v1/stores: %w", err)
		}
		up := 0
		for _, stores := range answer.Data {
			for _, s := range stores {
				if s.LastError != nil {
					return fmt.Errorf("store %s: %s", s.Name, *s.LastError)
				}
				up++
			}
		}
		if up != n {
			return fmt.Errorf("%d of %d stores up", up, n)
		}
		return nil
	}
}

// StartThanosShards starts a shard for each option and a Thanos Query over
// them all, with queryArgs.
func StartThanosShards(t testing.TB, shards []ShardOptions, queryArgs ...string) ([]*Shard, *ThanosQuery) {
	t.Helper()
	var out []*Shard
	var stores []string
	for _, o := range shards {
		s := StartShard(t, o)
		out = append(out, s)
		stores = append(stores, s.StoreAddress)
	}
	return out, StartThanosQuery(t, stores, queryArgs...)
}

// SidecarPID is the process id of the shard's Thanos sidecar.
func (s *Shard) SidecarPID() int { return s.sidecar.cmd.Process.Pid }

// PID is the process id of Thanos Query.
func (q *ThanosQuery) PID() int { return q.proc.cmd.Process.Pid }

// Stop stops the shard's sidecar and Prometheus: a cluster's outage, as
// the query layer sees it.
func (s *Shard) Stop() {
	s.sidecar.stop()
	s.Prometheus.Stop()
}
