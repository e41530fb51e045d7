package promql

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpupack/gpupack/usage"
)

// TestStreamBuckets answers every bucket query with one renamed (exported_*)
// series holding a value at the last millisecond of each of two hours, and
// checks that the buckets come back at their hours' starts, one day per
// query, with device and owner read as Load reads them.
func TestStreamBuckets(t *testing.T) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	var ranges []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Error(err)
		}
		mu.Lock()
		ranges = append(ranges, r.Form.Get("start")+".."+r.Form.Get("end")+"/"+r.Form.Get("step"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		t1, t2 := float64(start.Add(time.Hour).UnixMilli()-1)/1000, float64(start.Add(2*time.Hour).UnixMilli()-1)/1000
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"matrix","result":[
 {"metric":{"gpu":"0","UUID":"GPU-a","modelName":"NVIDIA L4","Hostname":"n1","pod":"dcgm-exporter-x","exported_namespace":"ml","exported_pod":"train","exported_container":"main","metric":"%s","source":"%s"},"values":[[%.3f,"120"],[%.3f,"60"]]}]}}`,
			usage.FBUsed, usage.SMActive, t1, t2)
	}))
	defer srv.Close()
	s, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	w := usage.Window{Start: start, End: start.Add(2 * time.Hour), Step: 30 * time.Second}
	got := map[string]usage.Bucket{}
	err = s.StreamBuckets(context.Background(), w, time.Hour, func(b *usage.Bucket) error {
		got[b.Start.Format("15:04")+" "+b.Owner.PodKey()] = *b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("buckets %v; want a device and an owner bucket for each of two hours", got)
	}
	own, dev := got["01:00 ml/train"], got["01:00 /"]
	if own.HeldSteps != 60 || own.Device.Key() != "n1/0/GPU-a" || own.Owner.Container != "main" || own.Step != w.Step || own.Length != time.Hour {
		t.Errorf("owner bucket %+v; want 60 held steps of ml/train on n1/0/GPU-a at 30s steps", own)
	}
	if dev.SampledSteps != 60 || dev.ActivitySource != usage.SMActive || len(dev.Metrics) != 1 || dev.Metrics[0] != usage.FBUsed {
		t.Errorf("device bucket %+v; want 60 sampled steps, activity from SM, FB_USED seen", dev)
	}
	// One instant query finds that no hourly recording rule holds the
	// window, one that no 5-minute one holds the day, one the device-hours
	// that are not plain (here none); then each plain figure and the
	// direct ones (sample counts, values outside their range) run once for
	// the day.
	want := 1 + 1 + 1 + len(plainFigures) + len(directFigures)
	if n := len(ranges); n != want {
		t.Errorf("%d queries for a 2 h window; want %d", n, want)
	}
	for _, r := range ranges {
		if r != "../" && !strings.HasSuffix(r, "/3600") {
			t.Errorf("query range %s; want a 1 h step", r)
		}
	}
}

func TestStreamBucketsRefusesOddWindows(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("queried Prometheus for a window it should refuse")
		_, _ = io.WriteString(w, "{}")
	}))
	defer srv.Close()
	s, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		w    usage.Window
		want string
	}{
		"not whole buckets": {usage.Window{Start: start, End: start.Add(90 * time.Minute), Step: 30 * time.Second}, "not whole buckets of 1h0m0s"},
		"not on a step":     {usage.Window{Start: start.Add(time.Second), End: start.Add(time.Hour + time.Second), Step: 30 * time.Second}, "not whole buckets of 1h0m0s"},
		"odd step":          {usage.Window{Start: start, End: start.Add(time.Hour), Step: 7 * time.Minute}, "a positive step that divides the bucket"},
		"empty":             {usage.Window{Start: start, End: start, Step: 30 * time.Second}, "is empty"},
	} {
		if _, err := s.LoadBuckets(context.Background(), tc.w, time.Hour); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v; want one saying %q", name, err, tc.want)
		}
	}
}
