package promql

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/usage"
)

// fakeAPI answers query_range for GR_ENGINE_ACTIVE with two series (one
// relabelled exported_* by a Prometheus that scraped through a pod target,
// one with a lower-case hostname), kube_node_labels with one node, and
// every other query with nothing.
func fakeAPI(t *testing.T) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", "application/json")
		q := r.Form.Get("query")
		switch {
		case q == usage.GREngineActive:
			_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"matrix","result":[
 {"metric":{"__name__":"DCGM_FI_PROF_GR_ENGINE_ACTIVE","gpu":"0","UUID":"GPU-a","modelName":"NVIDIA L4","Hostname":"n1","namespace":"gpu-operator","pod":"dcgm-exporter-x","exported_namespace":"ml","exported_pod":"train","exported_container":"main"},"values":[[1000,"0.5"],[1030,"0.7"]]},
 {"metric":{"__name__":"DCGM_FI_PROF_GR_ENGINE_ACTIVE","gpu":"1","UUID":"GPU-b","modelName":"NVIDIA L4","hostname":"n2","GPU_I_PROFILE":"1g.10gb","GPU_I_ID":"3"},"values":[[1000,"0"]]}]}}`)
		case q == "kube_node_labels":
			_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"node":"n1","label_node_pool":"spot"},"value":[1060,"1"]}]}}`)
		case strings.HasPrefix(r.URL.Path, "/api/v1/query_range"):
			_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"matrix","result":[]}}`)
		default:
			_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[]}}`)
		}
	}))
}

func TestLoad(t *testing.T) {
	srv := fakeAPI(t)
	defer srv.Close()
	s, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	w := usage.Window{Start: time.Unix(1000, 0), End: time.Unix(1060, 0), Step: 30 * time.Second}
	d, err := s.Load(context.Background(), w, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []usage.Series{
		{Metric: usage.GREngineActive, Device: usage.Device{Node: "n1", GPU: "0", UUID: "GPU-a", Model: "NVIDIA L4"},
			Owner: usage.Owner{Namespace: "ml", Pod: "train", Container: "main"}, Samples: []usage.Sample{{TimeMs: 1000000, Value: 0.5}, {TimeMs: 1030000, Value: 0.7}}},
		{Metric: usage.GREngineActive, Device: usage.Device{Node: "n2", GPU: "1", UUID: "GPU-b", Model: "NVIDIA L4", MIGProfile: "1g.10gb", MIGInstance: "3"},
			Samples: []usage.Sample{{TimeMs: 1000000, Value: 0}}},
	}
	if diff := cmp.Diff(want, d.Series); diff != "" {
		t.Errorf("series (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]map[string]string{"n1": {"node_pool": "spot"}}, d.NodeLabels); diff != "" {
		t.Errorf("node labels (-want +got):\n%s", diff)
	}
}

// TestLoadRefusesLongWindow checks that a window usage would refuse sends
// no query at all.
func TestLoadRefusesLongWindow(t *testing.T) {
	queried := false
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { queried = true }))
	defer srv.Close()
	src, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	_, err = src.Load(context.Background(), usage.Window{Start: start, End: start.Add(24 * time.Hour), Step: time.Second}, nil)
	if err == nil || !strings.Contains(err.Error(), "more than the 11000 one window may have") || queried {
		t.Errorf("error = %v, queried %v; want the window refused before any query", err, queried)
	}
}

// TestQueryErrorIsShort: a query that Prometheus refuses fails with an
// error that names the figure, the range, Prometheus' error type and a
// bounded part of the query with its length, never the whole query (a
// month's bucket query runs to kilobytes, logged at each refresh).
func TestQueryErrorIsShort(t *testing.T) {
	long := "sum by (namespace, pod) (rate(vllm:generation_tokens_total{" + strings.Repeat(`model!="x",`, 900) + `}[5m]))`
	cases := map[string]struct {
		status int
		body   string
		want   []string
	}{
		"prometheus' own error": {
			status: http.StatusBadRequest,
			body:   `{"status":"error","errorType":"bad_data","error":"1:60: parse error: unexpected character"}`,
			want:   []string{`application metric "tokens"`, "bad_data: 1:60: parse error", "2024-05-01T00:00:00Z", fmt.Sprintf("… (%d characters)", len(long))},
		},
		"an HTTP error": {
			status: http.StatusBadGateway,
			body:   strings.Repeat("<html>bad gateway</html>", 100),
			want:   []string{`application metric "tokens"`, "HTTP 502 Bad Gateway", "2024-05-01T00:00:00Z", fmt.Sprintf("… (%d characters)", len(long))},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				r.ParseForm()
				w.Header().Set("Content-Type", "application/json")
				switch {
				case r.Form.Get("query") == long:
					w.WriteHeader(c.status)
					fmt.Fprint(w, c.body)
				case strings.HasSuffix(r.URL.Path, "/query"):
					fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[]}}`)
				default:
					fmt.Fprint(w, `{"status":"success","data":{"resultType":"matrix","result":[]}}`)
				}
			}))
			defer srv.Close()
			s, err := New(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
			w := usage.Window{Start: start, End: start.Add(time.Hour), Step: time.Minute}
			_, err = s.Load(t.Context(), w, map[string]string{"tokens": long})
			if err == nil {
				t.Fatal("a refused query: no error")
			}
			// At most queryShown characters of the query (escaped) and 200 of
			// the body, with the URL, the figure and the range.
			const maxLine = 800
			for _, line := range strings.Split(err.Error(), "\n") {
				if len(line) > maxLine {
					t.Errorf("an error line of %d bytes, want at most %d (the query is %d): %.300s…", len(line), maxLine, len(long), line)
				}
			}
			for _, want := range c.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %.700q does not say %q", err, want)
				}
			}
		})
	}
}
