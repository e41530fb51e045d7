package yamldoc

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type seconds time.Duration

func (s *seconds) UnmarshalText(b []byte) error {
	d, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration; write one such as 30s", b)
	}
	*s = seconds(d)
	return nil
}

type inner struct {
	N     int      `json:"n"`
	Ratio float64  `json:"ratio,omitempty"`
	Tags  []string `json:"tags,omitempty"`
}

type doc struct {
	Name   string            `json:"name"`
	Count  uint8             `json:"count"`
	On     bool              `json:"on"`
	Every  seconds           `json:"every"`
	Labels map[string]string `json:"labels"`
	Items  []inner           `json:"items"`
	Ptr    *inner            `json:"ptr"`
}

func TestDecode(t *testing.T) {
	cases := map[string]struct {
		in   string
		want doc
	}{
		"yaml": {"name: a\ncount: 255\non: true\nevery: 90s\nlabels: {1: yes, b: 0.1}\nitems: [{n: 0x10, ratio: 1}]\nptr: {n: -3}\n",
			doc{Name: "a", Count: 255, On: true, Every: seconds(90 * time.Second), Labels: map[string]string{"1": "yes", "b": "0.1"},
				Items: []inner{{N: 16, Ratio: 1}}, Ptr: &inner{N: -3}}},
		"json":   {`{"name": "a", "items": [{"n": 1, "tags": ["x"]}]}`, doc{Name: "a", Items: []inner{{N: 1, Tags: []string{"x"}}}}},
		"merged": {"items: [&b {n: 1, ratio: 0.5}, {<<: *b, n: 2}]\n", doc{Items: []inner{{N: 1, Ratio: 0.5}, {N: 2, Ratio: 0.5}}}},
		"null":   {"name: ~\nptr: null\n", doc{}},
		"empty":  {"", doc{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got doc
			if _, err := Decode([]byte(tc.in), "d.yaml", &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	// 2,000 tags referenced 1,000 times: 2 million values from 20 kB.
	laughs := "items:\n- tags: &t [" + strings.Repeat("x, ", 1999) + "x]\n" + strings.Repeat("- tags: *t\n", 1000)
	cases := map[string]struct{ in, want string }{
		"string for int":  {"items:\n- {n: \"8\"}\n", `d.yaml:2: items[0].n: "8" is a string; want an integer`},
		"uint range":      {"count: 256\n", "d.yaml:1: count: 256 is out of range (want 0..255)"},
		"negative uint":   {"count: -1\n", "d.yaml:1: count: -1 is out of range (want 0..255)"},
		"int overflow":    {"items: [{n: 99999999999999999999}]\n", "d.yaml:1: items[0].n: 99999999999999999999 is out of range (want -9223372036854775808..9223372036854775807)"},
		"not whole":       {"items: [{n: 1.5}]\n", "items[0].n: 1.5 is not a whole number; want an integer"},
		"nan":             {"items: [{n: 1, ratio: .nan}]\n", "items[0].ratio: .nan is not a finite number"},
		"bool":            {"on: yes\n", `d.yaml:1: on: "yes" is a string; want true or false`},
		"text unmarshal":  {"every: soon\n", `d.yaml:1: every: "soon" is not a duration; write one such as 30s`},
		"list for string": {"name: [a]\n", "d.yaml:1: name: a list; want a string"},
		"scalar for map":  {"labels: 3\n", "d.yaml:1: labels: 3 is a number; want a mapping (key: value)"},
		"unknown":         {"name: a\nNAME: b\n", `d.yaml:2: unknown field "NAME"; want one of count, every, items, labels, name, on, ptr`},
		"twice":           {"name: a\nname: b\n", "d.yaml:2: name: given twice (first at line 1)"},
		"second doc":      {"name: a\n---\nname: b\n", "d.yaml:2: a second document"},
		"trailing":        {`{"name": "a"} }`, "d.yaml: text after the end of the document"},
		"not yaml":        {"name: [\n", "d.yaml: "},
		"laughs":          {laughs, "expands through aliases"},
		"several":         {"name: [a]\non: 1\n", "d.yaml:1: name: a list; want a string\nd.yaml:2: on: 1 is a number; want true or false"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got doc
			_, err := Decode([]byte(tc.in), "d.yaml", &got)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestLine(t *testing.T) {
	var v struct {
		Pods []struct {
			Name string `json:"name"`
			Node string `json:"node"`
		} `json:"pods"`
	}
	d, err := Decode([]byte("pods:\n- name: a\n  node: x\n- name: b\n"), "s.yaml", &v)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{
		d.Errorf([]any{"pods", 0, "node"}, "no such node").Error(),
		d.Errorf([]any{"pods", 1, "node"}, "missing").Error(),
		d.Errorf([]any{"pods", 7}, "x").Error(),
	}
	want := []string{"s.yaml:3: pods[0].node: no such node", "s.yaml:4: pods[1].node: missing", "s.yaml:2: pods[7]: x"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
