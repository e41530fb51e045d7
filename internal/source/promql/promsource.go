// Package promql reads dcgm-exporter's series, kube-state-metrics' pod
// times and the user's application metrics from Prometheus' HTTP API
// (query_range) into usage's types. It is an edge: it may import the
// Prometheus client and net/http, and it holds no accounting logic.
package promql

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	neturl "net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/gpupack/gpupack/internal/util/mempolicy"
	"github.com/gpupack/gpupack/usage"
)

// Source queries one Prometheus server.
type Source struct {
	// shown is the server's URL as errors name it: Redacted.
	shown string
	api   v1.API
	// Memory says whether reading hands memory back to the operating
	// system between its phases: a one-shot command's
	// (mempolicy.OneShot) does for a large window; the zero value,
	// serve's, does not.
	Memory mempolicy.Policy
	// MaxAnswer is the most bytes of one answer that are read, counted
	// after decompression; a longer answer fails its query. Zero means
	// DefaultMaxAnswer.
	MaxAnswer int64
	// Selector narrows every query of dcgm-exporter's series (and of
	// gpupack's recorded ones, to those recorded with the same selector);
	// the zero Selector reads every series of their names.
	Selector Selector
	// client makes the URLs of the queries that http sends (do), whose
	// answers gpupack's own decoders read.
	client api.Client
	http   *http.Client
	// ref, nil in production, is set by tests only: the reference paths
	// that they compare gpupack's own with.
	ref *referencePaths
	// provenance counts how the buckets read so far were computed.
	provenance *provenanceCounts
}

// New connects to the Prometheus at url with no credentials but those
// in its userinfo: Open(url, Access{}).
func New(url string) (*Source, error) {
	return Open(url, Access{})
}

// Open connects to the Prometheus at url, sending every query with the
// credentials and headers of a and trusting its CA (see Access); nothing
// is sent until a query. It refuses what cannot work before anything is
// sent. Its errors, and every query's, name url Redacted.
func Open(url string, a Access) (*Source, error) {
	u, err := neturl.Parse(url)
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: %s; give a URL such as http://127.0.0.1:9090", Redacted(url), parseProblem(url, err))
	}
	if err := a.check(u.User != nil); err != nil {
		return nil, fmt.Errorf("prometheus %s: %w", Redacted(url), err)
	}
	rt, err := a.roundTripper()
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: %w", Redacted(url), err)
	}
	hc := &http.Client{Timeout: 60 * time.Second, Transport: rt}
	c, err := api.NewClient(api.Config{Address: url, Client: hc})
	if err != nil {
		redactURLError(err)
		return nil, fmt.Errorf("prometheus %s: %v; give a URL such as http://127.0.0.1:9090", Redacted(url), err)
	}
	return &Source{shown: Redacted(url), api: v1.NewAPI(c), client: c, http: hc, provenance: &provenanceCounts{}}, nil
}

// Data is what Load read.
type Data struct {
	Series []usage.Series
	App    []usage.AppSeries
	Pods   []usage.PodEvents
	// NodeLabels are kube-state-metrics' kube_node_labels by node, keys
	// without their label_ prefix (so "cloud.google.com/gke-spot" reads
	// "cloud_google_com_gke_spot"); empty without kube-state-metrics.
	NodeLabels map[string]map[string]string
}

