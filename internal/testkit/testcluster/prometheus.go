package testcluster

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/gpupack/gpupack/internal/gpusim"
)

// NeedBinary returns the path of a system binary a test needs (prometheus,
// promtool, chromium-headless-shell). Without it the test is skipped,
// unless $GPUPACK_E2E is set, in which case it fails with how to install
// it (hack/deps.sh installs them all).
func NeedBinary(t testing.TB, name, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv("GPUPACK_E2E") != "" {
		t.Fatalf("GPUPACK_E2E is set but %s is not on PATH; apt-get install -y %s (or bash hack/deps.sh)", name, pkg)
	}
	t.Skipf("%s not installed (apt-get install -y %s); set GPUPACK_E2E=1 to make this a failure", name, pkg)
	return ""
}

// PrometheusOptions configures StartPrometheus.
type PrometheusOptions struct {
	// Config is the prometheus.yml to run with; empty runs with no scrape
	// targets, for data that Backfill wrote.
	Config string
	// Dir holds the configuration and, in Dir/data, the TSDB; empty makes a
	// new one. Backfill into filepath.Join(Dir, "data") before the start to
	// have the server load the blocks at once.
	Dir string
	// Args are extra command-line flags, such as
	// --query.lookback-delta=59s for backfilled samples that have no
	// staleness markers.
	Args []string
}

// Prometheus is a real Prometheus server (Debian's package) on a loopback
// port, with its TSDB in a directory of the test's.
type Prometheus struct {
	// URL is the server's base URL, such as http://127.0.0.1:40123; it stays
	// the same across Restart.
	URL string
	// RuleSlice, where set, is the longest span BackfillRules records at
	// once (a test of the slicing).
	RuleSlice time.Duration

	t    testing.TB
	bin  string
	dir  string
	addr string
	args []string
	proc *process
}

// StartPrometheus starts Prometheus and waits until it is ready. Its
// retention is ten years, so that backfilled history of any age stays.
func StartPrometheus(t testing.TB, o PrometheusOptions) *Prometheus {
	t.Helper()
	bin := NeedBinary(t, "prometheus", "prometheus")
	dir := o.Dir
	if dir == "" {
		dir = t.TempDir()
	}
	config := o.Config
	if config == "" {
		config = "global: {scrape_interval: 15s}\n"
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		t.Fatalf("testcluster: write prometheus.yml: %v", err)
	}
	p := &Prometheus{t: t, bin: bin, dir: dir, args: []string{
		"--config.file=" + cfgPath,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--storage.tsdb.retention.time=10y",
	}}
	p.args = append(p.args, o.Args...)
	p.start("127.0.0.1:0")
	addr, err := waitLogAddress(t.Context(), p.proc, DefaultStartTimeout, promListening)
	if err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	p.addr = addr
	p.URL = "http://" + p.addr
	p.waitReady()
	t.Cleanup(func() {
		if t.Failed() && p.proc != nil {
			t.Logf("testcluster: ----- prometheus log -----\n%s", p.proc.logTail())
		}
	})
	return p
}

// promListening finds the address in Prometheus 2's log line and in 3's,
// which puts component=web between the message and the address.
var promListening = regexp.MustCompile(`msg="Listening on"(?: \S+=\S+)*? address=(\S+)`)

func (p *Prometheus) start(addr string) {
	args := append(append([]string{}, p.args...), "--web.listen-address="+addr)
	p.proc = startProcess(p.t, "prometheus", p.dir, p.dir, p.bin, args...)
}

// PID is the server's process id, for reading its CPU time from /proc.
func (p *Prometheus) PID() int { return p.proc.cmd.Process.Pid }

// DataDir is the TSDB directory, for Backfill.
func (p *Prometheus) DataDir() string { return filepath.Join(p.dir, "data") }

// Stop stops the server (SIGTERM, then SIGKILL): a fault test's outage.
func (p *Prometheus) Stop() { p.proc.stop() }

// Restart starts the server again on the same address and data and waits
// until it is ready, after a Stop.
func (p *Prometheus) Restart() {
	p.t.Helper()
	p.proc.stop()
	p.start(p.addr)
	p.waitReady()
}

