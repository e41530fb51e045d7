package promql

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/gpusim"
	"github.com/gpupack/gpupack/internal/testkit/reportdiff"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/usage"
)

// TestRecordingRules checks that every bucket figure has one recording
// rule per level with a valid, distinct name in the level:metric:operations
// form (the 5-minute windows of the series, and the hourly windows of
// those that ended hourLag before), and that steps the windows cannot
// hold are refused.
func TestRecordingRules(t *testing.T) {
	f, err := RecordingRules(30*time.Second, Selector{})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Groups) != 2 || f.Groups[0].Interval != "5m" || f.Groups[1].Interval != "1h" {
		t.Fatalf("groups %+v; want one group evaluated every 5m, then one every 1h", f.Groups)
	}
	levels := []struct {
		name   *regexp.Regexp
		window string
	}{
		{regexp.MustCompile(`^gpupack:[a-z0-9_]+:5m$`), "299999ms"},
		{regexp.MustCompile(`^gpupack:[a-z0-9_]+:1h$`), "[3599999ms] offset 5m"},
	}
	if r := f.Groups[0].Rules[len(f.Groups[0].Rules)-1]; r.Record != recordedXID || !strings.HasPrefix(r.Expr, "max by (") {
		t.Errorf("last 5-minute rule %s = %s; want %s, the XID gauge's maximum per GPU", r.Record, r.Expr, recordedXID)
	}
	seen := map[string]bool{}
	for i, l := range levels {
		n := 0
		for _, r := range f.Groups[i].Rules {
			if !l.name.MatchString(r.Record) || seen[r.Record] {
				t.Errorf("rule %q: want a distinct name like %s", r.Record, l.name)
			}
			seen[r.Record] = true
			if r.Labels[StepLabel] != "30s" || !strings.Contains(r.Expr, l.window) {
				t.Errorf("rule %s: labels %v, expr %s; want %s=30s over %s", r.Record, r.Labels, r.Expr, StepLabel, l.window)
			}
			if i == 1 && r.Record != hourlyDevices && !strings.Contains(r.Expr, strings.TrimSuffix(r.Record, ":1h")+":5m{") {
				t.Errorf("rule %s: expr %s; want it to combine its figure's 5-minute windows", r.Record, r.Expr)
			}
			n++
		}
		if want := len(bucketFigures) + 1; n != want { // and the XID maximum, or the hourly devices
			t.Errorf("group %s: %d rules for %d bucket figures", f.Groups[i].Name, n, len(bucketFigures))
		}
	}
	for _, step := range []time.Duration{0, -time.Second, 7 * time.Second, 1500 * time.Millisecond, 10 * time.Minute} {
		if _, err := RecordingRules(step, Selector{}); err == nil || !strings.Contains(err.Error(), "divide") {
			t.Errorf("step %s: error %v; want one saying the step must divide 5m", step, err)
		}
	}
}

// TestRecordedAgreesWithBuckets backfills a day of a 16-GPU fleet (pods
// arriving and leaving mid-hour, time-sliced GPUs, a MIG GPU, NaNs on one
// device, an energy counter reset on another) into a real Prometheus,
// records gpupack's rules over it with promtool tsdb create-blocks-from
// rules (evaluated at the offsets Prometheus would evaluate them), and
// reads the buckets twice: from the recorded windows, and computed from
// the series (the reference). Totals per device and pod, energy, VRAM
// maxima, start-up times and data quality must agree within 1%; the
// hourly levels and the GPUs a pod held at start may not, since an hour's
// recorded windows are shifted from the hour (by up to one 5-minute
// window, or up to an hour where the hourly windows are read). Recorded
// at once, the second level holds nothing (it reads the first, which the
// server does not hold yet) and the 5-minute windows are read; recorded
// level by level (record, restart, record), the hourly windows are read
// and the window's ends from the 5-minute ones.
func TestRecordedAgreesWithBuckets(t *testing.T) {
	if testing.Short() {
		t.Skip("backfills and starts a real Prometheus")
	}
	for name, byLevel := range map[string]bool{"5-minute windows": false, "hourly windows": true} {
		t.Run(name, func(t *testing.T) { recordedAgreesWithBuckets(t, byLevel) })
	}
}

