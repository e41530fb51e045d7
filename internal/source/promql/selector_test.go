package promql

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpupack/gpupack/usage"
)

func TestParseSelector(t *testing.T) {
	cases := map[string]struct {
		in, want, wantErr string
	}{
		"none":                   {in: "", want: ""},
		"a job":                  {in: `job="dcgm-exporter"`, want: `job="dcgm-exporter"`},
		"in braces, spaced":      {in: ` { job = "dcgm-exporter" , } `, want: `job="dcgm-exporter"`},
		"sorted, requoted":       {in: `namespace!~'kube-.*', job=~` + "`(nvidia-)?dcgm-exporter`", want: `job=~"(nvidia-)?dcgm-exporter", namespace!~"kube-.*"`},
		"escapes":                {in: `job="a\"b"`, want: `job="a\"b"`},
		"no quotes":              {in: `job=dcgm-exporter`, wantErr: `unexpected token "-"`},
		"no operator":            {in: `job "x"`, wantErr: `want "=", "!=", "=~", "!~"`},
		"no comma":               {in: `job="x" pod="y"`, wantErr: `unexpected token "pod"`},
		"the metric name":        {in: `__name__="DCGM_FI_DEV_FB_USED"`, wantErr: "__name__ is set by gpupack's queries"},
		"a bad regex":            {in: `job=~"(dcgm"`, wantErr: "missing closing )"},
		"an unclosed value":      {in: `job="dcgm`, wantErr: "cannot find closing quote"},
		"two groups":             {in: `{job="a" or job="b"}`, wantErr: "want one list of label matchers"},
		"a function":             {in: `{job="a"} + 1`, wantErr: "want one list of label matchers"},
		"an unclosed brace":      {in: `{job="dcgm"`, wantErr: `want ",", "or", "}"`},
		"a name that is no name": {in: `1job="x"`, wantErr: `unexpected token "1"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseSelector(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseSelector(%q) = %q, %v; want an error saying %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got.String() != tc.want {
				t.Fatalf("ParseSelector(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
			// The canonical form reads back as itself.
			if again, err := ParseSelector(got.String()); err != nil || again != got {
				t.Errorf("ParseSelector(%q) = %q, %v; want it unchanged", got, again, err)
			}
		})
	}
}

// TestEveryQueryCarriesTheSelector sends every query that Load,
// StreamBuckets and LoadHealth send to a server that answers nothing, and
// writes out the ones that only answers would send (the subqueries of
// hours that are not plain, the reads of recorded series, the XID
// subquery): every selector of a DCGM series must hold the selector, and
// every selector of a recorded series its label.
func TestEveryQueryCarriesTheSelector(t *testing.T) {
	sel, err := ParseSelector(`job="dcgm-exporter"`)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Error(err)
		}
		mu.Lock()
		queries = append(queries, r.Form.Get("query"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		kind := "vector"
		if strings.HasSuffix(r.URL.Path, "query_range") || strings.Contains(r.Form.Get("query"), "]") && !strings.Contains(r.Form.Get("query"), "(") {
			kind = "matrix"
		}
		_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"`+kind+`","result":[]}}`)
	}))
	defer srv.Close()
	s, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	s.Selector = sel
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	w := usage.Window{Start: start, End: start.Add(2 * time.Hour), Step: 30 * time.Second}
	ctx := context.Background()
	if _, err := s.Load(ctx, w, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.StreamBuckets(ctx, w, time.Hour, func(*usage.Bucket) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadHealth(ctx, w); err != nil {
		t.Fatal(err)
	}
	// What only answers send.
	queries = append(queries, fallbackQueries(w.Step, time.Hour, sel.and(`UUID=~"GPU-a"`))...)
	for _, fig := range bucketFigures {
		q, err := recordedQuery(fig, w.Step, time.Hour, sel)
		if err != nil {
			t.Fatal(err)
		}
		queries = append(queries, q)
	}
	combined, err := combinedQueries(w.Step, sel, time.Hour, allFigures(), RecordedHourName)
	if err != nil {
		t.Fatal(err)
	}
	queries = append(append(queries, combined...), hourlyQueries(w.Step, sel)...)
	xids, err := s.xidsSeen(ctx, w, `UUID=~"GPU-a"`, w.End)
	if err != nil || len(xids) != 0 {
		t.Fatal(xids, err)
	}
	rules, err := RecordingRules(w.Step, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			queries = append(queries, r.Expr)
			if r.Labels[SelectorLabel] != sel.String() {
				t.Errorf("rule %s: labels %v; want %s=%q", r.Record, r.Labels, SelectorLabel, sel)
			}
		}
	}

	dcgm, recorded := 0, 0
	for _, q := range queries {
		for _, m := range seriesSelector.FindAllStringSubmatchIndex(q, -1) {
			var name, braces string
			switch {
			case m[2] < 0: // {__name__=~"...", ...}
				name, braces = q[m[6]:m[7]], q[m[0]:m[1]]
			case m[4] >= 0:
				name, braces = q[m[2]:m[3]], q[m[4]:m[5]]
			default:
				name = q[m[2]:m[3]]
			}
			if strings.Contains(name, "gpupack:") {
				recorded++
				if want := SelectorLabel + "=" + strconv.Quote(sel.String()); !strings.Contains(braces, want) {
					t.Errorf("recorded series %s%s has not %s, in %s", name, braces, want, shownQuery(q))
				}
				continue
			}
			dcgm++
			if !strings.Contains(braces, sel.String()) {
				t.Errorf("series %s%s is not narrowed by %s, in %s", name, braces, sel, shownQuery(q))
			}
		}
	}
	if dcgm < 100 || recorded < 50 {
		t.Errorf("%d selectors of DCGM series and %d of recorded ones checked in %d queries; want the bucket figures' and the rules' many", dcgm, recorded, len(queries))
	}
}

// seriesSelector finds the selectors of DCGM and recorded series: a
// metric name outside quotes, or a __name__ matcher, with the braces
// that follow it, if any. A name inside a label_replace's quotes (the
// metric a figure is labelled with) is not a selector.
var seriesSelector = regexp.MustCompile(`(?:^|[^"|A-Za-z_:])((?:DCGM_FI_[A-Z_]+|gpupack:[a-z0-9_]+:(?:5m|1h)))(\{[^}]*\})?|\{(__name__=~"[^"]*")[^}]*\}`)

// FuzzParseSelector: any input is refused with an error or gives a
// canonical form that reads back as itself.
func FuzzParseSelector(f *testing.F) {
	for _, s := range []string{`job="dcgm-exporter"`, `{namespace!~'kube-.*', job=~"(nvidia-)?dcgm-exporter"}`, `job="a\"b"`, `1job="x"`, `{job="a" or job="b"}`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		sel, err := ParseSelector(in)
		if err != nil {
			return
		}
		again, err := ParseSelector(sel.String())
		if err != nil || again != sel {
			t.Fatalf("ParseSelector(%q) = %q, which reads back as %q, %v", in, sel, again, err)
		}
	})
}
