package promql

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/VictoriaMetrics/metricsql"
)

// Selector is a list of PromQL label matchers, such as
// job="dcgm-exporter", that every query of dcgm-exporter's series adds to
// its selectors: series of the same names from another exporter (a
// second dcgm-exporter, a test job, anything that names a pod) are then
// never read, where otherwise they would add phantom pods and take a
// share of the real pods' GPUs. The zero Selector matches every series.
//
// It is kept in one canonical form (matchers sorted, values quoted as Go
// quotes them), so that the label that gpupack's recording rules carry
// (SelectorLabel) names it the same way however it was written.
type Selector struct {
	matchers string
	// shard are the matchers of one Prometheus' external labels, which
	// only its recorded series are selected by: the hourly path reads
	// each Prometheus that evaluated the rules on its own windows.
	shard string
}

// SelectorLabel is the label that every recorded series carries where the
// rules were generated with a Selector: its canonical form. A report
// reads only the rules of its own selector (none: recorded series without
// the label).
const SelectorLabel = "gpupack_selector"

// ParseSelector reads a PromQL label matcher list (name="value",
// name!="value", name=~"regex", name!~"regex", separated by commas,
// optionally in braces) with the MetricsQL parser, which reads all of
// PromQL's selectors. An empty s is the zero Selector. It refuses
// __name__, which gpupack's queries set themselves, "or" between matcher
// groups, and a regex that Go's regexp (RE2, as Prometheus uses) does not
// compile.
func ParseSelector(s string) (Selector, error) {
	in := strings.TrimSpace(s)
	if in == "" || in == "{}" {
		return Selector{}, nil
	}
	if !strings.HasPrefix(in, "{") {
		in = "{" + in + "}"
	}
	expr, err := metricsql.Parse(in)
	if err != nil {
		return Selector{}, fmt.Errorf("selector %q: %v; give matchers such as job=\"dcgm-exporter\"", s, err)
	}
	me, ok := expr.(*metricsql.MetricExpr)
	if !ok || len(me.LabelFilterss) != 1 {
		return Selector{}, fmt.Errorf("selector %q: want one list of label matchers, such as job=\"dcgm-exporter\", namespace=\"gpu-operator\"", s)
	}
	var ms []matcher
	for _, f := range me.LabelFilterss[0] {
		if f.Label == "__name__" {
			return Selector{}, fmt.Errorf("selector %q: __name__ is set by gpupack's queries; match other labels", s)
		}
		m := matcher{name: f.Label, op: "=", value: f.Value}
		switch {
		case f.IsRegexp && f.IsNegative:
			m.op = "!~"
		case f.IsRegexp:
			m.op = "=~"
		case f.IsNegative:
			m.op = "!="
		}
		if f.IsRegexp {
			if _, err := regexp.Compile("^(?:" + f.Value + ")$"); err != nil {
				return Selector{}, fmt.Errorf("selector %q: %s: %v", s, m, err)
			}
		}
		ms = append(ms, m)
	}
	if len(ms) == 0 {
		return Selector{}, nil
	}
	slices.SortFunc(ms, func(a, b matcher) int {
		return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.op, b.op), cmp.Compare(a.value, b.value))
	})
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.String()
	}
	return Selector{matchers: strings.Join(parts, ", ")}, nil
}

func (s Selector) String() string { return s.matchers }

// IsZero says whether s selects every series.
func (s Selector) IsZero() bool { return s.matchers == "" }

// and is s's matchers followed by more (a matcher list, "" for none).
func (s Selector) and(more string) string {
	switch {
	case s.matchers == "":
		return more
	case more == "":
		return s.matchers
	}
	return s.matchers + ", " + more
}

// of selects metric with s: metric{s}, the bare name for the zero
// Selector.
func (s Selector) of(metric string) string {
	if s.matchers == "" {
		return metric
	}
	return metric + "{" + s.matchers + "}"
}

// recorded are the matchers of gpupack's recorded series at step for s:
// the step label, and s's own label (none for the zero Selector, which an
// empty value matches).
func (s Selector) recorded(step string) string {
	out := fmt.Sprintf("%s=%q, %s=%q", StepLabel, step, SelectorLabel, s.matchers)
	if s.shard != "" {
		out += ", " + s.shard
	}
	return out
}

// matcher is one label matcher.
type matcher struct{ name, op, value string }

func (m matcher) String() string { return m.name + m.op + strconv.Quote(m.value) }
