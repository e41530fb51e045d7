package promql

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// clientVector decodes an instant query's answer as client_golang does,
// less the samples without a float (a native histogram's), which
// decodeVector leaves out.
func clientVector(body []byte) (model.Vector, error) {
	vec, err := clientAnswer[model.Vector](body, "vector")
	var out model.Vector
	for _, s := range vec {
		if s.Histogram == nil {
			out = append(out, s)
		}
	}
	return out, err
}

// sameVector says how a differs from b, NaNs equal; "" where they agree.
func sameVector(a, b model.Vector) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%d samples, want %d", len(a), len(b))
	}
	for i := range a {
		x, y := a[i], b[i]
		if !x.Metric.Equal(y.Metric) || x.Timestamp != y.Timestamp ||
			!(x.Value == y.Value || math.IsNaN(float64(x.Value)) && math.IsNaN(float64(y.Value))) || math.Signbit(float64(x.Value)) != math.Signbit(float64(y.Value)) {
			return fmt.Sprintf("sample %d: %v, want %v", i, x, y)
		}
	}
	return ""
}

func TestDecodeVector(t *testing.T) {
	good := map[string]string{
		"empty":       `{"status":"success","data":{"resultType":"vector","result":[]}}`,
		"pods":        `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"namespace":"a","pod":"p-1"},"value":[1735689599.999,"1735600000"]},{"metric":{"namespace":"a","pod":"p-2"},"value":[1735689599.999,"NaN"]}]}}`,
		"special":     `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"+Inf"]},{"metric":{"x":"y"},"value":[-1.5,"-0"]}]}}`,
		"escapes":     `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pod":"a\"b\\c\u00e9","ns":"caf\u00e9 ☕"},"value":[10,"1"]}]}}`,
		"histogram":   `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"b"},"histogram":[2,{"count":"3","sum":"4","buckets":[[0,"1","2","3"]]}]},{"metric":{"a":"c"},"value":[1,"2"]}]}}`,
		"infos":       `{"status":"success","infos":["i"],"data":{"result":[{"value":[1,"1"],"metric":{"a":"b"}}],"resultType":"vector"}}`,
		"white space": " {\"status\" : \"success\", \"data\" : { \"resultType\" : \"vector\" , \"result\" : [ { \"metric\" : { \"a\" : \"b\" } , \"value\" : [ 1 , \"1\" ] } ] } }\n",
	}
	for name, body := range good {
		t.Run(name, func(t *testing.T) {
			want, err := clientVector([]byte(body))
			if err != nil {
				t.Fatalf("client_golang's decoding: %v", err)
			}
			got, err := decodeVector([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			if diff := sameVector(got, want); diff != "" {
				t.Error(diff)
			}
		})
	}
	bad := map[string]struct{ body, want string }{
		"not JSON":   {`<html>502 Bad Gateway</html>`, "malformed query answer at byte 0 of 28"},
		"cut short":  {`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"b"},"value":[1,`, `want a sample's value`},
		"bad value":  {`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"one"]}]}}`, `want a sample's value`},
		"two values": {`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1",2]}]}}`, `']' after a sample's value`},
		"no metric":  {`{"status":"success","data":{"resultType":"vector","result":[{"value":[1,"1"]}]}}`, `a sample with its "metric"`},
		"no value":   {`{"status":"success","data":{"resultType":"vector","result":[{"metric":{}}]}}`, `a sample with its "value"`},
		"a matrix":   {`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"]]}]}}`, `query answered a "matrix", want an instant vector`},
		"error":      {`{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\""}`, `bad_data: invalid parameter "query"`},
		"no status":  {`{"data":{"resultType":"vector","result":[]}}`, `query answer with status "", want "success"`},
		"warnings":   {`{"status":"success","warnings":["w"],"data":{"result":[{"value":[1,"1"],"metric":{"a":"b"}}],"resultType":"vector"}}`, `partial answer, with warnings ["w"]`},
		"isPartial":  {`{"status":"success","isPartial":true,"data":{"result":[{"value":[1,"1"],"metric":{"a":"b"}}],"resultType":"vector"}}`, `partial answer, with warnings ["\"isPartial\": true`},
	}
	for name, tc := range bad {
		t.Run(name, func(t *testing.T) {
			if _, err := decodeVector([]byte(tc.body)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v; want one saying %q", err, tc.want)
			}
		})
	}
}

// FuzzDecodeVector checks that decodeVector never panics, and that what
// it accepts encoding/json accepts too and reads the same.
func FuzzDecodeVector(f *testing.F) {
	for _, seed := range []string{
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"namespace":"a","pod":"p"},"value":[1735689599.999,"1"]}]}}`,
		`{"status":"success","warnings":["w"],"data":{"result":[{"value":[-1.5,"+Inf"],"metric":{"a":"\u00e9\""}}],"resultType":"vector"}}`,
		`{"status":"error","errorType":"bad_data","error":"x"}`,
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"histogram":[2,{"count":"3"}]}]}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := decodeVector(body)
		if err != nil {
			if !strings.Contains(err.Error(), "query") && !strings.Contains(err.Error(), ": ") {
				t.Errorf("error %q does not say what was wrong", err)
			}
			return
		}
		want, err := clientVector(body)
		if err != nil {
			t.Fatalf("decodeVector read %q, which client_golang's decoding refuses: %v", body, err)
		}
		if diff := sameVector(got, want); diff != "" {
			t.Fatalf("%q: %s", body, diff)
		}
	})
}

// TestDecodeVectorAgreesWithClient asks a real Prometheus, holding a day
// of a 16-GPU fleet, instant queries of the kinds gpupack sends (a
// metric's samples, one grouped by pod over the day as loadContext asks
// kube-state-metrics, one whose labels need escapes, one over nothing)
// and one it refuses, and checks that queryVector reads each as
// client_golang's Query does.
func TestDecodeVectorAgreesWithClient(t *testing.T) {
	if testing.Short() {
		t.Skip("backfills and starts a real Prometheus")
	}
	prom, day := faultyFleetDay(t, time.Minute)
	s, err := New(prom.URL)
	if err != nil {
		t.Fatal(err)
	}
	client := s.readingBy(referencePaths{answers: clientDecoding{}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	at := day.Start.Add(12 * time.Hour)
	samples := 0
	for _, q := range []string{
		"DCGM_FI_DEV_FB_USED",
		fmt.Sprintf("max by (namespace, pod) (last_over_time(DCGM_FI_DEV_FB_USED[%ds]))", int(day.End.Sub(day.Start).Seconds())),
		`label_replace(vector(1), "pod", "caf\u00e9 \"\u2615\" \\ \t", "", "")`,
		"DCGM_FI_DEV_FB_USED > 1e300",
	} {
		got, err := s.queryVector(ctx, q, at)
		if err != nil {
			t.Fatalf("decodeVector: %v", err)
		}
		want, err := client.queryVector(ctx, q, at)
		if err != nil {
			t.Fatalf("client_golang: %v", err)
		}
		if diff := sameVector(got, want); diff != "" {
			t.Errorf("query %.120s: %s", q, diff)
		}
		samples += len(got)
	}
	if samples < 16 {
		t.Errorf("%d samples in all; want the fleet's GPUs at least", samples)
	}
	_, got := s.queryVector(ctx, "sum(", at)
	_, want := client.queryVector(ctx, "sum(", at)
	if got == nil || want == nil || got.Error() != want.Error() {
		t.Errorf("a query Prometheus refuses: error %v; want %v", got, want)
	}
	// A range query's answer where an instant vector is wanted.
	if _, err := s.queryVector(ctx, "DCGM_FI_DEV_FB_USED[5m]", at); err == nil || !strings.Contains(err.Error(), "want an instant vector") {
		t.Errorf("a matrix answered: error %v; want one saying an instant vector was wanted", err)
	}
}

// TestEachVectorSample checks that eachVectorSample hands on, one at a
// time, the samples decodeVector reads, and refuses what it refuses.
func TestEachVectorSample(t *testing.T) {
	for _, body := range []string{
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"namespace":"a","pod":"p-1"},"value":[1,"10"]},{"metric":null,"value":[1,"NaN"]},{"metric":{"a":"c"},"histogram":[2,{"count":"3"}]},{"metric":{"namespace":"b","pod":"p-2","x":"y"},"value":[2,"20"]}]}}`,
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pod":"a"},"value":[1,"1"]},{"metric":{"pod":"b"}}]}}`,
		`{"status":"success","data":{"resultType":"matrix","result":[]}}`,
		`{"status":"error","errorType":"bad_data","error":"x"}`,
	} {
		want, wantErr := decodeVector([]byte(body))
		var got model.Vector
		err := eachVectorSample([]byte(body), func(s *model.Sample) {
			c := *s
			c.Metric = s.Metric.Clone()
			got = append(got, &c)
		})
		if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
			t.Errorf("%s: error %v, want %v", body, err, wantErr)
		}
		if wantErr == nil {
			if diff := sameVector(got, want); diff != "" {
				t.Errorf("%s: %s", body, diff)
			}
		}
	}
}