func recordedAgreesWithBuckets(t *testing.T, byLevel bool) {
	const scrape = time.Minute
	prom, day := faultyFleetDay(t, scrape)
	// One hour past the history, so that the windows holding its last
	// steps are read too; the rules are recorded an hour further, so that
	// the hourly window that ends in that hour is recorded whatever the
	// group's evaluation offset.
	w := usage.Window{Start: day.Start, End: day.End.Add(time.Hour), Step: scrape}
	if byLevel {
		recordLevels(t, prom, scrape, w.Start, w.End.Add(time.Hour))
	} else {
		prom.BackfillRules(rulesFile(t, scrape), w.Start, w.End.Add(time.Hour))
	}

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
	p := s.BucketProvenance()
	if byLevel {
		// Every hour from the rules, 24 or 25 of them as hourly windows
		// (25 where the group's offset puts a window's end on an hour's
		// last millisecond), the rest as 5-minute windows.
		if p.RecordedHours != 25 || p.ComputedHours != 0 || p.HourlyWindows < 24 || p.HourlyWindows > 25 {
			t.Errorf("provenance %+v; want all 25 hours read from the recording rules, 24 or 25 hourly windows", p)
		}
	} else if p.RecordedHours < 24 || p.RecordedHours+p.ComputedHours != 25 || p.HourlyWindows != 0 {
		// The day's 24 hours come from the rules. The extra hour holds a
		// recorded window only when the group's evaluation offset (a hash
		// of the rules file's path, so it varies between runs) puts a
		// window ending in it over the day's last sample; otherwise it
		// has nothing recorded and nothing sampled, and is computed (as
		// empty).
		t.Errorf("provenance %+v; want the day's 24 hours (and the empty one after it, or not) read from the 5-minute recording rules", p)
	}
	ref := s.readingBy(referencePaths{fastest: pathComputed})
	want, err := ref.LoadBuckets(ctx, w, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pricing := usage.Pricing{Catalogue: gpu.Default()}
	recorded, err := usage.AccountBuckets(usage.BucketInput{Start: w.Start, End: w.End, Buckets: got, Pricing: pricing})
	if err != nil {
		t.Fatal(err)
	}
	computed, err := usage.AccountBuckets(usage.BucketInput{Start: w.Start, End: w.End, Buckets: want, Pricing: pricing})
	if err != nil {
		t.Fatal(err)
	}
	if recorded.Cluster.Totals.AllocatedGPUSeconds == 0 {
		t.Fatal("the recorded report allocates nothing")
	}
	// What the hour's boundary moves: the levels per hour, and the GPUs a
	// pod held at start (its first hour's GPU-seconds over the time from
	// its attach to that hour's end).
	for _, r := range []*usage.Report{recorded, computed} {
		r.Hourly = nil
		for i := range r.Pods {
			r.Pods[i].HourlyActivity, r.Pods[i].FirstHour, r.Pods[i].Startup.HeldGPUs = nil, 0, usage.Unknown
		}
	}
	for _, d := range reportdiff.Disagreements(computed, recorded, 0.01) {
		t.Error("recorded vs computed buckets: " + d)
	}
	if q, cq := recorded.Quality, computed.Quality; q.NaNSamples != cq.NaNSamples || q.CounterResets != cq.CounterResets || q.CounterResets == 0 || q.Samples != cq.Samples {
		t.Errorf("recorded quality: %d samples, %d NaN, %d resets; computed %d, %d, %d", q.Samples, q.NaNSamples, q.CounterResets, cq.Samples, cq.NaNSamples, cq.CounterResets)
	}
}

// BenchmarkRecordedQueries backfills a fleet (GPUPACK_BENCH_GPUS, 48 by
// default) for two days at 30 s scrapes into a real Prometheus, records
// gpupack's rules over them level by level (promtool; its time is logged:
// what the rules cost Prometheus per device-day), and times on the second
// day, each the median of three runs in one run of the machine:
// StreamBuckets from the hourly rules (and over both days, for the cost
// of an added day), from the 5-minute rules alone, and computed from the
// series (the plain figures and the subqueries where needed); the
// 5-minute figures read as one range query per figure at a 1 h step
// against 24 instant queries per figure; and where the time goes: the
// check, and Prometheus' answers against gpupack's decoding of them. It
// logs gpupack's own CPU (this process's) beside each path, and times the
// whole hourly report in this process over one day and both, answers read
// by client_golang and by decodeMatrix side by side, its CPU split by
// step; GPUPACK_BENCH_REPORT_PROFILE=file writes a CPU profile of ten
// two-day reports (run it without -cpuprofile). Run it once:
//
//	GPUPACK_E2E=1 go test ./internal/source/promql -run XXX -bench RecordedQueries -benchtime 1x -v
func BenchmarkRecordedQueries(b *testing.B) {
	if os.Getenv("GPUPACK_E2E") == "" {
		b.Skip("set GPUPACK_E2E=1: backfills and starts a real Prometheus")
	}
	const scrape, days = 30 * time.Second, 2
	gpus, start, prom := benchFleet(b, scrape, days)
	for i, took := range recordLevels(b, prom, scrape, start, start.Add(days*24*time.Hour+time.Hour)) {
		b.Logf("recorded level %d of the rules over %d GPUs x %d days in %.1f s: %.2f s per device-day", i+1, gpus, days, took.Seconds(), took.Seconds()/float64(gpus*days))
	}
	// As a server that recorded them as it went holds them: merged.
	prom.WaitCompacted()

	s, err := New(prom.URL)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	day := usage.Window{Start: start.Add(24 * time.Hour), End: start.Add(48 * time.Hour), Step: scrape}
	r := v1.Range{Start: day.Start.Add(time.Hour - time.Millisecond), End: day.End.Add(-time.Millisecond), Step: time.Hour}
	// cpu is the median of the last median's runs in gpupack's own CPU
	// (this process's: Prometheus is another).
	var cpu time.Duration
	median := func(f func() error) time.Duration {
		var ds, cs []time.Duration
		for range 3 {
			t0, c0 := time.Now(), ownCPU(b)
			if err := f(); err != nil {
				b.Fatal(err)
			}
			ds, cs = append(ds, time.Since(t0)), append(cs, ownCPU(b)-c0)
		}
		slices.Sort(ds)
		slices.Sort(cs)
		cpu = cs[1]
		return ds[1]
	}
	for b.Loop() {
		var dayCPU time.Duration // the hourly path's over the day
		for _, path := range []struct {
			name               string
			computed, fiveOnly bool
		}{{"hourly", false, false}, {"recorded", false, true}, {"computed", true, false}} {
			var ref referencePaths
			if path.fiveOnly {
				ref.fastest = pathFiveMinuteRules
			}
			if path.computed {
				ref.fastest = pathComputed
			}
			src := s.readingBy(ref)
			src.provenance = &provenanceCounts{}
			n := 0
			d := median(func() error {
				n = 0
				return src.StreamBuckets(ctx, day, time.Hour, func(*usage.Bucket) error { n++; return nil })
			})
			if p := src.BucketProvenance(); !path.computed && (p.ComputedHours != 0 || p.RecordedHours == 0 || (p.HourlyWindows == 0) != path.fiveOnly) {
				b.Fatalf("provenance %+v: the %s runs did not read every hour from the rules as they should", p, path.name)
			}
			b.ReportMetric(d.Seconds()/float64(gpus)*1000, "ms/device-day-"+path.name)
			b.Logf("%-8s StreamBuckets over the day: %.3f s, %d buckets, %.1f ms per device-day; gpupack's own CPU %.3f s", path.name, d.Seconds(), n, d.Seconds()/float64(gpus)*1000, cpu.Seconds())
			if path.name == "hourly" {
				dayCPU = cpu
			}
		}
		var queries []string
		for _, fig := range bucketFigures {
			q, err := recordedQuery(fig, scrape, time.Hour, Selector{})
			if err != nil {
				b.Fatal(err)
			}
			queries = append(queries, q)
		}
		ranged := median(func() error {
			for _, q := range queries {
				if _, err := s.queryRange(ctx, q, r); err != nil {
					return err
				}
			}
			return nil
		})
		instant := median(func() error {
			for _, q := range queries {
				for t := r.Start; !t.After(r.End); t = t.Add(time.Hour) {
					if _, err := s.queryRange(ctx, q, v1.Range{Start: t, End: t, Step: time.Hour}); err != nil {
						return err
					}
				}
			}
			return nil
		})
		b.Logf("the %d recorded figures over the day, one by one: %.3f s as range queries at a 1 h step, %.3f s as 24 instant queries each", len(queries), ranged.Seconds(), instant.Seconds())
		// Where the recorded path's time goes: the check, and for the
		// figures Prometheus' answer (query and transfer) against
		// gpupack's decoding of it.
		check := median(func() error {
			_, err := s.recordedCovers(ctx, r, scrape, time.Hour)
			return err
		})
		profile := func(name string, queries []string, r v1.Range) {
			var fetch, decode time.Duration
			var bytes, points int
			for _, q := range queries {
				f, d, n, p, err := timedQueryRange(ctx, prom.URL, q, r)
				if err != nil {
					b.Fatal(err)
				}
				fetch, decode, bytes, points = fetch+f, decode+d, bytes+n, points+p
			}
			b.Logf("%s, %d queries one by one: %.3f s for Prometheus to answer, %.3f s to decode %d bytes of JSON, %d points", name, len(queries), fetch.Seconds(), decode.Seconds(), bytes, points)
		}
		b.Logf("the check over the day: %.3f s", check.Seconds())
		profile("the 5-minute figures over the day", queries, r)
		plan, err := s.planHourly(ctx, day)
		if err != nil || plan == nil || len(plan.shards) != 1 {
			b.Fatalf("the hourly rules do not hold the day (one Prometheus): %v", err)
		}
		ends := plan.shards[0].ends
		profile("the hourly figures over the day", hourlyQueries(scrape, Selector{}), v1.Range{Start: ends[0].Add(hourLag), End: ends[len(ends)-1].Add(hourLag), Step: time.Hour})
		// The rest of the hourly path's day, query by query: the check's
		// two counts, and the figures combined over the day's windows
		// (and over an end's 5-minute windows, which a window's first
		// and last day read too).
		recordedCount, checkedCount, rawCount := checkCounts(scrape, time.Hour, Selector{})
		profile("the check's recorded counts over the day", []string{recordedCount, checkedCount}, r)
		profile("the check's raw count over the day", []string{rawCount}, r)
		last := ends[len(ends)-1]
		daily, err := combinedQueries(scrape, Selector{}, daySpan(ends), dailyFigures(), RecordedHourName)
		if err != nil {
			b.Fatal(err)
		}
		profile("the daily figures combined over the day's windows", daily, v1.Range{Start: last.Add(hourLag), End: last.Add(hourLag), Step: time.Hour})
		edge, err := combinedQueries(scrape, Selector{}, 50*time.Minute, allFigures(), RecordedName)
		if err != nil {
			b.Fatal(err)
		}
		profile("every figure combined over an end's 5-minute windows", edge, v1.Range{Start: day.End.Add(-time.Millisecond), End: day.End.Add(-time.Millisecond), Step: time.Hour})
		both := usage.Window{Start: start, End: day.End, Step: scrape}
		src := *s
		src.provenance = &provenanceCounts{}
		two := median(func() error {
			return src.StreamBuckets(ctx, both, time.Hour, func(*usage.Bucket) error { return nil })
		})
		if p := src.BucketProvenance(); p.HourlyWindows == 0 || p.ComputedHours != 0 {
			b.Fatalf("provenance %+v: the two days were not read from the hourly rules", p)
		}
		b.Logf("hourly   StreamBuckets over both days: %.3f s, %.1f ms per device-day; gpupack's own CPU %.3f s, %.3f ms per added device-day", two.Seconds(), two.Seconds()/float64(2*gpus)*1000, cpu.Seconds(), (cpu-dayCPU).Seconds()/float64(gpus)*1000)
		b.ReportMetric((cpu-dayCPU).Seconds()/float64(gpus)*1000, "cpu-ms/added-device-day")
		// The whole of report --accounting hourly --format json in this
		// process (app.Measure's steps, which this package cannot
		// import): the buckets streamed into the account, the pods, the
		// report and its JSON, over one day and both. Answers read by
		// client_golang (the reference) and by decodeMatrix, side by side.
		for _, decoder := range []struct {
			name    string
			answers answerReader
		}{{"client_golang", clientDecoding{}}, {"decodeMatrix", nil}} {
			src := s.readingBy(referencePaths{answers: decoder.answers})
			src.provenance = &provenanceCounts{}
			var reportCPU [2]time.Duration
			for i, w := range []usage.Window{day, both} {
				phases := make([]time.Duration, len(reportPhases))
				wall := median(func() error { return hourlyReport(ctx, b, src, w, phases) })
				reportCPU[i] = cpu
				var split []string
				for j, p := range phases {
					split = append(split, fmt.Sprintf("%s %.3f s", reportPhases[j], p.Seconds()/3))
				}
				b.Logf("report   over %s, answers read by %s: %.3f s, gpupack's own CPU %.3f s (mean of the 3: %s)", w.End.Sub(w.Start), decoder.name, wall.Seconds(), cpu.Seconds(), strings.Join(split, ", "))
			}
			perDeviceDay := (reportCPU[1] - reportCPU[0]).Seconds() / float64(gpus) * 1000
			b.Logf("report   answers read by %s: gpupack's own CPU per added day %.3f s, %.3f ms per added device-day", decoder.name, (reportCPU[1] - reportCPU[0]).Seconds(), perDeviceDay)
			b.ReportMetric(perDeviceDay, "report-cpu-ms/added-device-day-"+decoder.name)
		}
		// GPUPACK_BENCH_REPORT_PROFILE=file: a CPU profile of ten reports
		// over both days (answers read by decodeMatrix), nothing else.
		if file := os.Getenv("GPUPACK_BENCH_REPORT_PROFILE"); file != "" {
			f, err := os.Create(file)
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				b.Fatalf("%v (run without -cpuprofile)", err)
			}
			phases := make([]time.Duration, len(reportPhases))
			for range 10 {
				if err := hourlyReport(ctx, b, s, both, phases); err != nil {
					b.Fatal(err)
				}
			}
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
		}
		// What else a report reads per window, over one day and both.
		for _, w := range []usage.Window{day, both} {
			health := median(func() error { _, err := s.LoadHealth(ctx, w); return err })
			healthCPU := cpu
			meta := median(func() error { _, err := s.LoadMeta(ctx, w, nil, time.Hour); return err })
			b.Logf("over %s: LoadHealth %.3f s (own CPU %.3f s), LoadMeta %.3f s (own CPU %.3f s)", w.End.Sub(w.Start), health.Seconds(), healthCPU.Seconds(), meta.Seconds(), cpu.Seconds())
		}
	}
}

