package testcluster

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
)

// TestThanosOverShards backfills two hours of a gauge into each of two
// shards (a different value each), serves them through their sidecars and
// one Thanos Query, and checks that the query sees both shards' backfilled
// history, each series with its shard's external label; and that with one
// shard down the query answers the other's series with a warning (its
// partial response), not as if the stopped shard had no series.
func TestThanosOverShards(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two Prometheus, two Thanos sidecars and a Thanos Query")
	}
	start := time.Now().Add(-3 * time.Hour).Truncate(time.Hour)
	var opts []ShardOptions
	for i, cluster := range []string{"a", "b"} {
		dir := t.TempDir()
		var b strings.Builder
		b.WriteString("# TYPE gpupack_test_gauge gauge\n")
		for k := 0; k < 240; k++ { // 2 h at 30 s
			fmt.Fprintf(&b, "gpupack_test_gauge{gpu=\"0\"} %d %d\n", i+1, start.Add(time.Duration(k)*30*time.Second).Unix())
		}
		b.WriteString("# EOF\n")
		file := filepath.Join(dir, "history.om")
		if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		Backfill(t, filepath.Join(dir, "data"), file, 0)
		opts = append(opts, ShardOptions{Dir: dir, ExternalLabels: map[string]string{"cluster": cluster}})
	}
	shards, q := StartThanosShards(t, opts)

	// A second before the history's end, the 2 h range holds all 240
	// samples in Prometheus 2's closed ranges and in the left-open ones of
	// Thanos' engine (Prometheus 3's) alike.
	at := start.Add(2*time.Hour - time.Second)
	query := "sum by (cluster) (sum_over_time(gpupack_test_gauge[2h]))"
	got, warnings := queryByCluster(t, q.URL, query, at)
	if diff := gocmp.Diff(map[string]float64{"a": 240, "b": 480}, got); diff != "" || len(warnings) != 0 {
		t.Errorf("both shards up: sums by cluster (-want +got):\n%s\nwarnings %q", diff, warnings)
	}

	shards[1].Stop()
	got, warnings = queryByCluster(t, q.URL, query, at)
	if diff := gocmp.Diff(map[string]float64{"a": 240}, got); diff != "" || len(warnings) == 0 {
		t.Errorf("shard b down: sums by cluster (-want +got):\n%s\nwarnings %q; want shard a's sum and a warning", diff, warnings)
	}
}

// queryByCluster runs an instant query and returns its samples by their
// cluster label, and the answer's warnings.
func queryByCluster(t *testing.T, base, query string, at time.Time) (map[string]float64, []string) {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(query) + "&time=" + fmt.Sprint(at.Unix()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
		Warnings []string `json:"warnings"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || answer.Status != "success" {
		t.Fatalf("%s: status %q, %v", query, answer.Status, err)
	}
	got := map[string]float64{}
	for _, r := range answer.Data.Result {
		var v float64
		if _, err := fmt.Sscan(r.Value[1].(string), &v); err != nil {
			t.Fatal(err)
		}
		got[r.Metric["cluster"]] = v
	}
	return got, answer.Warnings
}
