package promql

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"sort"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/gpusim"
	"github.com/gpupack/gpupack/internal/testkit/reportdiff"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/usage"
)

// TestPlainFiguresAgreeWithSubqueries backfills a day of a 16-GPU fleet
// (pods arriving and leaving mid-hour, time-sliced GPUs, a MIG GPU, NaNs on
// one device, an energy counter reset on another) into a real Prometheus
// and reads its buckets twice: with plain range selectors on the plain
// device-hours and subqueries on the rest, and with subqueries everywhere
// (the reference). Every bucket must be the same both ways, the day must
// have both kinds of device-hour (a time-sliced device's shared hours among
// the subquery ones, hours that one pod held alone among the plain ones),
// and the report from the buckets must agree with the raw path within 1%.
func TestPlainFiguresAgreeWithSubqueries(t *testing.T) {
	if testing.Short() {
		t.Skip("backfills and starts a real Prometheus")
	}
	const scrape = time.Minute
	prom, w := faultyFleetDay(t, scrape)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := New(prom.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadBuckets(ctx, w, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ref := s.readingBy(referencePaths{fastest: pathSubqueries})
	want, err := ref.LoadBuckets(ctx, w, time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	// Which device-hours the plain figures served.
	r := v1.Range{Start: w.Start.Add(time.Hour - time.Millisecond), End: w.End.Add(-time.Millisecond), Step: time.Hour}
	others, err := s.notPlain(ctx, r, scrape, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var plainOwned, sharedOthers, sharedPlain int
	for _, b := range want {
		if b.Owner.IsZero() {
			continue
		}
		k := hourKey{b.Start.UnixMilli(), b.Device.Key()}
		switch {
		case b.HeldShareSteps < b.HeldSteps && others.devices[k]:
			sharedOthers++
		case b.HeldShareSteps < b.HeldSteps:
			sharedPlain++
		case !others.devices[k]:
			plainOwned++
		}
	}
	if plainOwned == 0 || sharedOthers == 0 || sharedPlain != 0 {
		t.Errorf("%d owner buckets held alone and served plain, %d time-sliced ones served by subqueries, %d time-sliced ones served plain; want some, some and none", plainOwned, sharedOthers, sharedPlain)
	}
	t.Logf("%d buckets; %d device-hours of %d need subqueries; %d owner buckets served plain", len(got), len(others.devices), 16*24+2, plainOwned)

	index := func(bs []usage.Bucket) map[string]usage.Bucket {
		out := map[string]usage.Bucket{}
		for _, b := range bs {
			sort.Strings(b.Metrics)
			out[fmt.Sprintf("%s %s %s", b.Start.Format("15:04"), b.Device.Key(), b.Owner.PodKey())] = b
		}
		return out
	}
	g, wt := index(got), index(want)
	if len(g) != len(wt) {
		t.Errorf("%d buckets with plain figures, %d with subqueries only", len(g), len(wt))
	}
	for k, wb := range wt {
		gb, ok := g[k]
		if !ok {
			t.Errorf("bucket %s: missing with plain figures", k)
			continue
		}
		if d := bucketDiff(gb, wb); d != "" {
			t.Errorf("bucket %s (plain device-hour: %v): %s", k, !others.devices[hourKey{wb.Start.UnixMilli(), wb.Device.Key()}], d)
		}
	}

	data, err := s.Load(ctx, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	pricing := usage.Pricing{Catalogue: gpu.Default()}
	raw, err := usage.Account(usage.Input{Window: w, Series: data.Series, Pricing: pricing})
	if err != nil {
		t.Fatal(err)
	}
	hourly, err := usage.AccountBuckets(usage.BucketInput{Start: w.Start, End: w.End, Buckets: got, Pricing: pricing})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range reportdiff.Disagreements(raw, hourly, 0.01) {
		t.Error("hourly (plain figures) vs raw: " + d)
	}
	// The second node's GPUs are DRA devices: their DRA identity, their
	// pods' claims and the time-sliced GPUs' sharers come through (and
	// agree with the raw path, above).
	var draDevices, sharedDevices, claimed int
	for _, d := range hourly.Devices {
		if d.DRADevice != "" {
			draDevices++
			if d.Node != "node-001" || d.DRADevice != "gpu.nvidia.com/node-001/gpu-"+d.GPU {
				t.Errorf("device %s: DRA device %q; want gpu.nvidia.com/node-001/gpu-%s on node-001 only", d.Key(), d.DRADevice, d.GPU)
			}
		}
		if d.SharedSeconds > 0 && len(d.SharedBy) >= 2 {
			sharedDevices++
		}
	}
	for _, p := range hourly.Pods {
		if len(p.Claims) > 0 {
			claimed++
		}
	}
	if draDevices == 0 || sharedDevices == 0 || claimed == 0 {
		t.Errorf("%d DRA devices, %d shared devices, %d pods with claims; want some of each", draDevices, sharedDevices, claimed)
	}
	if q, rq := hourly.Quality, raw.Quality; q.NaNSamples != rq.NaNSamples || q.NaNSamples == 0 || q.CounterResets != rq.CounterResets || q.CounterResets == 0 {
		t.Errorf("hourly quality: %d NaN, %d resets; raw %d, %d (the history has both)", q.NaNSamples, q.CounterResets, rq.NaNSamples, rq.CounterResets)
	}
}

// faultyFleetDay backfills a day of a 16-GPU fleet scraped every scrape
// (pods arriving and leaving mid-hour, time-sliced GPUs, a MIG GPU, NaNs
// on one device, an energy counter reset on another) into a new real
// Prometheus, and returns it with the day's window.
func faultyFleetDay(t testing.TB, scrape time.Duration) (*testcluster.Prometheus, usage.Window) {
	t.Helper()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fleet, err := gpusim.Fleet(16, 1, 7, gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	faults := gpusim.Faults{
		NaNEvery: 7, NaNDevices: []string{"node-000/1/GPU-00000001-0000-4000-8000-000000000002"},
		Resets: []gpusim.Reset{{Device: "node-001/5/GPU-00000002-0000-4000-8000-000000000006", At: 10*time.Hour + 13*time.Minute}},
	}
	prom := testcluster.FleetHistory(t, fleet, start, scrape, faults)
	return prom, usage.Window{Start: start, End: start.Add(fleet.Duration.D()), Step: scrape}
}

// bucketDiff names the fields of two buckets that differ beyond rounding.
func bucketDiff(got, want usage.Bucket) string {
	var out string
	var walk func(path string, g, w reflect.Value)
	walk = func(path string, g, w reflect.Value) {
		switch g.Kind() {
		case reflect.Struct:
			if g.Type() == reflect.TypeOf(time.Time{}) {
				if !g.Interface().(time.Time).Equal(w.Interface().(time.Time)) {
					out += fmt.Sprintf(" %s %v, want %v;", path, g.Interface(), w.Interface())
				}
				return
			}
			if g.Type() == reflect.TypeOf(usage.Amount{}) {
				a, b := g.Interface().(usage.Amount), w.Interface().(usage.Amount)
				if a.Known() != b.Known() || math.Abs(a.Value()-b.Value()) > 1e-9*math.Max(1, math.Abs(b.Value())) {
					out += fmt.Sprintf(" %s %v, want %v;", path, a, b)
				}
				return
			}
			for i := range g.NumField() {
				walk(path+"."+g.Type().Field(i).Name, g.Field(i), w.Field(i))
			}
		case reflect.Float64:
			a, b := g.Float(), w.Float()
			if math.Abs(a-b) > 1e-9*math.Max(1, math.Abs(b)) {
				out += fmt.Sprintf(" %s %v, want %v;", path, a, b)
			}
		default:
			if !reflect.DeepEqual(g.Interface(), w.Interface()) {
				out += fmt.Sprintf(" %s %v, want %v;", path, g.Interface(), w.Interface())
			}
		}
	}
	walk("", reflect.ValueOf(got), reflect.ValueOf(want))
	return out
}
