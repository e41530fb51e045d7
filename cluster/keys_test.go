package cluster

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

func TestParsePodKey(t *testing.T) {
	cases := map[string]struct {
		text string
		want PodKey
		bad  bool
	}{
		"namespace and name": {text: "ml/train-0", want: PodKey{Namespace: "ml", Name: "train-0"}},
		"a bare name":        {text: "trace-pod", want: PodKey{Name: "trace-pod"}},
		"no name":            {text: "ml/", bad: true},
		"no namespace":       {text: "/train-0", bad: true},
		"a slash too many":   {text: "ml/a/b", bad: true},
		"empty":              {text: "", bad: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParsePodKey(tc.text)
			if (err != nil) != tc.bad {
				t.Fatalf("ParsePodKey(%q) error %v, want error %v", tc.text, err, tc.bad)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("ParsePodKey(%q) (-want +got):\n%s", tc.text, d)
			}
			if !tc.bad && got.String() != tc.text {
				t.Errorf("String() = %q, want %q", got.String(), tc.text)
			}
		})
	}
}

func TestPodKeyIsPodsKey(t *testing.T) {
	for _, p := range []*Pod{{Namespace: "ml", Name: "a"}, {Name: "trace-pod"}} {
		if got, want := (PodKey{Namespace: p.Namespace, Name: p.Name}).String(), p.Key(); got != want {
			t.Errorf("PodKey of %s is %q", want, got)
		}
	}
}

func TestDRADeviceIDSplitAndParse(t *testing.T) {
	cases := map[string]struct {
		text  string
		split DRADeviceID
		bad   bool
	}{
		"three parts":         {text: "gpu.nvidia.com/node-1/gpu-0", split: NewDRADeviceID("gpu.nvidia.com", "node-1", "gpu-0")},
		"a pool with a slash": {text: "d/pool/a/gpu-0", split: NewDRADeviceID("d", "pool/a", "gpu-0")},
		"no pool":             {text: "d//gpu-0", split: NewDRADeviceID("d", "", "gpu-0"), bad: true},
		"two parts":           {text: "d/gpu-0", split: NewDRADeviceID("d", "", "gpu-0"), bad: true},
		"no device":           {text: "d/pool/", split: NewDRADeviceID("d", "pool", ""), bad: true},
		"no driver":           {text: "/pool/gpu-0", split: NewDRADeviceID("", "pool", "gpu-0"), bad: true},
		"no slash":            {text: "gpu-0", split: NewDRADeviceID("gpu-0", "", ""), bad: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := SplitDRADeviceID(tc.text)
			if got != tc.split {
				t.Errorf("SplitDRADeviceID(%q) = %q %q %q, want %q %q %q", tc.text, got.Driver(), got.Pool(), got.Device(), tc.split.Driver(), tc.split.Pool(), tc.split.Device())
			}
			parsed, err := ParseDRADeviceID(tc.text)
			if (err != nil) != tc.bad {
				t.Fatalf("ParseDRADeviceID(%q) error %v, want error %v", tc.text, err, tc.bad)
			}
			if !tc.bad && (parsed != tc.split || parsed.String() != tc.text || DeviceID(parsed.Driver(), parsed.Pool(), parsed.Device()) != tc.text) {
				t.Errorf("ParseDRADeviceID(%q) = %v, want %v with the same text", tc.text, parsed, tc.split)
			}
		})
	}
}

// TestKeysMarshalAsText: a PodKey or DRADeviceID in JSON or YAML, as a
// value or a map key, writes and reads the same bytes as its text form in
// a string would.
func TestKeysMarshalAsText(t *testing.T) {
	type typed struct {
		Pod     PodKey              `json:"pod"`
		Device  DRADeviceID         `json:"device"`
		Pods    map[PodKey]int      `json:"pods"`
		Devices map[DRADeviceID]int `json:"devices"`
	}
	type text struct {
		Pod     string         `json:"pod"`
		Device  string         `json:"device"`
		Pods    map[string]int `json:"pods"`
		Devices map[string]int `json:"devices"`
	}
	in := typed{Pod: PodKey{Namespace: "ml", Name: "a"}, Device: NewDRADeviceID("d", "p/q", "gpu-0"),
		Pods:    map[PodKey]int{{Namespace: "ml", Name: "b"}: 1, {Namespace: "a", Name: "z"}: 2, {Name: "bare"}: 3},
		Devices: map[DRADeviceID]int{NewDRADeviceID("d", "p", "gpu-1"): 1, NewDRADeviceID("c", "p", "gpu-0"): 2}}
	same := text{Pod: "ml/a", Device: "d/p/q/gpu-0", Pods: map[string]int{"ml/b": 1, "a/z": 2, "bare": 3}, Devices: map[string]int{"d/p/gpu-1": 1, "c/p/gpu-0": 2}}
	for name, marshal := range map[string]func(any) ([]byte, error){"json": json.Marshal, "yaml": func(v any) ([]byte, error) { return yaml.Marshal(v) }} {
		t.Run(name, func(t *testing.T) {
			got, err := marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			want, err := marshal(same)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(string(want), string(got)); d != "" {
				t.Errorf("marshalled (-as strings +typed):\n%s", d)
			}
			var back typed
			if err := yaml.Unmarshal(got, &back); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(in, back, cmp.AllowUnexported(DRADeviceID{})); d != "" {
				t.Errorf("read back (-want +got):\n%s", d)
			}
		})
	}
	var bad typed
	if err := json.Unmarshal([]byte(`{"device": "d/gpu-0"}`), &bad); err == nil {
		t.Error("a device ID without a pool was read")
	}
	if err := json.Unmarshal([]byte(`{"pod": "ml/"}`), &bad); err == nil {
		t.Error("a pod key without a name was read")
	}
}