// timedQueryRange runs query over r against the Prometheus at url and says
// how long Prometheus took to answer (query and transfer) and how long
// decoding its JSON took, the bytes and the points.
func timedQueryRange(ctx context.Context, url, query string, r v1.Range) (fetch, decode time.Duration, n, points int, err error) {
	form := neturl.Values{"query": {query}, "start": {strconv.FormatFloat(float64(r.Start.UnixMilli())/1000, 'f', 3, 64)},
		"end": {strconv.FormatFloat(float64(r.End.UnixMilli())/1000, 'f', 3, 64)}, "step": {strconv.FormatFloat(r.Step.Seconds(), 'f', -1, 64)}}
	t0 := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/api/v1/query_range", strings.NewReader(form.Encode()))
	if err != nil {
		return 0, 0, 0, 0, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	fetch = time.Since(t0)
	t0 = time.Now()
	var answer struct {
		Status string `json:"status"`
		Data   struct {
			Result model.Matrix `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &answer); err != nil || answer.Status != "success" {
		return 0, 0, 0, 0, fmt.Errorf("query %s: %v: %.200s", query, err, body)
	}
	decode = time.Since(t0)
	for _, ss := range answer.Data.Result {
		points += len(ss.Values)
	}
	return fetch, decode, len(body), points, nil
}

// TestRecordedCovers answers the check query with the devices recorded
// and sampled in each hour of a 3-hour chunk, and checks that the rules
// are read only where they hold every hour, for at least as many devices
// as were sampled, and never for a report at another step or a bucket
// shorter than an hour.
func TestRecordedCovers(t *testing.T) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		// Per hour, "" for no point: the devices recorded, those recorded
		// with checkMetric, and those with it at the hour's middle. Where
		// checked is nil, it is recorded.
		recorded, checked, raw []string
		bucket                 time.Duration
		want                   bool
	}{
		"every hour recorded":           {recorded: []string{"4", "4", "5"}, raw: []string{"4", "4", "5"}, want: true},
		"more recorded than sampled":    {recorded: []string{"4", "4", "4"}, raw: []string{"3", "", "4"}, want: true},
		"an hour before the rules":      {recorded: []string{"", "4", "4"}, raw: []string{"4", "4", "4"}},
		"a device the rules missed":     {recorded: []string{"4", "3", "4"}, raw: []string{"4", "4", "4"}},
		"an hour with nothing recorded": {recorded: []string{"4", "0", "4"}, raw: []string{"4", "", "4"}},
		"no rules":                      {raw: []string{"4", "4", "4"}},
		"a partial hour is never read":  {recorded: []string{"4", "4", "4"}, raw: []string{"4", "4", "4"}, bucket: 30 * time.Minute},
		// A device recorded without its framebuffer series, while another
		// that has one was missed: as many devices, but not the same.
		"the checked metric's device missed": {recorded: []string{"4", "4", "4"}, checked: []string{"4", "3", "4"}, raw: []string{"4", "4", "4"}},
		"a fleet without the checked metric": {recorded: []string{"4", "4", "4"}, checked: []string{"", "", ""}, raw: []string{"", "", ""}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			bucket := cmp.Or(tc.bucket, time.Hour)
			var queries []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if err := r.ParseForm(); err != nil {
					t.Error(err)
				}
				queries = append(queries, r.Form.Get("query"))
				series := func(kind string, values []string) string {
					var pts []string
					for i, v := range values {
						if v != "" {
							pts = append(pts, fmt.Sprintf(`[%.3f,"%s"]`, float64(start.Add(time.Duration(i+1)*bucket).UnixMilli()-1)/1000, v))
						}
					}
					if len(pts) == 0 {
						return ""
					}
					return fmt.Sprintf(`{"metric":{"gpupack_count":%q},"values":[%s]}`, kind, strings.Join(pts, ","))
				}
				var result []string
				checked := tc.checked
				if checked == nil {
					checked = tc.recorded
				}
				for _, s := range []string{series("recorded", tc.recorded), series("recorded_checked", checked), series("raw", tc.raw)} {
					if s != "" {
						result = append(result, s)
					}
				}
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"status":"success","data":{"resultType":"matrix","result":[%s]}}`, strings.Join(result, ","))
			}))
			defer srv.Close()
			s, err := New(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			r := v1.Range{Start: start.Add(bucket - time.Millisecond), End: start.Add(3*bucket - time.Millisecond), Step: bucket}
			got, err := s.recordedCovers(context.Background(), r, 30*time.Second, bucket)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("covered = %v, want %v (queries %q)", got, tc.want, queries)
			}
			if len(queries) == 1 && !strings.Contains(queries[0], `gpupack_step="30s"`) {
				t.Errorf("the check %s does not select the rules of the report's step", queries[0])
			}
		})
	}
}