// Load reads every DCGM metric usage knows over the window, the pods'
// life-cycle times from kube-state-metrics where present, and each
// application metric (name -> PromQL; results are matched to pods by their
// namespace and pod labels, to a namespace when they have no pod label).
// A window that usage.Window.Check refuses is refused before any query.
func (s *Source) Load(ctx context.Context, w usage.Window, app map[string]string) (*Data, error) {
	if err := w.Check(); err != nil {
		return nil, err
	}
	r := v1.Range{Start: w.Start, End: w.End.Add(-time.Millisecond), Step: w.Step}
	d := &Data{}
	for _, metric := range append(slices.Clone(usage.Metrics), usage.HealthMetrics...) {
		m, err := s.queryRange(ctx, s.Selector.of(metric), r)
		if err != nil {
			return nil, err
		}
		for _, ss := range m {
			d.Series = append(d.Series, usage.Series{Metric: metric, Device: device(ss.Metric), Owner: owner(ss.Metric), DRA: draHold(ss.Metric), Samples: samples(ss.Values)})
		}
	}
	if err := s.loadAgent(ctx, d, r); err != nil {
		return nil, err
	}
	if err := s.loadApp(ctx, d, app, func(q string) string { return q }, r, 0); err != nil {
		return nil, err
	}
	if err := s.loadContext(ctx, d, w); err != nil {
		return nil, err
	}
	return d, nil
}

// loadAgent reads the per-pod series of `gpupack agent` where it runs.
// They are read by name alone: the selector picks dcgm-exporter's job,
// and no other exporter writes these names.
func (s *Source) loadAgent(ctx context.Context, d *Data, r v1.Range) error {
	for _, metric := range usage.AgentMetrics {
		m, err := s.queryRange(ctx, metric+`{pod!=""}`, r)
		if err != nil {
			return err
		}
		for _, ss := range m {
			d.Series = append(d.Series, usage.Series{Metric: metric, Device: device(ss.Metric), Owner: owner(ss.Metric), Samples: samples(ss.Values)})
		}
	}
	return nil
}

// LoadMeta reads what Load reads besides the DCGM series, for the hourly
// path: the pods' life-cycle times, the node labels and each application
// metric as its mean over each bucket (a sample per bucket, at the
// bucket's start), computed by Prometheus at the window's step.
func (s *Source) LoadMeta(ctx context.Context, w usage.Window, app map[string]string, bucket time.Duration) (*Data, error) {
	if err := checkBucketWindow(w, bucket); err != nil {
		return nil, err
	}
	d := &Data{}
	mean := func(q string) string {
		return fmt.Sprintf("avg_over_time((%s)[%dms:%dms])", q, bucket.Milliseconds(), w.Step.Milliseconds())
	}
	r := v1.Range{Start: w.Start.Add(bucket - time.Millisecond), End: w.End.Add(-time.Millisecond), Step: bucket}
	if err := s.loadApp(ctx, d, app, mean, r, bucket-time.Millisecond); err != nil {
		return nil, err
	}
	if err := s.loadContext(ctx, d, w); err != nil {
		return nil, err
	}
	return d, nil
}

// loadApp reads each application metric over r, its query rewritten by
// wrap, each sample's time moved back by shift (to its bucket's start).
func (s *Source) loadApp(ctx context.Context, d *Data, app map[string]string, wrap func(string) string, r v1.Range, shift time.Duration) error {
	for name, query := range app {
		m, err := s.queryRange(ctx, wrap(query), r)
		if err != nil {
			return fmt.Errorf("application metric %q: %w", name, err)
		}
		for _, ss := range m {
			o := owner(ss.Metric)
			smp := samples(ss.Values)
			for i := range smp {
				smp[i].TimeMs -= shift.Milliseconds()
			}
			d.App = append(d.App, usage.AppSeries{Name: name, Namespace: o.Namespace, Pod: o.Pod, Samples: smp})
		}
	}
	return nil
}

