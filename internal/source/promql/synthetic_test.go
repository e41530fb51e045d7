package promql

import (
	"bufio"
	"cmp"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/usage"
)

// syntheticFleet answers, over HTTP, the queries that `gpupack report
// --accounting hourly` sends where gpupack's two levels of rules hold the
// whole window, as Prometheus would answer them for a fleet of gpus GPUs
// over days days from start, at 30 s scrapes, each GPU held by six pods
// of four hours in turn every day (a pod per GPU and four hours): the
// hourly windows' devices, the check's counts, every figure combined over
// each day of hourly windows (one point per series and day), the per-hour
// figures as recorded, each end's figures from the 5-minute windows, and
// kube-state-metrics' pod times and owners.
// Every other query is answered with nothing (and counted in other). Its
// figures are those of a pod that held its GPU at every step, active half
// of them; it builds each answer as it writes it, so that it holds no
// month in memory.
type syntheticFleet struct {
	gpus, days int
	start      time.Time

	mu    sync.Mutex
	other []string // queries answered with nothing
}

const (
	synthPodsPerDay = 6
	synthPodHours   = 24 / synthPodsPerDay
	synthStepsHour  = 120 // 30 s steps
)

// synthDaily is a pod's figure over its four hours, or a device's over a
// day, by figure name.
func synthDaily(name string, owner bool, podStart time.Time) float64 {
	held := float64(synthPodHours * synthStepsHour)
	if !owner {
		held = 24 * synthStepsHour
	}
	switch name {
	case "held steps", "held share", "activity-known share", "activity samples", "owner DRAM steps", "owner power steps",
		"sampled steps", "device held steps", "power steps", "samples", "activity source":
		return held
	case "active share", "activity sum":
		return held / 2
	case "activity below idle":
		return held / 4
	case "activity bursts":
		return held / 8
	case "activity p95":
		return 0.92
	case "activity p50":
		return 0.5
	case "activity max":
		return 0.98
	case "owner VRAM p50", "VRAM p50":
		return 20000
	case "owner VRAM p95", "VRAM p95":
		return 30000
	case "owner VRAM max", "VRAM max":
		return 35000
	case "VRAM free p50", "VRAM free p95", "VRAM free max":
		return 45000
	case "owner DRAM sum":
		return held * 0.3
	case "owner power sum", "power sum":
		return held * 300
	case "owner energy", "energy":
		return held * 30 * 300
	case "first held":
		return float64(podStart.Unix())
	case "first use":
		return float64(podStart.Unix() + 60)
	}
	return 0 // counter resets, non-finite samples, sampled after a gap
}

func (f *syntheticFleet) deviceLabels(w *bufio.Writer, d int) {
	fmt.Fprintf(w, `"Hostname":"gpu-node-%04d","gpu":"%d","UUID":"GPU-%08x-1111-2222-3333-%012x","modelName":"NVIDIA A100-SXM4-80GB","%s":"30s"`, d/8, d%8, d, d, StepLabel)
}

// pod is the name of the k-th pod (of synthPodsPerDay) of device d on day.
func (f *syntheticFleet) pod(d, day, k int) string {
	return fmt.Sprintf("train-%07d-x7k2p", (day*f.gpus+d)*synthPodsPerDay+k)
}

func (f *syntheticFleet) ownerLabels(w *bufio.Writer, d, day, k int) {
	f.deviceLabels(w, d)
	fmt.Fprintf(w, `,"namespace":"team-%02d","pod":%q,"container":"main"`, d%20, f.pod(d, day, k))
}

var (
	synthNames = regexp.MustCompile(`gpupack:[a-z0-9_]+:(5m|1h)`)
	synthRange = regexp.MustCompile(`\[(\d+)ms\]`)
)

