package promql

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/gpupack/gpupack/usage"
)

// clientAnswer decodes an answer with encoding/json into common/model's
// types, as client_golang does: the envelope, then the result, which must
// be of resultType kind.
func clientAnswer[T any](body []byte, kind string) (T, error) {
	var result T
	var answer struct {
		Status    string          `json:"status"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return result, err
	}
	if answer.Status == "error" {
		return result, fmt.Errorf("%s: %s", answer.ErrorType, answer.Error)
	}
	var data struct {
		Type   string `json:"resultType"`
		Result T      `json:"result"`
	}
	if err := json.Unmarshal(answer.Data, &data); err != nil {
		return result, err
	}
	if data.Type != kind {
		return result, fmt.Errorf("result type %q", data.Type)
	}
	return data.Result, nil
}

// clientMatrix decodes a query_range answer as client_golang does.
func clientMatrix(body []byte) (model.Matrix, error) {
	return clientAnswer[model.Matrix](body, "matrix")
}

// sameMatrix says how a differs from b, NaNs equal; "" where they agree.
func sameMatrix(a, b model.Matrix) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%d series, want %d", len(a), len(b))
	}
	for i := range a {
		if a[i] == nil || b[i] == nil {
			if a[i] != b[i] {
				return fmt.Sprintf("series %d: %v, want %v", i, a[i], b[i])
			}
			continue
		}
		if !a[i].Metric.Equal(b[i].Metric) || (a[i].Metric == nil) != (b[i].Metric == nil) {
			return fmt.Sprintf("series %d: labels %v, want %v", i, a[i].Metric, b[i].Metric)
		}
		if len(a[i].Values) != len(b[i].Values) {
			return fmt.Sprintf("series %d (%v): %d points, want %d", i, a[i].Metric, len(a[i].Values), len(b[i].Values))
		}
		for j := range a[i].Values {
			if !a[i].Values[j].Equal(&b[i].Values[j]) {
				return fmt.Sprintf("series %d (%v), point %d: %v, want %v", i, a[i].Metric, j, a[i].Values[j], b[i].Values[j])
			}
		}
	}
	return ""
}

// TestDecodeMatrix checks decodeMatrix against client_golang's decoding
// on answers that Prometheus gives and that it could give (escapes,
// non-ASCII labels, NaN and infinities, fractions of a millisecond,
// negative times, native histograms beside floats, infos, keys in
// another order), and that a malformed answer is refused with an error
// that says where and what was wanted, and one with warnings (a partial
// answer, or one VictoriaMetrics marks "isPartial") as a
// *PartialAnswerError.
func TestDecodeMatrix(t *testing.T) {
	good := map[string]string{
		"empty":                  `{"status":"success","data":{"resultType":"matrix","result":[]}}`,
		"plain":                  `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"gpu":"0","UUID":"GPU-a"},"values":[[1735689599.999,"1"],[1735693199.999,"2.5"]]}]}}`,
		"special":                `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"NaN"],[2,"+Inf"],[3,"-Inf"],[-1.5,"-0"],[4.12345,"1e300"]]}]}}`,
		"escapes":                `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"pod":"a\"b\\c\u00e9","ns":"caf\u00e9 ☕","t":"x\ty"},"values":[[10,"1"]]}]}}`,
		"histograms":             `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"b"},"values":[[1,"1"]],"histograms":[[2,{"count":"3","sum":"4","buckets":[[0,"1","2","3"]]}]]}]}}`,
		"infos":                  `{"status":"success","warnings":[],"infos":["i"],"data":{"result":[{"values":[[1,"1"]],"metric":{"a":"b"}}],"resultType":"matrix"}}`,
		"white space":            " \n{ \"status\" : \"success\" ,\r\n \"data\" : { \"resultType\" : \"matrix\" , \"result\" : [ { \"metric\" : { \"a\" : \"b\" } , \"values\" : [ [ 1 , \"1\" ] ] } ] } } \n",
		"null values":            `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"b"},"values":null}]}}`,
		"many series":            `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"b"},"values":[[1,"1"]]},{"metric":{"a":"c"},"values":[[1,"2"]]},{"metric":{"a":"b","c":"d"},"values":[[1,"3"]]}]}}`,
		"whole, VictoriaMetrics": `{"status":"success","isPartial":false,"data":{"resultType":"matrix","result":[{"metric":{"a":"b"},"values":[[1,"1"]]}]}}`,
		"unknown keys":           `{"status":"success","stats":{"x":[1,2,{"y":null}],"z":true},"data":{"resultType":"matrix","result":[{"metric":{"a":"b"},"values":[[1,"1"]],"extra":false}]}}`,
	}
	for name, body := range good {
		t.Run(name, func(t *testing.T) {
			want, err := clientMatrix([]byte(body))
			if err != nil {
				t.Fatalf("client_golang's decoding: %v", err)
			}
			got, err := decodeMatrix([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			if diff := sameMatrix(got, want); diff != "" {
				t.Error(diff)
			}
		})
	}
	bad := map[string]struct{ body, want string }{
		"not JSON":                 {`<html>502 Bad Gateway</html>`, "at byte 0 of 28: want the answer (a JSON object)"},
		"cut short":                {`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"b"},"values":[[1,"1"],[2,`, `want a sample's value`},
		"bad value":                {`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"one"]]}]}}`, `want a sample's value`},
		"unquoted value":           {`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,1]]}]}}`, `want a sample's value`},
		"exponent time":            {`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1e3,"1"]]}]}}`, `at most 3 decimals`},
		"trailing":                 {`{"status":"success","data":{"resultType":"matrix","result":[]}} x`, `want the end of the answer`},
		"a vector":                 {`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1"]}]}}`, `want a range vector`},
		"error":                    {`{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\""}`, `bad_data: invalid parameter "query"`},
		"no status":                {`{"data":{"resultType":"matrix","result":[]}}`, `want "success"`},
		"case twin":                {`{"status":"success","Status":"error","data":{"resultType":"matrix","result":[]}}`, `want "status", not "Status"`},
		"warnings":                 {`{"status":"success","warnings":["store 10.0.0.7:10901 unreachable"],"infos":["i"],"data":{"result":[{"values":[[1,"1"]],"metric":{"a":"b"}}],"resultType":"matrix"}}`, `partial answer, with warnings ["store 10.0.0.7:10901 unreachable"]`},
		"partial, VictoriaMetrics": {`{"status":"success","isPartial":true,"data":{"resultType":"matrix","result":[{"metric":{"a":"b"},"values":[[1,"1"]]}]}}`, `partial answer, with warnings ["\"isPartial\": true (a VictoriaMetrics storage node did not answer`},
		"isPartial a string":       {`{"status":"success","isPartial":"no","data":{"resultType":"matrix","result":[]}}`, `want "isPartial" (true or false)`},
		"control in text":          {"{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[{\"metric\":{\"a\":\"b\x01\"},\"values\":[]}]}}", `want a label's value`},
	}
	for name, tc := range bad {
		t.Run(name, func(t *testing.T) {
			if _, err := decodeMatrix([]byte(tc.body)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v; want one saying %q", err, tc.want)
			}
		})
	}
}