// loadContext reads kube-state-metrics' pod times over the window and node
// labels at its end.
func (s *Source) loadContext(ctx context.Context, d *Data, w usage.Window) error {
	// A month of a fleet is a sample per pod in each answer: each is read
	// as it is decoded, and a pod's strings are kept once. The times are
	// gathered in a record a third of usage.PodEvents' size, and the
	// pods' events made once, at their number, when all are read, not
	// grown by copies beside the answer being read.
	type podRef struct{ namespace, pod string }
	type podTimes struct {
		ref      podRef
		workload string
		at       [len(podTimeFamilies)]float64
		read     [len(podTimeFamilies)]bool
	}
	var pods []podTimes
	index := map[podRef]int{} // into pods
	for f, ev := range podTimeFamilies {
		query := fmt.Sprintf("max by (namespace, pod) (%s_over_time(%s[%ds]))", ev.over, ev.metric, int(w.End.Sub(w.Start).Seconds())+1)
		err := s.eachSample(ctx, query, w.End, func(m model.Metric, v model.SampleValue) {
			ref := podRef{string(m["namespace"]), string(m["pod"])}
			i, ok := index[ref]
			if !ok {
				i = len(pods)
				index[ref] = i
				pods = append(pods, podTimes{ref: ref})
			}
			pods[i].at[f] = float64(v)
			pods[i].read[f] = true
		})
		if err != nil {
			return fmt.Errorf("pods' %s times from kube-state-metrics: %w", ev.metric, err)
		}
	}
	// The owner names the workload: a ReplicaSet's name less its
	// pod-template-hash is its Deployment's.
	owners := fmt.Sprintf(`max by (namespace, pod, owner_kind, owner_name) (last_over_time(%s[%ds]))`, podOwners, int(w.End.Sub(w.Start).Seconds())+1)
	err := s.eachSample(ctx, owners, w.End, func(m model.Metric, _ model.SampleValue) {
		if i, ok := index[podRef{string(m["namespace"]), string(m["pod"])}]; ok {
			pods[i].workload = Workload(string(m["owner_kind"]), string(m["owner_name"]))
		}
	})
	if err != nil {
		return fmt.Errorf("pods' owners from kube-state-metrics: %w", err)
	}
	// The events are one allocation (49 MB for a month of a fleet's
	// 180,000 pods), made after six answers of a sample per pod were read
	// and dropped: that memory is free but resident, in pieces too small
	// to hold it, and the heap would grow by its size beside them.
	s.Memory.HandBack(len(pods))
	d.Pods = slices.Grow(d.Pods, len(pods))
	for _, p := range pods {
		e := usage.PodEvents{Namespace: p.ref.namespace, Pod: p.ref.pod, Workload: p.workload}
		for f, ev := range podTimeFamilies {
			if p.read[f] {
				ev.set(&e, unixTime(p.at[f]))
			}
		}
		d.Pods = append(d.Pods, e)
	}
	vec, err := s.queryVector(ctx, KSMNodeLabels, w.End)
	if err != nil {
		return fmt.Errorf("node labels from kube-state-metrics: %w", err)
	}
	for _, smp := range vec {
		node := string(smp.Metric["node"])
		if d.NodeLabels == nil {
			d.NodeLabels = map[string]map[string]string{}
		}
		labels := map[string]string{}
		for k, v := range smp.Metric {
			if name, ok := strings.CutPrefix(string(k), "label_"); ok {
				labels[name] = string(v)
			}
		}
		d.NodeLabels[node] = labels
	}
	return nil
}

// Workload is the workload that a pod's controlling owner names: a
// ReplicaSet's name less its last "-" part (the pod-template-hash that a
// Deployment adds), any other owner's name as it is.
func Workload(ownerKind, ownerName string) string {
	if ownerKind == "ReplicaSet" {
		if i := strings.LastIndexByte(ownerName, '-'); i > 0 {
			return ownerName[:i]
		}
	}
	return ownerName
}

// queryRange runs a range query, as client_golang's QueryRange sends it
// (a form POST, a GET where the server refuses POST), and reads the
// answer with decodeMatrix.
func (s *Source) queryRange(ctx context.Context, query string, r v1.Range) (model.Matrix, error) {
	return s.queryRangeSharing(ctx, query, r, nil)
}