// figureOf is the figure a recorded name holds, and its level.
func figureOf(name string) (*bucketFigure, bool) {
	for i := range bucketFigures {
		if RecordedName(bucketFigures[i].name) == name {
			return &bucketFigures[i], true
		}
		if RecordedHourName(bucketFigures[i].name) == name {
			return &bucketFigures[i], false
		}
	}
	return nil, false
}

func (f *syntheticFleet) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	q := r.Form.Get("query")
	at := func(name string) time.Time {
		v, _ := strconv.ParseFloat(r.Form.Get(name), 64)
		return time.UnixMilli(int64(v * 1000)).UTC()
	}
	var body io.Writer = rw
	rw.Header().Set("Content-Type", "application/json")
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		rw.Header().Set("Content-Encoding", "gzip")
		gz, _ := gzip.NewWriterLevel(rw, gzip.BestSpeed)
		defer gz.Close()
		body = gz
	}
	w := bufio.NewWriterSize(body, 64<<10)
	defer w.Flush()
	instant := strings.HasSuffix(r.URL.Path, "/query")
	kind := "matrix"
	if instant && !strings.HasSuffix(q, "]") {
		kind = "vector"
	}
	fmt.Fprintf(w, `{"status":"success","data":{"resultType":%q,"result":[`, kind)
	defer fmt.Fprint(w, `]}}`)
	sep := ""
	series := func(labels func(), points func()) {
		fmt.Fprint(w, sep+`{"metric":{`)
		labels()
		fmt.Fprint(w, `},"values":[`)
		points()
		fmt.Fprint(w, `]}`)
		sep = ","
	}
	point := func(psep *string, t time.Time, v float64) {
		fmt.Fprintf(w, `%s[%.3f,"%s"]`, *psep, float64(t.UnixMilli())/1000, strconv.FormatFloat(v, 'g', -1, 64))
		*psep = ","
	}
	end := f.start.Add(time.Duration(f.days) * 24 * time.Hour)
	names := synthNames.FindAllString(q, -1)
	switch {
	case strings.Contains(q, hourlyDevices) && instant:
		series(func() { fmt.Fprintf(w, `"__name__":%q,"%s":"30s"`, hourlyDevices, StepLabel) }, func() {
			psep := ""
			for t := f.start.Add(hourLag); !t.After(end.Add(hourLag)); t = t.Add(time.Hour) {
				point(&psep, t, float64(f.gpus))
			}
		})
	case strings.Contains(q, "gpupack_count"):
		for _, k := range []string{"recorded", "recorded_checked", "raw"} {
			series(func() { fmt.Fprintf(w, `"gpupack_count":%q`, k) }, func() {
				psep := ""
				for t := at("start"); !t.After(at("end")); t = t.Add(time.Hour) {
					point(&psep, t, float64(f.gpus))
				}
			})
		}
	case !instant && strings.HasPrefix(q, "{__name__=~"):
		// The per-hour figures as recorded: a point per hour a pod held
		// its GPU, at the evaluation of the hourly window that ends then.
		for _, n := range strings.Split(q[len(`{__name__=~"`):strings.Index(q, `",`)], "|") {
			n = strings.ReplaceAll(n, `\\`, "")
			fig, _ := figureOf(n)
			if fig == nil || fig.name == "shared steps" {
				continue
			}
			from, to := at("start"), at("end")
			for day := 0; day < f.days; day++ {
				dayStart := f.start.Add(time.Duration(day) * 24 * time.Hour)
				for d := 0; d < f.gpus; d++ {
					for k := 0; k < synthPodsPerDay; k++ {
						podStart := dayStart.Add(time.Duration(k*synthPodHours) * time.Hour)
						if !podStart.Add(synthPodHours*time.Hour+hourLag).After(from) || podStart.Add(time.Hour+hourLag).After(to) {
							continue
						}
						series(func() {
							fmt.Fprintf(w, `"__name__":%q,`, n)
							f.ownerLabels(w, d, day, k)
						}, func() {
							psep := ""
							for h := 1; h <= synthPodHours; h++ {
								t := podStart.Add(time.Duration(h)*time.Hour + hourLag)
								if !t.Before(from) && !t.After(to) {
									point(&psep, t, synthDaily(fig.name, true, podStart)/synthPodHours)
								}
							}
						})
					}
				}
			}
		}
	case len(names) == 1 && !instant:
		fig, fiveMinute := figureOf(names[0])
		rng := synthRange.FindStringSubmatch(q)
		if fig == nil || fig.name == "shared steps" || fig.name == "device shared steps" || rng == nil || rng[1] == "1" {
			break
		}
		span, _ := strconv.ParseInt(rng[1], 10, 64)
		step, _ := strconv.ParseFloat(r.Form.Get("step"), 64)
		if step <= 0 {
			break
		}
		// At each time of the range, the figure combined over the span
		// before it: the pods that held their GPU in it, each with the
		// share of its hours inside; a device's points in one series.
		var times []time.Time
		for t := at("start"); !t.After(at("end")); t = t.Add(time.Duration(step) * time.Second) {
			times = append(times, t)
		}
		window := func(t time.Time) (lo, hi time.Time) {
			if fiveMinute {
				// The 5-minute windows evaluated in (t - span, t], at
				// multiples of 5 minutes, each over the 5 minutes before.
				last := t.Truncate(RecordWindow)
				first := t.Add(-time.Duration(span) * time.Millisecond).Truncate(RecordWindow).Add(RecordWindow)
				if first.After(last) {
					return t, t
				}
				return first.Add(-RecordWindow), last
			}
			return t.Add(-time.Duration(span)*time.Millisecond - time.Hour - hourLag), t.Add(-hourLag)
		}
		if !fig.owner {
			metrics := []string{""}
			switch fig.name {
			case "samples":
				metrics = usage.Metrics
			case "activity source":
				metrics = []string{usage.GREngineActive}
			}
			for d := 0; d < f.gpus; d++ {
				for _, m := range metrics {
					series(func() {
						f.deviceLabels(w, d)
						switch fig.name {
						case "samples":
							fmt.Fprintf(w, `,"metric":%q`, m)
						case "activity source":
							fmt.Fprintf(w, `,"source":%q`, m)
						}
					}, func() {
						psep := ""
						for _, t := range times {
							lo, hi := window(t)
							point(&psep, t, synthDaily(fig.name, false, t)*float64(hi.Sub(lo))/float64(24*time.Hour))
						}
					})
				}
			}
			break
		}
		for _, t := range times {
			lo, hi := window(t)
			for day := 0; day < f.days; day++ {
				dayStart := f.start.Add(time.Duration(day) * 24 * time.Hour)
				for k := 0; k < synthPodsPerDay; k++ {
					podStart := dayStart.Add(time.Duration(k*synthPodHours) * time.Hour)
					held := min(podStart.Add(synthPodHours*time.Hour).Sub(lo), hi.Sub(lo)) - max(podStart.Sub(lo), 0)
					if held <= 0 {
						continue
					}
					v := synthDaily(fig.name, true, podStart)
					switch fig.name {
					case "activity p95", "activity p50", "activity max", "owner VRAM p50", "owner VRAM p95", "owner VRAM max", "first held", "first use":
					default:
						v *= float64(held) / float64(synthPodHours*time.Hour)
					}
					for d := 0; d < f.gpus; d++ {
						series(func() { f.ownerLabels(w, d, day, k) }, func() { psep := ""; point(&psep, t, v) })
					}
				}
			}
		}
	case instant && strings.Contains(q, "kube_pod_"):
		// kube-state-metrics' times of every pod of the window, and its
		// owning Job: a vector of a sample per pod.
		offset := map[string]time.Duration{"kube_pod_created": -60 * time.Second, "kube_pod_status_scheduled_time": -50 * time.Second,
			"kube_pod_container_state_started": -20 * time.Second, "kube_pod_status_ready_time": -10 * time.Second, "kube_pod_status_container_ready_time": -10 * time.Second}
		for day := 0; day < f.days; day++ {
			for d := 0; d < f.gpus; d++ {
				for k := 0; k < synthPodsPerDay; k++ {
					podStart := f.start.Add(time.Duration(day*24+k*synthPodHours) * time.Hour)
					fmt.Fprintf(w, `%s{"metric":{"namespace":"team-%02d","pod":%q`, sep, d%20, f.pod(d, day, k))
					v := 1.0
					if strings.Contains(q, "kube_pod_owner") {
						fmt.Fprintf(w, `,"owner_kind":"Job","owner_name":"train-%07d"`, (day*f.gpus+d)*synthPodsPerDay+k)
					} else {
						for name, off := range offset {
							if strings.Contains(q, name+"[") {
								v = float64(podStart.Add(off).Unix())
							}
						}
					}
					fmt.Fprintf(w, `},"value":[%.3f,"%s"]}`, float64(at("time").UnixMilli())/1000, strconv.FormatFloat(v, 'g', -1, 64))
					sep = ","
				}
			}
		}
	default:
		f.mu.Lock()
		f.other = append(f.other, q)
		f.mu.Unlock()
	}
}