// Configure replaces the server's prometheus.yml with config (scrape jobs,
// rule files) and restarts it on the same address and data: a server that
// FleetHistory started with backfilled history, given targets to scrape.
func (p *Prometheus) Configure(config string) {
	p.t.Helper()
	if err := os.WriteFile(filepath.Join(p.dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		p.t.Fatalf("testcluster: write prometheus.yml: %v", err)
	}
	p.Restart()
}

func (p *Prometheus) waitReady() {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.t.Context(), DefaultStartTimeout)
	defer cancel()
	for {
		if err := p.proc.exitedEarly(); err != nil {
			p.t.Fatalf("testcluster: %v\n%s", err, p.proc.logTail())
		}
		if resp, err := http.Get(p.URL + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-ctx.Done():
			p.t.Fatalf("testcluster: prometheus at %s did not become ready: %v\n%s", p.URL, context.Cause(ctx), p.proc.logTail())
		case <-time.After(pollInterval):
		}
	}
}

// Backfill writes OpenMetrics text (ending in "# EOF") into a TSDB
// directory as blocks, with promtool tsdb create-blocks-from openmetrics,
// as an operator backfills history. blockDuration bounds each block
// (promtool's --max-block-duration; 0 keeps its default of 2h).
func Backfill(t testing.TB, dataDir, openMetricsFile string, blockDuration time.Duration) {
	t.Helper()
	promtool := NeedBinary(t, "promtool", "prometheus")
	args := []string{"tsdb", "create-blocks-from", "openmetrics"}
	if blockDuration > 0 {
		args = append(args, fmt.Sprintf("--max-block-duration=%s", blockDuration))
	}
	args = append(args, openMetricsFile, dataDir)
	if out, err := exec.CommandContext(t.Context(), promtool, args...).CombinedOutput(); err != nil {
		t.Fatalf("testcluster: promtool %v: %v\n%s", args, err, out)
	}
}

// BackfillRules records the rules of rulesFile over [start, end] from the
// server's own data with promtool tsdb create-blocks-from rules (each rule
// evaluated as its group's interval says, at the times Prometheus would
// evaluate it), then restarts the server on the blocks, as an operator
// backfills new recording rules.
//
// promtool writes a block per rule and two hours: a month of gpupack's 39
// rules is 14,000 blocks, more than the server can open (a month's run
// failed with "too many open files" at a limit of 20,000). So a span
// longer than ruleSlice is recorded a slice at a time, the server merging
// each slice's blocks (WaitCompacted) before the next is recorded. The
// evaluation times are the group's own, whatever the slice; an evaluation
// at a slice's end is recorded again at the next one's start, with the
// same value, which the merge keeps once.
func (p *Prometheus) BackfillRules(rulesFile string, start, end time.Time) {
	p.t.Helper()
	slice := cmp.Or(p.RuleSlice, ruleSlice)
	for from := start; from.Before(end); {
		to := from.Add(slice)
		if !to.Before(end) {
			to = end
		}
		p.backfillRules(rulesFile, from, to)
		if to.Before(end) {
			p.WaitCompacted()
		}
		from = to
	}
}

// ruleSlice is the longest span BackfillRules records at once unless
// RuleSlice says otherwise: 4 days of gpupack's rules are about 1,900
// blocks.
const ruleSlice = 4 * 24 * time.Hour

