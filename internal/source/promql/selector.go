package promql

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
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
}

// SelectorLabel is the label that every recorded series carries where the
// rules were generated with a Selector: its canonical form. A report
// reads only the rules of its own selector (none: recorded series without
// the label).
const SelectorLabel = "gpupack_selector"

// ParseSelector reads a PromQL label matcher list (name="value",
// name!="value", name=~"regex", name!~"regex", separated by commas,
// optionally in braces), as Prometheus parses the inside of a selector's
// braces. An empty s is the zero Selector. It refuses __name__, which
// gpupack's queries set themselves, and a regex that does not compile.
func ParseSelector(s string) (Selector, error) {
	in := strings.TrimSpace(s)
	if inner, ok := strings.CutPrefix(in, "{"); ok {
		var closed bool
		if in, closed = strings.CutSuffix(inner, "}"); !closed {
			return Selector{}, fmt.Errorf("selector %q: a { without its }; give matchers such as job=\"dcgm-exporter\"", s)
		}
	}
	var ms []matcher
	p := &matcherParser{in: in}
	for p.skipSpace(); p.pos < len(p.in); p.skipSpace() {
		m, err := p.matcher()
		if err != nil {
			return Selector{}, fmt.Errorf("selector %q: %w; give matchers such as job=\"dcgm-exporter\"", s, err)
		}
		ms = append(ms, m)
		p.skipSpace()
		if p.pos < len(p.in) && p.in[p.pos] != ',' {
			return Selector{}, fmt.Errorf("selector %q: want a comma after %s at offset %d; give matchers such as job=\"dcgm-exporter\", namespace=\"gpu-operator\"", s, m, p.pos)
		}
		p.pos++
	}
	slices.SortFunc(ms, func(a, b matcher) int {
		return cmp.Or(strings.Compare(a.name, b.name), strings.Compare(a.op, b.op), strings.Compare(a.value, b.value))
	})
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.String()
	}
	return Selector{matchers: strings.Join(parts, ", ")}, nil
}

// String is the canonical matcher list, "" for the zero Selector.
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
	return fmt.Sprintf("%s=%q, %s=%q", StepLabel, step, SelectorLabel, s.matchers)
}

// matcher is one label matcher.
type matcher struct{ name, op, value string }

func (m matcher) String() string { return m.name + m.op + strconv.Quote(m.value) }

// matcherParser reads matchers from in, from pos.
type matcherParser struct {
	in  string
	pos int
}

var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*`)

func (p *matcherParser) skipSpace() {
	for p.pos < len(p.in) && strings.ContainsRune(" \t\r\n", rune(p.in[p.pos])) {
		p.pos++
	}
}

// matcher reads one matcher at pos.
func (p *matcherParser) matcher() (matcher, error) {
	name := labelName.FindString(p.in[p.pos:])
	if name == "" {
		return matcher{}, fmt.Errorf("want a label name at offset %d", p.pos)
	}
	if name == "__name__" {
		return matcher{}, fmt.Errorf("__name__ is set by gpupack's queries; match other labels")
	}
	p.pos += len(name)
	p.skipSpace()
	var op string
	for _, o := range []string{"=~", "!~", "!=", "="} {
		if strings.HasPrefix(p.in[p.pos:], o) {
			op = o
			break
		}
	}
	if op == "" {
		return matcher{}, fmt.Errorf("want =, !=, =~ or !~ after %s at offset %d", name, p.pos)
	}
	p.pos += len(op)
	p.skipSpace()
	value, err := p.quoted()
	if err != nil {
		return matcher{}, err
	}
	if op == "=~" || op == "!~" {
		if _, err := regexp.Compile("^(?:" + value + ")$"); err != nil {
			return matcher{}, fmt.Errorf("%s%s%q: %v", name, op, value, err)
		}
	}
	return matcher{name, op, value}, nil
}

// quoted reads a PromQL string at pos: "..." or '...' with Go's escapes,
// or `...` raw.
func (p *matcherParser) quoted() (string, error) {
	start := p.pos
	if start >= len(p.in) || !strings.ContainsRune("\"'`", rune(p.in[start])) {
		return "", fmt.Errorf("want a quoted value at offset %d", start)
	}
	q := p.in[start]
	end := start + 1
	for end < len(p.in) && p.in[end] != q {
		if p.in[end] == '\\' && q != '`' {
			end++
		}
		end++
	}
	if end >= len(p.in) {
		return "", fmt.Errorf("the value at offset %d has no closing %c", start, q)
	}
	p.pos = end + 1
	body := p.in[start+1 : end]
	if q == '\'' {
		// As a double-quoted string: a ' needs no escape there, a " does.
		body = strings.NewReplacer(`\'`, `'`, `"`, `\"`).Replace(body)
		q = '"'
	}
	v, err := strconv.Unquote(string(q) + body + string(q))
	if err != nil || !utf8.ValidString(v) {
		return "", fmt.Errorf("the value at offset %d is not a valid string", start)
	}
	return v, nil
}
