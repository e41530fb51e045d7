package charts

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpupack/gpupack/internal/serve/live"
)

// schemaPattern reads the pattern that values.schema.json sets for one of
// serve's values, or prometheus.url for "url".
func schemaPattern(t *testing.T, group, key string) *regexp.Regexp {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(Dir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties map[string]struct {
			Properties map[string]struct {
				Pattern string `json:"pattern"`
			} `json:"properties"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	p := schema.Properties[group].Properties[key].Pattern
	if p == "" {
		t.Fatalf("values.schema.json has no pattern for %s.%s", group, key)
	}
	return regexp.MustCompile(p)
}

// TestSchemaStepIsServesStep keeps serve.step's pattern equal to the steps
// that serve accepts (live.Options.Check: a step that divides an hour), for
// every whole-second step up to an hour written as seconds, as minutes and
// as Go writes it: the schema refuses at install what serve would refuse
// at start, in a crash loop.
func TestSchemaStepIsServesStep(t *testing.T) {
	step := schemaPattern(t, "serve", "step")
	for s := 1; s <= 3600; s++ {
		d := time.Duration(s) * time.Second
		want := live.Options{Step: d}.Check() == nil
		forms := []string{fmt.Sprintf("%ds", s), d.String()}
		if s%60 == 0 {
			forms = append(forms, fmt.Sprintf("%dm", s/60))
		}
		for _, form := range forms {
			if got := step.MatchString(form); got != want {
				t.Errorf("serve.step %q: schema accepts it %v, serve accepts it %v", form, got, want)
			}
		}
	}
	for _, refused := range []string{"0s", "1h1s", "2h", "7200s", "30", "30 s", "1.5m"} {
		if step.MatchString(refused) {
			t.Errorf("serve.step %q: the schema accepts it; want it refused", refused)
		}
	}
}

// TestSchemaWindowIsServesWindow: serve.window is whole hours, at least one.
func TestSchemaWindowIsServesWindow(t *testing.T) {
	window := schemaPattern(t, "serve", "window")
	for _, s := range []string{"1h", "24h", "168h", "720h", "168h0m0s", "90m", "0h", "1.5h", "1h30m", "a day"} {
		d, err := time.ParseDuration(s)
		want := err == nil && live.Options{Window: d}.Check() == nil && d > 0
		if got := window.MatchString(s); got != want {
			t.Errorf("serve.window %q: schema accepts it %v, serve accepts it %v", s, got, want)
		}
	}
}

// TestSchemaRefusesWhatServeRefuses renders the chart: a step that does not
// divide an hour, a window of part of an hour and a Prometheus URL that is
// not one fail the install; the defaults and common values install.
func TestSchemaRefusesWhatServeRefuses(t *testing.T) {
	serve := func(k, v string) map[string]any { return map[string]any{"serve": map[string]any{k: v}} }
	prometheus := func(url string) map[string]any { return map[string]any{"prometheus": map[string]any{"url": url}} }
	refused := map[string]struct {
		values map[string]any
		want   string
	}{
		"step 7s":        {serve("step", "7s"), "step"},
		"step 2h":        {serve("step", "2h"), "step"},
		"window 90m":     {serve("window", "90m"), "window"},
		"url not a url":  {prometheus("not a url"), "url"},
		"url no scheme":  {prometheus("prometheus:9090"), "url"},
		"url with space": {prometheus("http://prom etheus:9090"), "url"},
	}
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			_, err := Render(Options{Values: tc.values})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v; want one naming %q", err, tc.want)
			}
		})
	}
	accepted := map[string]map[string]any{
		"defaults":    nil,
		"step 30s":    serve("step", "30s"),
		"step 1m":     serve("step", "1m"),
		"step 1m30s":  serve("step", "1m30s"),
		"step 15s":    serve("step", "15s"),
		"window 24h":  serve("window", "24h"),
		"refresh 5m":  serve("refresh", "5m"),
		"http url":    prometheus("http://prometheus:9090"),
		"https url":   prometheus("https://prometheus.example.com/api/prom"),
		"cluster url": prometheus("http://prometheus-operated.monitoring.svc:9090"),
	}
	for name, values := range accepted {
		t.Run(name, func(t *testing.T) {
			if _, err := Render(Options{Values: values}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