// TestPlanHourly answers the query for the hourly rules' windows with
// evaluation times at an offset, one series per Prometheus that evaluated
// them (a replica label apart, as a federating query engine answers), and
// checks that a window is read from them only where each one's lie 1 h
// apart over all of it and leave less than an hour at each end, which
// windows are wholly inside it, and that each Prometheus is read on its
// own windows, by its own labels.
func TestPlanHourly(t *testing.T) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	w := usage.Window{Start: start, End: start.Add(6 * time.Hour), Step: 30 * time.Second}
	// evaluations at start + offset + k hours, k in [from, to), less skip.
	evals := func(offset time.Duration, from, to int, skip ...int) []time.Time {
		var out []time.Time
		for k := from; k < to; k++ {
			if !slices.Contains(skip, k) {
				out = append(out, start.Add(offset+time.Duration(k)*time.Hour))
			}
		}
		return out
	}
	// shard is what a Prometheus' plan should be: the matchers of its
	// labels, its first window's end from start, and how many windows.
	type shard struct {
		labels string
		first  time.Duration
		n      int
	}
	cases := map[string]struct {
		series [][]time.Time
		want   []shard // none for no plan
	}{
		// Evaluated at :17, a window ends at :12: those ending 1:12..5:12
		// are inside, the head [0:00, 0:12] and the tail after 5:12 not.
		"an offset":         {series: [][]time.Time{evals(17*time.Minute, -1, 8)}, want: []shard{{`replica="0"`, time.Hour + 12*time.Minute, 5}}},
		"on the hour's end": {series: [][]time.Time{evals(time.Hour+5*time.Minute-time.Millisecond, -1, 7)}, want: []shard{{`replica="0"`, time.Hour - time.Millisecond, 6}}},
		"an hour missing":   {series: [][]time.Time{evals(17*time.Minute, -1, 8, 3)}},
		"installed later":   {series: [][]time.Time{evals(17*time.Minute, 2, 8)}},
		"stopped before":    {series: [][]time.Time{evals(17*time.Minute, -1, 5)}},
		"two Prometheus, two offsets": {series: [][]time.Time{evals(17*time.Minute, -1, 8), evals(40*time.Minute, -1, 8)}, want: []shard{
			{`replica="0"`, time.Hour + 12*time.Minute, 5},
			{`replica="1"`, time.Hour + 35*time.Minute, 5},
		}},
		"one of two installed later": {series: [][]time.Time{evals(17*time.Minute, -1, 8), evals(40*time.Minute, 2, 8)}},
		"no hourly rules":            {},
		"the offset changed":         {series: [][]time.Time{append(evals(17*time.Minute, -1, 3), evals(40*time.Minute, 3, 8)...)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				if err := r.ParseForm(); err != nil {
					t.Error(err)
				}
				q := r.Form.Get("query")
				if !strings.Contains(q, hourlyDevices) || !strings.Contains(q, `gpupack_step="30s"`) {
					t.Errorf("query %s: want the hourly devices of the report's step", q)
				}
				var result []string
				for i, ts := range tc.series {
					var pts []string
					for _, e := range ts {
						pts = append(pts, fmt.Sprintf(`[%.3f,"16"]`, float64(e.UnixMilli())/1000))
					}
					result = append(result, fmt.Sprintf(`{"metric":{"__name__":%q,%q:"30s","replica":"%d"},"values":[%s]}`, hourlyDevices, StepLabel, i, strings.Join(pts, ",")))
				}
				rw.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(rw, `{"status":"success","data":{"resultType":"matrix","result":[%s]}}`, strings.Join(result, ","))
			}))
			defer srv.Close()
			s, err := New(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := s.planHourly(context.Background(), w)
			if err != nil {
				t.Fatal(err)
			}
			var got []shard
			if plan != nil {
				got = []shard{}
				for _, sh := range plan.shards {
					got = append(got, shard{sh.sel.shard, sh.ends[0].Sub(start), len(sh.ends)})
					for i := 1; i < len(sh.ends); i++ {
						if d := sh.ends[i].Sub(sh.ends[i-1]); d != time.Hour {
							t.Errorf("%s: windows %s apart; want 1h", sh.sel.shard, d)
						}
					}
				}
			}
			if diff := gocmp.Diff(tc.want, got, gocmp.AllowUnexported(shard{})); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestShardQueries checks that each Prometheus' windows are read by its
// own labels: the per-hour and combined queries of a shard select its
// recorded series and no other's, and a Prometheus without the label that
// another has is told apart by its empty value.
func TestShardQueries(t *testing.T) {
	sel, err := ParseSelector(`job="dcgm-exporter"`)
	if err != nil {
		t.Fatal(err)
	}
	s := &Source{Selector: sel}
	m := model.Matrix{
		{Metric: model.Metric{model.MetricNameLabel: hourlyDevices, StepLabel: "30s", "cluster": "a"}},
		{Metric: model.Metric{model.MetricNameLabel: hourlyDevices, StepLabel: "30s"}},
	}
	want := []string{`cluster="a"`, `cluster=""`}
	for i, ss := range m {
		sh := s.shardOf(ss.Metric, m)
		if sh.sel.shard != want[i] {
			t.Errorf("shard of %v: matchers %q; want %q", ss.Metric, sh.sel.shard, want[i])
		}
		combined, err := combinedQueries(30*time.Second, sh.sel, time.Hour, dailyFigures(), RecordedHourName)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range append(hourlyQueries(30*time.Second, sh.sel), combined...) {
			if !strings.Contains(q, `gpupack_selector="job=\"dcgm-exporter\"", `+want[i]) {
				t.Errorf("query %s: want the shard's %s beside the report's selector label", q, want[i])
			}
		}
	}
}

// ownCPU is the CPU time (user and system) this process has used so far.
func ownCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportPhases are hourlyReport's steps, whose CPU it adds up.
var reportPhases = []string{"buckets read and accounted", "pods and health read", "report", "JSON"}

// hourlyReport does in this process what report --accounting hourly
// --format json does over w: the buckets streamed into the account, the
// pods' times, the health, the report and its JSON. It adds the CPU of
// each step (this process's, the steps being sequential) to cpu.
func hourlyReport(ctx context.Context, b *testing.B, s *Source, w usage.Window, cpu []time.Duration) error {
	c0 := ownCPU(b)
	step := func(i int) {
		c := ownCPU(b)
		cpu[i] += c - c0
		c0 = c
	}
	acct, err := usage.NewBucketAccount(w.Start, w.End)
	if err != nil {
		return err
	}
	if err := s.StreamBuckets(ctx, w, time.Hour, acct.Add); err != nil {
		return err
	}
	step(0)
	d, err := s.LoadMeta(ctx, w, nil, time.Hour)
	if err != nil {
		return err
	}
	health, err := s.LoadHealth(ctx, w)
	if err != nil {
		return err
	}
	step(1)
	r, err := acct.Report(usage.Pricing{Catalogue: gpu.Default(), NodeLabels: d.NodeLabels}, d.Pods, d.App, time.Hour)
	if err != nil {
		return err
	}
	r.Health = health
	step(2)
	enc := json.NewEncoder(io.Discard)
	enc.SetIndent("", "  ") // as report --format json writes it
	err = enc.Encode(r)
	step(3)
	return err
}

// TestRecordedCoversMissedDevice records the rules over a day of a real
// Prometheus, then loads a node's day that the rules never saw (as when
// remote-written samples arrive after the rules ran), and checks that the
// check's real queries read the day from the rules before and refuse it
// after.
func TestRecordedCoversMissedDevice(t *testing.T) {
	if testing.Short() {
		t.Skip("backfills and starts a real Prometheus")
	}
	const scrape = time.Minute
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fleet, err := gpusim.Fleet(4, 1, 3, gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	prom := testcluster.FleetHistory(t, fleet, start, scrape, gpusim.Faults{})
	day := fleet.Duration.D()
	file := rulesFile(t, scrape)
	prom.BackfillRules(file, start, start.Add(day+time.Hour))
	s, err := New(prom.URL)
	if err != nil {
		t.Fatal(err)
	}
	r := v1.Range{Start: start.Add(time.Hour - time.Millisecond), End: start.Add(day - time.Millisecond), Step: time.Hour}
	if ok, err := s.recordedCovers(t.Context(), r, scrape, time.Hour); err != nil || !ok {
		t.Fatalf("the recorded day: covered %v (%v), want true", ok, err)
	}

	late, err := gpusim.Parse([]byte(fmt.Sprintf("duration: 24h\nnodes: [{name: late-node, model: %q, gpus: 1}]\n", fleet.Nodes[0].Model)), "late node", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	om := filepath.Join(t.TempDir(), "late.om")
	f, err := os.Create(om)
	if err != nil {
		t.Fatal(err)
	}
	if err := late.WriteOpenMetrics(f, start, 0, day, scrape, gpusim.Faults{}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	prom.Stop()
	testcluster.Backfill(t, prom.DataDir(), om, day)
	prom.Restart()
	if ok, err := s.recordedCovers(t.Context(), r, scrape, time.Hour); err != nil || ok {
		t.Errorf("a node the rules never saw: covered %v (%v), want false", ok, err)
	}
}

// TestPieceSetEmitsInKeyOrder files the same points in two orders, as
// queries that answer in any order do, and checks that the pieces are
// handed on in one order, that of their keys, so that a report's sums are
// the same from one run to the next.
func TestPieceSetEmitsInKeyOrder(t *testing.T) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	fig := func(name string) *bucketFigure {
		for i := range bucketFigures {
			if bucketFigures[i].name == name {
				return &bucketFigures[i]
			}
		}
		t.Fatalf("no figure %q", name)
		return nil
	}
	held, sampled := fig("held steps"), fig("sampled steps")
	series := func(node, pod string, at time.Time) *model.SampleStream {
		m := model.Metric{"Hostname": model.LabelValue(node), "gpu": "0", "UUID": model.LabelValue("GPU-" + node)}
		if pod != "" {
			m["namespace"], m["pod"], m["container"] = "ns", model.LabelValue(pod), "main"
		}
		return &model.SampleStream{Metric: m, Values: []model.SamplePair{{Timestamp: model.TimeFromUnixNano(at.UnixNano()), Value: 10}}}
	}
	type point struct {
		node, pod string
		piece     int
		hour      int
	}
	points := []point{
		{"n2", "b", pieceHourly, 1}, {"n1", "a", pieceHourly, 0}, {"n1", "", pieceHourly, 0}, {"n2", "b", pieceDaily, 0},
		{"n1", "a", pieceHourly, 1}, {"n2", "", pieceHead, 0}, {"n1", "c", pieceHourly, 0}, {"n2", "", pieceTail, 2},
	}
	emitted := func(order []int) []string {
		p := newPieceSet(30*time.Second, HourWindow)
		for _, i := range order {
			pt := points[i]
			f := held
			if pt.pod == "" {
				f = sampled
			}
			at := start.Add(time.Duration(pt.hour) * time.Hour)
			p.file(model.Matrix{series(pt.node, pt.pod, at)}, func(*model.SampleStream, time.Time) (int, time.Time, *bucketFigure) {
				return pt.piece, at, f
			})
		}
		var out []string
		if err := p.emit(func(b *usage.Bucket) error {
			out = append(out, fmt.Sprintf("%s %s %s", b.Start.Format("15h"), b.Device.Node, b.Owner.Pod))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	first := emitted([]int{0, 1, 2, 3, 4, 5, 6, 7})
	if len(first) != len(points) {
		t.Fatalf("%d pieces handed on, want %d: %q", len(first), len(points), first)
	}
	for _, order := range [][]int{{7, 6, 5, 4, 3, 2, 1, 0}, {3, 0, 6, 1, 7, 2, 5, 4}} {
		if got := emitted(order); !slices.Equal(got, first) {
			t.Errorf("filed in the order %v, handed on %q; filed in key order, %q", order, got, first)
		}
	}
	want := []string{"00h n2 ", "00h n1 ", "00h n1 a", "00h n1 c", "01h n1 a", "01h n2 b", "00h n2 b", "02h n2 "}
	if !slices.Equal(first, want) {
		t.Errorf("handed on %q, want by piece, then hour, device and owner: %q", first, want)
	}
}

// TestStreamHourlyStopsAtAFailedDay answers the hourly path's queries over
// three days, read two days to a group, and fails those of the third day
// (its group's): StreamBuckets must return the failure, having handed on
// the first two days' pieces (the daily figures of both read in one range
// query at a one-day step) and nothing of the third's (whose queries had
// begun beside the second day's).
func TestStreamHourlyStopsAtAFailedDay(t *testing.T) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	w := usage.Window{Start: start, End: start.Add(72 * time.Hour), Step: 30 * time.Second}
	thirdDay := start.Add(49 * time.Hour) // the third chunk's windows are evaluated from 49:17
	var mu sync.Mutex
	failed, multiDay := 0, 0
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Error(err)
		}
		q := r.Form.Get("query")
		if r.Form.Get("step") == "86400" && r.Form.Get("end") != r.Form.Get("start") {
			mu.Lock()
			multiDay++
			mu.Unlock()
		}
		at := func(name string) time.Time {
			f, err := strconv.ParseFloat(r.Form.Get(name), 64)
			if err != nil {
				t.Errorf("query %s: %s %q: %v", q, name, r.Form.Get(name), err)
			}
			return time.UnixMilli(int64(f * 1000)).UTC()
		}
		var result []string
		points := func(from, to time.Time, step time.Duration, v string) string {
			var pts []string
			for t := from; !t.After(to); t = t.Add(step) {
				pts = append(pts, fmt.Sprintf(`[%.3f,%q]`, float64(t.UnixMilli())/1000, v))
			}
			return strings.Join(pts, ",")
		}
		switch {
		case strings.Contains(q, hourlyDevices):
			result = append(result, fmt.Sprintf(`{"metric":{"__name__":%q},"values":[%s]}`, hourlyDevices, points(start.Add(-43*time.Minute), start.Add(74*time.Hour), time.Hour, "1")))
		case strings.Contains(q, "gpupack_count"):
			from, to := at("start"), at("end")
			for _, kind := range []string{"recorded", "recorded_checked", "raw"} {
				result = append(result, fmt.Sprintf(`{"metric":{"gpupack_count":%q},"values":[%s]}`, kind, points(from, to, time.Hour, "1")))
			}
		case !at("start").Before(thirdDay) && at("start").Before(thirdDay.Add(24*time.Hour)):
			mu.Lock()
			failed++
			mu.Unlock()
			rw.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(rw, `{"status":"error","errorType":"unavailable","error":"the third day is not there"}`)
			return
		default:
			result = append(result, fmt.Sprintf(`{"metric":{"Hostname":"n1","gpu":"0","UUID":"GPU-1","namespace":"ns","pod":"p","container":"main"},"values":[%s]}`, points(at("start"), at("end"), time.Hour, "10")))
		}
		rw.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(rw, `{"status":"success","data":{"resultType":"matrix","result":[%s]}}`, strings.Join(result, ","))
	}))
	defer srv.Close()
	s, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	s = s.readingBy(referencePaths{daysPerGroup: 2})
	var handed []*usage.Bucket
	err = s.StreamBuckets(t.Context(), w, time.Hour, func(b *usage.Bucket) error {
		handed = append(handed, b)
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "the third day is not there") {
		t.Fatalf("StreamBuckets: %v; want the third day's failure", err)
	}
	if failed == 0 {
		t.Fatal("no query of the third day was sent")
	}
	if want := len(dailyFigures()); multiDay != want {
		t.Errorf("%d queries of several days at a one-day step; want the %d daily figures of the first two (whole) days, a query each", multiDay, want)
	}
	if p := s.BucketProvenance(); p.HourlyWindows == 0 {
		t.Fatalf("provenance %+v: the hourly rules were not read", p)
	}
	secondDay := 0
	for _, b := range handed {
		if !b.Start.Before(start.Add(48 * time.Hour)) {
			t.Errorf("a piece of %s handed on after the third day failed", b.Start)
		}
		if !b.Start.Before(start.Add(24 * time.Hour)) {
			secondDay++
		}
	}
	if len(handed) == 0 || secondDay == 0 {
		t.Errorf("%d pieces handed on, %d of the second day; want the first two days'", len(handed), secondDay)
	}
}

// BenchmarkHoldFleet builds the fleet BenchmarkRecordedQueries reads
// (GPUPACK_BENCH_GPUS GPUs, GPUPACK_BENCH_HOLD_DAYS days, default 2, at
// 30 s scrapes, both levels of the rules recorded, the blocks merged) and
// holds its Prometheus open for runs of the real command against it,
// such as two builds alternating on the same history:
//
//	gpupack report --prometheus URL --end END --window 48h --accounting hourly --format json
//
// It writes "URL GPUS START END DATADIR" to the file GPUPACK_BENCH_HOLD
// names and returns once FILE.stop exists (or after 3 hours).
func BenchmarkHoldFleet(b *testing.B) {
	file := os.Getenv("GPUPACK_BENCH_HOLD")
	if file == "" || os.Getenv("GPUPACK_E2E") == "" {
		b.Skip("set GPUPACK_E2E=1 and GPUPACK_BENCH_HOLD=file: holds a backfilled Prometheus open")
	}
	days := testcluster.EnvInt(b, "GPUPACK_BENCH_HOLD_DAYS", 2)
	const scrape = 30 * time.Second
	gpus, start, prom := benchFleet(b, scrape, days)
	end := start.Add(time.Duration(days) * 24 * time.Hour)
	recordLevels(b, prom, scrape, start, end.Add(time.Hour))
	prom.WaitCompacted()
	if err := os.WriteFile(file, fmt.Appendf(nil, "%s %d %s %s %s\n", prom.URL, gpus, start.Format(time.RFC3339), end.Format(time.RFC3339), prom.DataDir()), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Logf("Prometheus at %s holds %d GPUs x %d days from %s; create %s.stop to end", prom.URL, gpus, days, start.Format(time.RFC3339), file)
	for deadline := time.Now().Add(3 * time.Hour); time.Now().Before(deadline); time.Sleep(time.Second) {
		if _, err := os.Stat(file + ".stop"); err == nil {
			break
		}
	}
	for b.Loop() {
	}
}

// TestBackfillRulesInSlices records the rules over the same day in one go
// and in 13-hour slices (as testcluster records a month, 4 days at a
// time), and checks that the buckets read from them are the same.
func TestBackfillRulesInSlices(t *testing.T) {
	if testing.Short() {
		t.Skip("backfills and starts two real Prometheus servers")
	}
	const scrape = time.Minute
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fleet, err := gpusim.Fleet(4, 1, 5, gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	file := rulesFile(t, scrape)
	day := usage.Window{Start: start, End: start.Add(fleet.Duration.D()), Step: scrape}
	read := func(slice time.Duration) []usage.Bucket {
		prom := testcluster.FleetHistory(t, fleet, start, scrape, gpusim.Faults{})
		prom.RuleSlice = slice
		prom.BackfillRules(file, day.Start, day.End.Add(time.Hour))
		s, err := New(prom.URL)
		if err != nil {
			t.Fatal(err)
		}
		var out []usage.Bucket
		if err := s.StreamBuckets(t.Context(), day, time.Hour, func(b *usage.Bucket) error {
			out = append(out, *b)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if p := s.BucketProvenance(); p.ComputedHours != 0 || p.RecordedHours == 0 {
			t.Fatalf("rules recorded in slices of %s: provenance %+v, want every hour read from the rules", slice, p)
		}
		return out
	}
	// Buckets are handed on in the order of their keys, whatever order
	// the queries answered in: compared index by index.
	whole, sliced := read(0), read(13*time.Hour)
	if len(whole) == 0 || len(whole) != len(sliced) {
		t.Fatalf("%d buckets from the rules recorded at once, %d from 13-hour slices", len(whole), len(sliced))
	}
	for i := range whole {
		if d := bucketDiff(sliced[i], whole[i]); d != "" {
			t.Errorf("bucket %s %s %s:%s", whole[i].Start.Format(time.TimeOnly), whole[i].Device.Key(), whole[i].Owner.Pod, d)
		}
	}
}

// TestHourlyDailyGroups reads three days of a fleet from the hourly
// rules with the daily figures read a day to a query and a group of days
// to a query (a range query at a one-day step for the whole days of
// hourly windows, two or three of them, another for a last day of
// fewer): the buckets must be the same.
func TestHourlyDailyGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("backfills and starts a real Prometheus")
	}
	const scrape = time.Minute
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fleet, err := gpusim.Fleet(4, 3, 5, gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	w := usage.Window{Start: start, End: start.Add(fleet.Duration.D()), Step: scrape}
	prom := testcluster.FleetHistory(t, fleet, start, scrape, gpusim.Faults{})
	recordLevels(t, prom, scrape, w.Start, w.End.Add(time.Hour))
	s, err := New(prom.URL)
	if err != nil {
		t.Fatal(err)
	}
	read := func(group int) []usage.Bucket {
		g := s.readingBy(referencePaths{daysPerGroup: group})
		g.provenance = &provenanceCounts{}
		var out []usage.Bucket
		if err := g.StreamBuckets(t.Context(), w, time.Hour, func(b *usage.Bucket) error {
			out = append(out, *b)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if p := g.BucketProvenance(); p.ComputedHours != 0 || p.HourlyWindows < 71 {
			t.Fatalf("daily figures %d days to a query: provenance %+v, want every hour read from the rules, 71 hourly windows or more", group, p)
		}
		return out
	}
	byDay, grouped := read(1), read(0)
	if len(byDay) == 0 || len(byDay) != len(grouped) {
		t.Fatalf("%d buckets with a query a day, %d with the days grouped", len(byDay), len(grouped))
	}
	daily := 0
	for i := range byDay {
		if d := bucketDiff(grouped[i], byDay[i]); d != "" {
			t.Errorf("bucket %s %s %s:%s", byDay[i].Start.Format(time.DateTime), byDay[i].Device.Key(), byDay[i].Owner.Pod, d)
		}
		if byDay[i].VRAMUsedMiB.Max.Known() {
			daily++
		}
	}
	if daily == 0 {
		t.Error("no bucket holds a daily figure (VRAM max)")
	}
}

// TestGroupDays checks how many days a query of the hourly path reads:
// a week for a small fleet, fewer as the fleet grows, so that a group
// holds no more than groupDeviceDays, and never none.
func TestGroupDays(t *testing.T) {
	var s Source
	for _, c := range []struct{ devices, want int }{{0, daysPerQuery}, {1, daysPerQuery}, {32, daysPerQuery}, {250, 4}, {400, 2}, {1000, 1}, {100000, 1}} {
		if got := s.groupDays(c.devices); got != c.want {
			t.Errorf("groupDays(%d devices) = %d, want %d", c.devices, got, c.want)
		}
		if got := s.groupDays(c.devices); got*c.devices > groupDeviceDays && got > 1 {
			t.Errorf("groupDays(%d devices) = %d: %d device-days, over %d", c.devices, got, got*c.devices, groupDeviceDays)
		}
	}
	if got := s.readingBy(referencePaths{daysPerGroup: 3}).groupDays(1000); got != 3 {
		t.Errorf("groupDays with daysPerGroup 3 = %d, want 3", got)
	}
}

// recordLevels records gpupack's rules for step over [from, to) into
// prom level by level (the hourly level is recorded from the first), as
// an operator backfills them, and returns how long each level took.
func recordLevels(tb testing.TB, prom *testcluster.Prometheus, step time.Duration, from, to time.Time) []time.Duration {
	tb.Helper()
	levels, err := RulesYAMLByLevel(step, Selector{})
	if err != nil {
		tb.Fatal(err)
	}
	var took []time.Duration
	for i, rules := range levels {
		file := filepath.Join(tb.TempDir(), fmt.Sprintf("gpupack-rules-%d.yaml", i))
		if err := os.WriteFile(file, rules, 0o644); err != nil {
			tb.Fatal(err)
		}
		t0 := time.Now()
		prom.BackfillRules(file, from, to)
		took = append(took, time.Since(t0))
	}
	return took
}

// rulesFile writes gpupack's rules for step (both levels, one file) into
// a file of the test's and returns its path.
func rulesFile(t *testing.T, step time.Duration) string {
	t.Helper()
	rules, err := RulesYAML(step, Selector{})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "gpupack-rules.yaml")
	if err := os.WriteFile(file, rules, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}