// queryRangeSharing is queryRange, its answer's series sharing the maps of
// the label sets that labels holds (and adding theirs), where labels is
// not nil: the series' maps must not be changed.
func (s *Source) queryRangeSharing(ctx context.Context, query string, r v1.Range, labels *labelSets) (model.Matrix, error) {
	if a := s.paths().answers; a != nil {
		return a.queryRange(ctx, s, query, r)
	}
	args := neturl.Values{"query": {query}, "start": {formatTime(r.Start)}, "end": {formatTime(r.End)},
		"step": {strconv.FormatFloat(r.Step.Seconds(), 'f', -1, 64)}}
	body, err := s.ask(ctx, "/api/v1/query_range", query, rangeWhen(r), args)
	if err != nil {
		return nil, err
	}
	m, err := decodeMatrixSharing(body, labels)
	if err != nil {
		return nil, s.fail(query, rangeWhen(r), err)
	}
	return m, nil
}

// ask sends args (with the query) to Prometheus' endpoint path as a form
// POST, and again as a GET where the server refuses POST (as client_golang
// falls back), and returns the body of a successful answer; where
// Prometheus answered its own error, or the HTTP status is not a success,
// the error says so (s.fail, with when).
func (s *Source) ask(ctx context.Context, path, query, when string, args neturl.Values) ([]byte, error) {
	u := s.client.URL(path, nil)
	req, err := http.NewRequest(http.MethodPost, u.String(), strings.NewReader(args.Encode()))
	if err != nil {
		return nil, s.fail(query, when, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, body, err := s.do(ctx, req)
	if err == nil && (resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotImplemented) {
		u.RawQuery = args.Encode()
		if req, err = http.NewRequest(http.MethodGet, u.String(), nil); err == nil {
			resp, body, err = s.do(ctx, req)
		}
	}
	if err != nil {
		return nil, s.fail(query, when, err)
	}
	if resp.StatusCode/100 != 2 {
		// Prometheus' own error, where the body is its JSON.
		var answer *answerError
		if _, err := decodeMatrix(body); errors.As(err, &answer) {
			return nil, s.fail(query, when, err)
		}
		return nil, s.fail(query, when, fmt.Errorf("HTTP %s: %.200s", resp.Status, body))
	}
	return body, nil
}

// formatTime writes t as client_golang does: seconds, a fraction where
// there is one.
func formatTime(t time.Time) string {
	return strconv.FormatFloat(float64(t.Unix())+float64(t.Nanosecond())/1e9, 'f', -1, 64)
}

// eachSample runs an instant query and calls f with each sample of the
// instant vector it answers, in order, as the answer is decoded (with
// decodeVector's checks): f's metric is reused for the next sample, so
// that a vector of a sample per pod of a month of a fleet is never held
// whole; f copies what it keeps (the strings it reads are its own).
func (s *Source) eachSample(ctx context.Context, query string, t time.Time, f func(m model.Metric, v model.SampleValue)) error {
	if a := s.paths().answers; a != nil {
		vec, err := a.queryVector(ctx, s, query, t)
		for _, smp := range vec {
			f(smp.Metric, smp.Value)
		}
		return err
	}
	body, err := s.askInstant(ctx, query, t)
	if err != nil {
		return err
	}
	if err := eachVectorSample(body, func(smp *model.Sample) { f(smp.Metric, smp.Value) }); err != nil {
		return s.fail(query, instantWhen(t), err)
	}
	return nil
}

// askInstant sends an instant query at t with ask.
func (s *Source) askInstant(ctx context.Context, query string, t time.Time) ([]byte, error) {
	return s.ask(ctx, "/api/v1/query", query, instantWhen(t), neturl.Values{"query": {query}, "time": {formatTime(t)}})
}

// queryVector runs an instant query at t whose answer must be an instant
// vector.
func (s *Source) queryVector(ctx context.Context, query string, t time.Time) (model.Vector, error) {
	if a := s.paths().answers; a != nil {
		return a.queryVector(ctx, s, query, t)
	}
	body, err := s.askInstant(ctx, query, t)
	if err != nil {
		return nil, err
	}
	vec, err := decodeVector(body)
	if err != nil {
		return nil, s.fail(query, instantWhen(t), err)
	}
	return vec, nil
}

// fail says which query failed and why: Prometheus' URL (Redacted, as
// is any URL that err names), the query (at
// most queryShown characters of it: its callers name the figure it
// reads), err (which names Prometheus' error type or the HTTP status)
// and when (a range's start, end and step, or an instant's time, as
// rangeWhen and instantWhen write it).
func (s *Source) fail(query, when string, err error) error {
	advice := "; check that Prometheus is up at that URL and scrapes dcgm-exporter"
	tooBig, partial := (*AnswerTooLargeError)(nil), (*PartialAnswerError)(nil)
	if errors.As(err, &tooBig) || errors.As(err, &partial) {
		advice = "" // the error says what to do
	}
	redactURLError(err)
	return fmt.Errorf("prometheus %s: query %s: %w (%s)%s", s.shown, shownQuery(query), err, when, advice)
}

// queryShown is the most characters of a query that an error quotes: a
// month's bucket query runs to kilobytes, and a refresh that fails would
// log it whole each time.
const queryShown = 200

// shownQuery quotes query, cut to queryShown characters with "…" and
// its whole length where it is longer.
func shownQuery(query string) string {
	if utf8.RuneCountInString(query) <= queryShown {
		return strconv.Quote(query)
	}
	runes := []rune(query)
	return fmt.Sprintf("%s… (%d characters)", strconv.Quote(string(runes[:queryShown])), len(runes))
}

// rangeWhen is the range of a range query, for fail.
func rangeWhen(r v1.Range) string {
	return fmt.Sprintf("over %s to %s, step %s", r.Start.UTC().Format(time.RFC3339), r.End.UTC().Format(time.RFC3339), r.Step)
}

// instantWhen is the time of an instant query, for fail.
func instantWhen(t time.Time) string {
	return "at " + t.UTC().Format(time.RFC3339)
}

// label reads the first of the names that is set. A Prometheus that scrapes
// dcgm-exporter through a pod target renames its pod labels exported_*.
func label(m model.Metric, names ...string) string {
	for _, n := range names {
		if v := m[model.LabelName(n)]; v != "" {
			return string(v)
		}
	}
	return ""
}

func device(m model.Metric) usage.Device {
	return usage.Device{
		Node:        label(m, "Hostname", "hostname", "node", "kubernetes_node"),
		GPU:         label(m, "gpu"),
		UUID:        label(m, "UUID", "uuid"),
		Model:       label(m, "modelName"),
		MIGProfile:  label(m, "GPU_I_PROFILE"),
		MIGInstance: label(m, "GPU_I_ID"),
	}
}

// owner reads dcgm-exporter's pod labels. Where Prometheus renamed them
// exported_* (its target had its own pod label), the renamed set wins;
// configure honor_labels: true to avoid the renaming altogether.
func owner(m model.Metric) usage.Owner {
	if m["exported_pod"] != "" {
		return usage.Owner{Namespace: label(m, "exported_namespace"), Pod: label(m, "exported_pod"), Container: label(m, "exported_container")}
	}
	return usage.Owner{Namespace: label(m, "namespace"), Pod: label(m, "pod"), Container: label(m, "container")}
}

// draHold reads dcgm-exporter's DRA labels (dcgm-exporter 4.x, where the
// kubelet's pod-resources API lists ResourceClaims).
func draHold(m model.Metric) usage.DRAHold {
	return usage.DRAHold{
		ClaimNamespace: label(m, "dra_claim_namespace"),
		ClaimName:      label(m, "dra_claim_name"),
		Driver:         label(m, "dra_driver_name"),
		Pool:           label(m, "dra_pool_name"),
		Device:         label(m, "dra_device_name"),
	}
}

func samples(ps []model.SamplePair) []usage.Sample {
	out := make([]usage.Sample, len(ps))
	for i, p := range ps {
		out[i] = usage.Sample{TimeMs: int64(p.Timestamp), Value: float64(p.Value)}
	}
	return out
}
