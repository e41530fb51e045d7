package e2e

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpupack/gpupack/internal/testkit/reportdiff"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
)

// TestVictoriaMetricsAnswersTheAccounting loads the same three hours of
// cluster a into a Prometheus and into a VictoriaMetrics single node, and
// requires gpupack's raw and hourly reports against VictoriaMetrics to be
// Prometheus' (within float rounding: MetricsQL sums in another order),
// given two flags: the lookback of Prometheus (-search.maxStalenessInterval;
// backfilled samples have no staleness markers), and room for gpupack's
// hourly queries (-search.maxQueryLen; they run to tens of kilobytes, over
// its default of 16 KiB). Without them, it checks what differs, as
// docs/tasks/query-thanos-mimir-victoriametrics.md says: the hourly
// queries are refused, and a pod that ended mid-window is counted one
// scrape longer (VictoriaMetrics' lookback, found from the samples' median
// interval, reaches one sample further than Prometheus' 29 s).
func TestVictoriaMetricsAnswersTheAccounting(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus and VictoriaMetrics")
	}
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	dir := shardHistory(t, shardA, "a", start)
	history := filepath.Join(dir, "history.om")
	prom := testcluster.StartPrometheus(t, testcluster.PrometheusOptions{Dir: dir, Args: []string{lookback}})
	vm := testcluster.StartVictoriaMetrics(t, "-search.maxStalenessInterval="+(thanosScrape-time.Second).String(), "-search.maxQueryLen=1048576")
	vm.ImportOpenMetrics(history)
	end := start.Add(3 * time.Hour)
	for _, accounting := range []string{"raw", "hourly"} {
		want := fleetReport(t, prom.URL, accounting, end)
		got := fleetReport(t, vm.URL, accounting, end)
		for _, d := range reportdiff.Disagreements(want, got, 1e-9) {
			t.Errorf("%s: VictoriaMetrics vs Prometheus: %s", accounting, d)
		}
	}

	plain := testcluster.StartVictoriaMetrics(t)
	plain.ImportOpenMetrics(history)
	var out bytes.Buffer
	err := gpupackCommand(t, &out, reportArgs(plain.URL, "hourly", end)...).ExecuteContext(t.Context())
	if err == nil || !strings.Contains(err.Error(), "-search.maxQueryLen") {
		t.Errorf("hourly against VictoriaMetrics' defaults: error %v; want its refusal of a query over -search.maxQueryLen", err)
	}
	want := fleetReport(t, prom.URL, "raw", end)
	got := fleetReport(t, plain.URL, "raw", end)
	if extra := float64(got.Cluster.AllocatedGPUSeconds - want.Cluster.AllocatedGPUSeconds); extra != thanosScrape.Seconds() {
		t.Errorf("raw against VictoriaMetrics' default lookback: %v allocated GPU-seconds more than Prometheus, want %v (serve/idle's last sample held one scrape longer)", extra, thanosScrape.Seconds())
	}
}