// FuzzDecodeMatrix checks that decodeMatrix never panics, and that what
// it accepts encoding/json accepts too and reads the same into common/model's
// types (what client_golang decodes into; the real client is compared on
// real answers in TestDecodeMatrixAgreesWithClient).
func FuzzDecodeMatrix(f *testing.F) {
	for _, seed := range []string{
		`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"b"},"values":[[1,"1"]]},{"metric":{"a":"b"},"metric":{"c":"d"},"values":[[1,"2"]]},{"metric":{"a":"b"},"values":[[1,"3"]]}]}}`,
		`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"gpu":"0","UUID":"GPU-a"},"values":[[1735689599.999,"1"],[1735693199.999,"NaN"]]}]}}`,
		`{"status":"success","warnings":["w"],"data":{"result":[{"values":[[-1.5,"+Inf"]],"metric":{"a":"\u00e9\""}}],"resultType":"matrix"}}`,
		`{"status":"error","errorType":"bad_data","error":"x"}`,
		`{"status":"success","isPartial":false,"data":{"resultType":"matrix","result":[]}}`,
		`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"]],"histograms":[[2,{"count":"3"}]]}]}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := decodeMatrix(body)
		if err != nil {
			if !strings.Contains(err.Error(), "query_range") && !strings.Contains(err.Error(), ": ") {
				t.Errorf("error %q does not say what was wrong", err)
			}
			return
		}
		want, err := clientMatrix(body)
		if err != nil {
			t.Fatalf("decodeMatrix read %q, which client_golang's decoding refuses: %v", body, err)
		}
		if diff := sameMatrix(got, want); diff != "" {
			t.Fatalf("%q: %s", body, diff)
		}
		// Sharing label sets reads the same, first seen and seen again,
		// and leaves the maps it shares as they were.
		labels := newLabelSets()
		for range 2 {
			shared, err := decodeMatrixSharing(body, labels)
			if err != nil {
				t.Fatalf("decodeMatrixSharing: %v", err)
			}
			if diff := sameMatrix(shared, want); diff != "" {
				t.Fatalf("%q, label sets shared: %s", body, diff)
			}
		}
	})
}

// TestDecodeMatrixAgreesWithClient asks a real Prometheus, holding a day
// of a 16-GPU fleet with NaNs and an energy counter reset, the range
// queries that gpupack sends (raw series at the step, the plain check,
// the plain figures, the subqueries of a non-plain hour) and one whose
// labels need escapes and are not ASCII, and checks that decodeMatrix
// reads every answer as client_golang's QueryRange does.
func TestDecodeMatrixAgreesWithClient(t *testing.T) {
	if testing.Short() {
		t.Skip("backfills and starts a real Prometheus")
	}
	const scrape = time.Minute
	prom, day := faultyFleetDay(t, scrape)
	s, err := New(prom.URL)
	if err != nil {
		t.Fatal(err)
	}
	client := s.readingBy(referencePaths{answers: clientDecoding{}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hours := v1.Range{Start: day.Start.Add(time.Hour - time.Millisecond), End: day.End.Add(-time.Millisecond), Step: time.Hour}
	raw := v1.Range{Start: day.Start.Add(10 * time.Hour), End: day.Start.Add(11 * time.Hour), Step: scrape}
	type query struct {
		q string
		r v1.Range
	}
	queries := []query{
		{"plain check", v1.Range{}},
		{`label_replace(vector(1), "pod", "caf\u00e9 \"\u2615\" \\ \t", "", "")`, raw},
	}
	queries[0] = query{expandPlain(plainCheckQuery(scrape, time.Hour), scrape, time.Hour, ""), hours}
	for _, m := range usage.Metrics {
		queries = append(queries, query{m, raw})
	}
	for _, f := range plainFigures {
		queries = append(queries, query{expandPlain(f.query, scrape, time.Hour, ""), hours})
	}
	for _, q := range fallbackQueries(scrape, time.Hour, "") {
		queries = append(queries, query{q, v1.Range{Start: hours.Start.Add(10 * time.Hour), End: hours.Start.Add(10 * time.Hour), Step: time.Hour}})
	}
	points := 0
	for _, q := range queries {
		got, err := s.queryRange(ctx, q.q, q.r)
		if err != nil {
			t.Fatalf("decodeMatrix: %v", err)
		}
		want, err := client.queryRange(ctx, q.q, q.r)
		if err != nil {
			t.Fatalf("client_golang: %v", err)
		}
		if diff := sameMatrix(got, want); diff != "" {
			t.Errorf("query %.120s: %s", q.q, diff)
		}
		for _, ss := range got {
			points += len(ss.Values)
		}
	}
	if points < 10000 {
		t.Errorf("%d points in all; want the day's answers (tens of thousands)", points)
	}
	// An error Prometheus answers is read as client_golang reads it.
	_, got := s.queryRange(ctx, "sum(", hours)
	_, want := client.queryRange(ctx, "sum(", hours)
	if got == nil || want == nil || got.Error() != want.Error() {
		t.Errorf("a query Prometheus refuses: error %v; want %v", got, want)
	}
}

// TestQueryRangeHTTP checks how queryRange sends a range query and reads
// what comes back: a form POST, a GET where the server refuses POST (as
// client_golang falls back), Prometheus' own error as it says it, and an
// HTTP error whose body is not Prometheus' JSON with its status and body.
func TestQueryRangeHTTP(t *testing.T) {
	const matrix = `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"b"},"values":[[1.5,"2"]]}]}}`
	cases := map[string]struct {
		answer func(w http.ResponseWriter, r *http.Request)
		want   string // in the error; "" for the matrix
	}{
		"POST": {answer: func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost || r.PostFormValue("query") != "up" || r.PostFormValue("step") != "3600" || r.PostFormValue("start") != "1" {
				http.Error(w, "bad request "+r.Method, http.StatusTeapot)
				return
			}
			_, _ = io.WriteString(w, matrix)
		}},
		"GET where POST is refused": {answer: func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				w.WriteHeader(http.StatusMethodNotAllowed)
				return
			}
			if r.URL.Query().Get("query") != "up" {
				http.Error(w, "no query", http.StatusTeapot)
				return
			}
			_, _ = io.WriteString(w, matrix)
		}},
		"Prometheus' error": {answer: func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"status":"error","errorType":"bad_data","error":"parse error"}`)
		}, want: `query "up": bad_data: parse error`},
		"a proxy's page": {answer: func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, `<html>bad gateway</html>`)
		}, want: `HTTP 502 Bad Gateway: <html>bad gateway</html>`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(tc.answer))
			defer srv.Close()
			s, err := New(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			m, err := s.queryRange(context.Background(), "up", v1.Range{Start: time.Unix(1, 0), End: time.Unix(3601, 0), Step: time.Hour})
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %v; want one saying %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(m) != 1 || m[0].Metric["a"] != "b" || len(m[0].Values) != 1 || m[0].Values[0].Timestamp != 1500 || m[0].Values[0].Value != 2 {
				t.Errorf("matrix %v; want {a=\"b\"} 2 @1.5", m)
			}
		})
	}
}

func TestLabelsEnd(t *testing.T) {
	for _, tc := range []struct {
		text string
		end  int // -1: not found
	}{
		{`{}x`, 2},
		{`{"a":"b"}x`, 9},
		{`{"a":"b","c":"d"},`, 17},
		{`{"a":"x\"}y","b":"\\"}]`, 22},
		{`{"a":"b\\\"c"}`, 14},
		{`{ "a":"b"}`, -1},
		{`{"a":1}`, -1},
		{`{"a":"b"`, -1},
		{`{"a":"b\"}`, -1},
		{`{"a":"b",}`, -1},
		{`["a"]`, -1},
	} {
		end, ok := labelsEnd([]byte(tc.text), 0)
		if !ok {
			end = -1
		}
		if end != tc.end {
			t.Errorf("labelsEnd(%s) = %d, want %d", tc.text, end, tc.end)
		}
	}
}
