package testcluster

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// VictoriaMetrics is a VictoriaMetrics single node (Debian's
// victoria-metrics package) on a loopback port, with its storage in a
// directory of the test's: a store that answers Prometheus' HTTP API in
// its own dialect, MetricsQL.
type VictoriaMetrics struct {
	// URL is the server's base URL, such as http://127.0.0.1:20123.
	URL string

	t testing.TB
}

// StartVictoriaMetrics starts VictoriaMetrics, with args as extra flags
// (such as -search.maxStalenessInterval, its lookback), and waits until it
// is ready. Its retention is ten years, so that imported history of any
// age stays, and it caches no answer: imported history lands in the past,
// where a cached answer would hide it.
func StartVictoriaMetrics(t testing.TB, args ...string) *VictoriaMetrics {
	t.Helper()
	bin := NeedBinary(t, "victoria-metrics", "victoria-metrics")
	dir := t.TempDir()
	_, ports, err := startOnPorts(t.Context(), DefaultStartTimeout, func(name string, a ...string) *process {
		return startProcess(t, name, dir, dir, bin, a...)
	}, "victoria-metrics", 1, func(ports []int) []string {
		return append([]string{"-httpListenAddr=" + hostPort(ports[0]), "-storageDataPath=" + filepath.Join(dir, "data"),
			"-retentionPeriod=10y", "-search.disableCache"}, args...)
	}, func(ports []int) func(ctx context.Context) error {
		return httpProbe(http.DefaultClient, "http://"+hostPort(ports[0])+"/health")
	})
	if err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	return &VictoriaMetrics{URL: "http://" + hostPort(ports[0]), t: t}
}

// ImportOpenMetrics sends the samples of an OpenMetrics file (what
// Backfill writes into Prometheus) to the server's Prometheus text import
// (/api/v1/import/prometheus), then flushes them, so that a query sees
// them at once. The import reads a sample's timestamp in milliseconds,
// where OpenMetrics writes seconds; the comments (# TYPE, # EOF) are left
// out. (vmctl's Prometheus mode would copy the blocks themselves, but the
// packaged vmctl needs a terminal.)
func (v *VictoriaMetrics) ImportOpenMetrics(file string) {
	v.t.Helper()
	body, err := promText(file)
	if err != nil {
		v.t.Fatalf("testcluster: %v", err)
	}
	v.post("/api/v1/import/prometheus", body)
	v.post("/internal/force_flush", nil)
}

// promText is an OpenMetrics file's samples in Prometheus' text format,
// each timestamp in milliseconds.
func promText(file string) (*bytes.Buffer, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out bytes.Buffer
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		at := strings.LastIndexByte(line, ' ')
		seconds, err := strconv.ParseFloat(line[at+1:], 64)
		if at < 0 || err != nil {
			return nil, fmt.Errorf("%s:%d: want a sample with a timestamp, found %q", file, n, line)
		}
		fmt.Fprintf(&out, "%s %d\n", line[:at], int64(math.Round(seconds*1000)))
	}
	return &out, sc.Err()
}

// post sends body to path and fails the test unless the server answers 2xx.
func (v *VictoriaMetrics) post(path string, body io.Reader) {
	v.t.Helper()
	resp, err := http.Post(v.URL+path, "text/plain", body)
	if err != nil {
		v.t.Fatalf("testcluster: VictoriaMetrics %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		v.t.Fatalf("testcluster: VictoriaMetrics %s: %s: %s", path, resp.Status, msg)
	}
}
