package promsource

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
	"syscall"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/usage"
)

// TestRecordingRules checks that every bucket figure has one recording
// rule per level with a valid, distinct name in the level:metric:operations
// form (the 5-minute windows of the series, and the hourly windows of
// those that ended hourLag before), and that steps the windows cannot
// hold are refused.
func TestRecordingRules(t *testing.T) {
	f, err := RecordingRules(30 * time.Second)
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
		if want := len(bucketFigures) + i; n != want { // and the hourly devices
			t.Errorf("group %s: %d rules for %d bucket figures", f.Groups[i].Name, n, len(bucketFigures))
		}
	}
	for _, step := range []time.Duration{0, -time.Second, 7 * time.Second, 1500 * time.Millisecond, 10 * time.Minute} {
		if _, err := RecordingRules(step); err == nil || !strings.Contains(err.Error(), "divide") {
			t.Errorf("step %s: error %v; want one saying the step must divide 5m", step, err)
		}
	}
}

// TestRecordedAgreesWithBuckets backfills a day of a 16-GPU fleet (pods
// arriving and leaving mid-hour, time-sliced GPUs, a MIG GPU, NaNs on one
// device, an energy counter reset on another) into a real Prometheus,
// records gpupack's rules over it with promtool tsdb create-blocks-from
// rules (evaluated at the offsets Prometheus would evaluate them), and
// reads the buckets twice: from the recorded windows, and from the series
// as before (the reference). Totals per device and pod, energy, VRAM
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
	files := [][]byte{}
	if byLevel {
		var err error
		if files, err = RulesYAMLByLevel(scrape); err != nil {
			t.Fatal(err)
		}
	} else {
		rules, err := RulesYAML(scrape)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, rules)
	}
	// One hour past the history, so that the windows holding its last
	// steps are read too; the rules are recorded an hour further, so that
	// the hourly window that ends in that hour is recorded whatever the
	// group's evaluation offset.
	w := usage.Window{Start: day.Start, End: day.End.Add(time.Hour), Step: scrape}
	dir := t.TempDir()
	for i, rules := range files {
		file := filepath.Join(dir, fmt.Sprintf("gpupack-rules-%d.yaml", i))
		if err := os.WriteFile(file, rules, 0o644); err != nil {
			t.Fatal(err)
		}
		prom.BackfillRules(file, w.Start, w.End.Add(time.Hour))
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
	ref := *s
	ref.ignoreRecorded = true
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
	for _, d := range usage.Disagreements(computed, recorded, 0.01) {
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
//	GPUPACK_E2E=1 go test ./internal/promsource -run XXX -bench RecordedQueries -benchtime 1x -v
func BenchmarkRecordedQueries(b *testing.B) {
	if os.Getenv("GPUPACK_E2E") == "" {
		b.Skip("set GPUPACK_E2E=1: backfills and starts a real Prometheus")
	}
	const scrape, days = 30 * time.Second, 2
	gpus, start, prom := benchFleet(b, scrape, days)
	levels, err := RulesYAMLByLevel(scrape)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	for i, rules := range levels {
		file := filepath.Join(dir, fmt.Sprintf("gpupack-rules-%d.yaml", i))
		if err := os.WriteFile(file, rules, 0o644); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		prom.BackfillRules(file, start, start.Add(days*24*time.Hour+time.Hour))
		took := time.Since(t0)
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
			src := *s
			src.ignoreRecorded, src.ignoreHourly, src.provenance = path.computed, path.fiveOnly, &provenanceCounts{}
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
			q, err := recordedQuery(fig, scrape, time.Hour)
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
		if err != nil || plan == nil {
			b.Fatalf("the hourly rules do not hold the day: %v", err)
		}
		profile("the hourly figures over the day", hourlyQueries(scrape), v1.Range{Start: plan.ends[0].Add(hourLag), End: plan.ends[len(plan.ends)-1].Add(hourLag), Step: time.Hour})
		// The rest of the hourly path's day, query by query: the check's
		// two counts, and the figures combined over the day's windows
		// (and over an end's 5-minute windows, which a window's first
		// and last day read too).
		recordedCount, rawCount := checkCounts(scrape, time.Hour)
		profile("the check's recorded count over the day", []string{recordedCount}, r)
		profile("the check's raw count over the day", []string{rawCount}, r)
		last := plan.ends[len(plan.ends)-1]
		daily, err := combinedQueries(scrape, last.Sub(plan.ends[0]), dailyFigures(), RecordedHourName)
		if err != nil {
			b.Fatal(err)
		}
		profile("the daily figures combined over the day's windows", daily, v1.Range{Start: last.Add(hourLag), End: last.Add(hourLag), Step: time.Hour})
		edge, err := combinedQueries(scrape, 50*time.Minute, allFigures(), RecordedName)
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
		// process (usagefacts.FromPrometheusHourly's steps, which this
		// package cannot import): the buckets streamed into the account,
		// the pods, the report and its JSON, over one day and both.
		// Answers read by client_golang (as before) and by decodeMatrix,
		// side by side.
		for _, decoder := range []struct {
			name      string
			viaClient bool
		}{{"client_golang", true}, {"decodeMatrix", false}} {
			src := *s
			src.viaClient, src.provenance = decoder.viaClient, &provenanceCounts{}
			var reportCPU [2]time.Duration
			for i, w := range []usage.Window{day, both} {
				phases := make([]time.Duration, len(reportPhases))
				wall := median(func() error { return hourlyReport(ctx, b, &src, w, phases) })
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
		recorded, raw []string // per hour, "" for no point
		bucket        time.Duration
		want          bool
	}{
		"every hour recorded":           {recorded: []string{"4", "4", "5"}, raw: []string{"4", "4", "5"}, want: true},
		"more recorded than sampled":    {recorded: []string{"4", "4", "4"}, raw: []string{"3", "", "4"}, want: true},
		"an hour before the rules":      {recorded: []string{"", "4", "4"}, raw: []string{"4", "4", "4"}},
		"a device the rules missed":     {recorded: []string{"4", "3", "4"}, raw: []string{"4", "4", "4"}},
		"an hour with nothing recorded": {recorded: []string{"4", "0", "4"}, raw: []string{"4", "", "4"}},
		"no rules":                      {raw: []string{"4", "4", "4"}},
		"a partial hour is never read":  {recorded: []string{"4", "4", "4"}, raw: []string{"4", "4", "4"}, bucket: 30 * time.Minute},
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
				for _, s := range []string{series("recorded", tc.recorded), series("raw", tc.raw)} {
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
// evaluation times at an offset, and checks that a window is read from
// them only where they lie 1 h apart over all of it and leave less than
// an hour at each end, and which windows are wholly inside it.
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
	cases := map[string]struct {
		series    [][]time.Time
		wantFirst time.Duration // of the first window's end from start; 0 for no plan
		wantN     int
	}{
		// Evaluated at :17, a window ends at :12: those ending 1:12..5:12
		// are inside, the head [0:00, 0:12] and the tail after 5:12 not.
		"an offset":          {series: [][]time.Time{evals(17*time.Minute, -1, 8)}, wantFirst: time.Hour + 12*time.Minute, wantN: 5},
		"on the hour's end":  {series: [][]time.Time{evals(time.Hour+5*time.Minute-time.Millisecond, -1, 7)}, wantFirst: time.Hour - time.Millisecond, wantN: 6},
		"an hour missing":    {series: [][]time.Time{evals(17*time.Minute, -1, 8, 3)}},
		"installed later":    {series: [][]time.Time{evals(17*time.Minute, 2, 8)}},
		"stopped before":     {series: [][]time.Time{evals(17*time.Minute, -1, 5)}},
		"two groups":         {series: [][]time.Time{evals(17*time.Minute, -1, 8), evals(40*time.Minute, -1, 8)}},
		"no hourly rules":    {},
		"the offset changed": {series: [][]time.Time{append(evals(17*time.Minute, -1, 3), evals(40*time.Minute, 3, 8)...)}},
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
					result = append(result, fmt.Sprintf(`{"metric":{"__name__":%q,"replica":"%d"},"values":[%s]}`, hourlyDevices, i, strings.Join(pts, ",")))
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
			switch {
			case tc.wantN == 0 && plan != nil:
				t.Errorf("plan %v; want none", plan.ends)
			case tc.wantN > 0 && plan == nil:
				t.Errorf("no plan; want %d windows from %s", tc.wantN, tc.wantFirst)
			case tc.wantN > 0 && (len(plan.ends) != tc.wantN || !plan.ends[0].Equal(start.Add(tc.wantFirst))):
				t.Errorf("windows ending %v; want %d from %s", plan.ends, tc.wantN, start.Add(tc.wantFirst))
			}
		})
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