// TestSyntheticFleetReport runs the hourly path over a synthetic fleet's
// answers (syntheticFleet): 4 GPUs x 2 days, read in groups of one day,
// must account every pod's four hours at every step (but for the last
// 5-minute window of the pods that end with the window) from the
// per-hour figures and the tail's 5-minute windows, and hand on a piece
// of every hour.
func TestSyntheticFleetReport(t *testing.T) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	fleet := &syntheticFleet{gpus: 4, days: 2, start: start}
	srv := httptest.NewServer(fleet)
	defer srv.Close()
	s, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	s = s.readingBy(referencePaths{daysPerGroup: 1})
	w := usage.Window{Start: start, End: start.Add(48 * time.Hour), Step: 30 * time.Second}
	held := map[string]float64{}
	var ends []string
	err = s.StreamBuckets(t.Context(), w, time.Hour, func(b *usage.Bucket) error {
		if !b.Owner.IsZero() {
			held[b.Owner.Pod] += b.HeldShareSteps
		}
		if b.Start.Equal(start.Add(47 * time.Hour)) {
			ends = append(ends, b.Owner.Pod)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if p := s.BucketProvenance(); p.HourlyWindows == 0 {
		t.Fatalf("provenance %+v: the hourly rules were not read", p)
	}
	if want := 4 * 2 * synthPodsPerDay; len(held) != want {
		t.Errorf("%d pods held GPUs, want %d", len(held), want)
	}
	for pod, steps := range held {
		// The pods of the window's last four hours lose its last 5-minute
		// window, which is evaluated at the window's end, outside it.
		want := float64(synthPodHours * synthStepsHour)
		if n, _ := strconv.Atoi(pod[len("train-") : len("train-")+7]); n%synthPodsPerDay == synthPodsPerDay-1 && n >= fleet.gpus*synthPodsPerDay {
			want -= synthStepsHour / 12
		}
		if steps != want {
			t.Errorf("pod %s held its GPU %g steps, want %g", pod, steps, want)
		}
	}
	if len(ends) == 0 {
		t.Error("nothing handed on in the window's last hour (the tail, from the 5-minute windows)")
	}
	t.Logf("queries answered with nothing: %q", fleet.other)
}

// BenchmarkSyntheticMonth runs the real `gpupack report --accounting
// hourly --format json` against syntheticFleet's answers for
// GPUPACK_BENCH_GPUS GPUs (1,000) over GPUPACK_BENCH_DAYS days (30)
// (GPUPACK_BENCH_KEEP: where to keep the last report's JSON): the
// issue's size, which a real Prometheus cannot be given in a benchmark's
// time (recording the rules over it takes about a day). It
// measures gpupack's side at that size, all of it: decoding the answers,
// filing them, accounting, the report and its JSON, as gpupack's peak
// RSS (the process' ru_maxrss, which Linux starts from this process' RSS
// at the fork, logged beside it) and its CPU; the wall time includes the
// synthetic server's, on the same cores.
//
//	go test ./internal/source/promql -run XXX -bench SyntheticMonth -benchtime 1x -v -timeout 60m
func BenchmarkSyntheticMonth(b *testing.B) {
	gpus := testcluster.EnvInt(b, "GPUPACK_BENCH_GPUS", 1000)
	days := testcluster.EnvInt(b, "GPUPACK_BENCH_DAYS", 30)
	bin := os.Getenv("GPUPACK_BENCH_BINARY")
	if bin == "" {
		bin = filepath.Join(b.TempDir(), "gpupack")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/gpupack/gpupack/cmd/gpupack").CombinedOutput(); err != nil {
			b.Fatalf("go build gpupack: %v\n%s", err, out)
		}
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fleet := &syntheticFleet{gpus: gpus, days: days, start: start}
	srv := httptest.NewServer(fleet)
	defer srv.Close()
	end := start.Add(time.Duration(days) * 24 * time.Hour)
	// GPUPACK_BENCH_KEEP keeps the last report's JSON there, to compare
	// two builds' bytes.
	out := cmp.Or(os.Getenv("GPUPACK_BENCH_KEEP"), filepath.Join(b.TempDir(), "report.json"))
	var walls, cpus, rsss []float64
	for b.Loop() {
		f, err := os.Create(out)
		if err != nil {
			b.Fatal(err)
		}
		var stderr strings.Builder
		cmd := exec.Command(bin, "report", "--prometheus", srv.URL, "--accounting", "hourly", "--format", "json",
			"--window", (time.Duration(days) * 24 * time.Hour).String(), "--step", "30s", "--end", end.Format(time.RFC3339))
		cmd.Stdout, cmd.Stderr = f, &stderr
		t0 := time.Now()
		err = cmd.Run()
		wall := time.Since(t0)
		f.Close()
		if err != nil {
			b.Fatalf("gpupack report: %v\n%s", err, stderr.String())
		}
		if want := fmt.Sprintf("%d of %d hours read from gpupack's recording rules", days*24, days*24); exec.Command("grep", "-qF", want, out).Run() != nil {
			b.Fatalf("gpupack report does not say %q (%s):\n%s", want, out, stderr.String())
		}
		if os.Getenv("GPUPACK_BENCH_STDERR") != "" {
			b.Logf("gpupack's stderr:\n%s", stderr.String())
		}
		st, err := os.Stat(out)
		if err != nil {
			b.Fatal(err)
		}
		cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		rss := float64(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss) / 1024 // KiB on Linux
		walls, cpus, rsss = append(walls, wall.Seconds()), append(cpus, cpu.Seconds()), append(rsss, rss)
		b.Logf("%d GPUs x %d days: %s wall, %s of gpupack's CPU, %.0f MiB peak RSS, %d MB of JSON", gpus, days, wall.Round(time.Millisecond), cpu.Round(time.Millisecond), rss, st.Size()>>20)
	}
	median := func(xs []float64) float64 { slices.Sort(xs); return xs[len(xs)/2] }
	b.ReportMetric(median(walls), "s-wall")
	b.ReportMetric(median(cpus), "s-gpupack-cpu")
	b.ReportMetric(median(rsss), "MiB-gpupack-peak-rss")
	b.ReportMetric(median(cpus)*1000/float64(gpus*days), "ms-cpu/device-day")
	var self syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err == nil {
		b.Logf("this process' own peak RSS (the floor of the child's ru_maxrss): %d MiB", self.Maxrss>>10)
	}
	slices.Sort(fleet.other)
	b.Logf("queries answered with nothing: %d, %q", len(fleet.other), slices.Compact(fleet.other))
}