func (p *Prometheus) backfillRules(rulesFile string, start, end time.Time) {
	p.t.Helper()
	promtool := NeedBinary(p.t, "promtool", "prometheus")
	out := p.t.TempDir()
	args := []string{"tsdb", "create-blocks-from", "rules", "--quiet", "--url=" + p.URL,
		"--start=" + start.UTC().Format(time.RFC3339), "--end=" + end.UTC().Format(time.RFC3339), "--output-dir=" + out, rulesFile}
	if b, err := exec.CommandContext(p.t.Context(), promtool, args...).CombinedOutput(); err != nil {
		p.t.Fatalf("testcluster: promtool %v: %v\n%s", args, err, b)
	}
	blocks, err := os.ReadDir(out)
	if err != nil {
		p.t.Fatal(err)
	}
	p.Stop()
	for _, b := range blocks {
		if err := os.Rename(filepath.Join(out, b.Name()), filepath.Join(p.DataDir(), b.Name())); err != nil {
			p.t.Fatalf("testcluster: moving the rules' block %s into %s: %v", b.Name(), p.DataDir(), err)
		}
	}
	p.Restart()
	if err := os.RemoveAll(out); err != nil {
		p.t.Fatal(err)
	}
}

// WaitCompacted waits until no two of the server's blocks overlap in
// time, and says how long that took. promtool writes a block per
// recording rule and two hours, which Prometheus merges (its vertical
// compaction, about once a minute) into the few blocks a server that
// recorded the rules as it went would hold. A query opens every block its
// range overlaps, so a benchmark that reads the rules before then
// measures hundreds of blocks a day that no real server has.
func (p *Prometheus) WaitCompacted() time.Duration {
	p.t.Helper()
	t0 := time.Now()
	for {
		n, overlap, err := blockOverlap(p.DataDir())
		if err != nil {
			p.t.Fatalf("testcluster: reading the blocks of %s: %v", p.DataDir(), err)
		}
		if !overlap {
			p.t.Logf("testcluster: %d blocks, none overlapping, after %.0f s", n, time.Since(t0).Seconds())
			return time.Since(t0)
		}
		if err := p.proc.exitedEarly(); err != nil {
			p.t.Fatalf("testcluster: %v\n%s", err, p.proc.logTail())
		}
		select {
		case <-p.t.Context().Done():
			p.t.Fatalf("testcluster: %d blocks of %s still overlap: %v", n, p.DataDir(), context.Cause(p.t.Context()))
		case <-time.After(5 * time.Second):
		}
	}
}

// blockOverlap counts the blocks in a TSDB directory (those with a
// meta.json: complete, not being written) and says whether two of them
// overlap in time.
func blockOverlap(dataDir string) (int, bool, error) {
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		return 0, false, err
	}
	type span struct{ min, max int64 }
	var spans []span
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dataDir, e.Name(), "meta.json"))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return 0, false, err
		}
		var meta struct {
			MinTime int64 `json:"minTime"`
			MaxTime int64 `json:"maxTime"`
		}
		if err := json.Unmarshal(b, &meta); err != nil {
			return 0, false, fmt.Errorf("block %s: meta.json: %w", e.Name(), err)
		}
		spans = append(spans, span{meta.MinTime, meta.MaxTime})
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.min, b.min) })
	for i := 1; i < len(spans); i++ {
		if spans[i].min < spans[i-1].max {
			return len(spans), true, nil
		}
	}
	return len(spans), false, nil
}

// FleetHistory backfills fleet's whole history from start, scraped every
// scrape with faults, into a new Prometheus and starts it. It writes and
// loads a day at a time, so that a month of a large fleet needs one day's
// file on disk. Backfilled samples have no staleness markers: the lookback
// is set just under the scrape, so that a pod's series ends at its last
// sample, as a live scrape's staleness marker would end it.
func FleetHistory(t testing.TB, fleet *gpusim.Scenario, start time.Time, scrape time.Duration, faults gpusim.Faults) *Prometheus {
	t.Helper()
	dir := t.TempDir()
	const day = 24 * time.Hour
	for from := time.Duration(0); from < fleet.Duration.D(); from += day {
		file := filepath.Join(dir, "history.om")
		f, err := os.Create(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := fleet.WriteOpenMetrics(f, start, from, min(from+day, fleet.Duration.D()), scrape, faults); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		Backfill(t, filepath.Join(dir, "data"), file, day)
		if err := os.Remove(file); err != nil {
			t.Fatal(err)
		}
	}
	return StartPrometheus(t, PrometheusOptions{Dir: dir, Args: []string{"--query.lookback-delta=" + (scrape - time.Second).String()}})
}
