package usage

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
)

// encoded is r as json.Encoder with a two-space indent writes it: what
// WriteJSON must write byte for byte.
func encoded(t *testing.T, r *Report) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestWriteJSONAsEncoder: WriteJSON writes what the encoder writes, for a
// report with pods, devices and containers (hostile names included), with
// none (nil, null), and with empty but non-nil lists ([]).
func TestWriteJSONAsEncoder(t *testing.T) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	full := &Report{Accounting: HourlyAccounting, Start: start, End: start.Add(time.Hour), Currency: "EUR",
		Devices:    []DeviceUsage{{Device: Device{Node: "n<1>", GPU: "0", UUID: "GPU-0"}, Share: 1, SharedBy: []string{"a/\"b\""}}, {Device: Device{Node: "n2", GPU: "1"}}},
		Containers: []ContainerUsage{{Owner: Owner{Namespace: "a", Pod: "p&q", Container: "main"}}},
		Pods: []PodUsage{{Namespace: "a", Pod: "p&q", Node: "n<1>", Devices: []string{"n<1>/0/GPU-0"}, HourlyActivity: []float64{0.5, 0}, Startup: Startup{Workload: "w"}},
			{Namespace: "b", Pod: "x\u2028y", Node: "n2"}},
		Namespaces: []GroupUsage{{Name: "a", Pods: 1}},
		Quality:    Quality{ActivitySources: map[string]int{"none": 1}, Warnings: []string{"</script>"}},
	}
	empty := &Report{Devices: []DeviceUsage{}, Containers: []ContainerUsage{}, Pods: []PodUsage{}}
	onlyPods := &Report{Pods: full.Pods}
	for name, r := range map[string]*Report{"full": full, "nil lists": {}, "empty lists": empty, "only pods": onlyPods} {
		var b bytes.Buffer
		if err := r.WriteJSON(&b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d := cmp.Diff(encoded(t, r), b.String()); d != "" {
			t.Errorf("%s: WriteJSON differs from json.Encoder (-encoder +WriteJSON):\n%s", name, d)
		}
	}
}

// BenchmarkWriteJSON writes a week's report of 1,000 GPUs' pods (42,000
// pods) with WriteJSON and with json.Encoder, into io.Discard.
func BenchmarkWriteJSON(b *testing.B) {
	start, _, end, complete, partial := refreshWorld(1000, 168)
	a, err := NewBucketAccount(start, end)
	if err != nil {
		b.Fatal(err)
	}
	if err := a.AddAll(complete); err != nil {
		b.Fatal(err)
	}
	if err := a.AddAll(partial); err != nil {
		b.Fatal(err)
	}
	r, err := a.Report(Pricing{}, nil, nil, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("WriteJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := r.WriteJSON(discard{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Encoder", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			enc := json.NewEncoder(discard{})
			enc.SetIndent("", "  ")
			if err := enc.Encode(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// FuzzWriteIndented: writeIndented indents any valid JSON, once compact,
// byte for byte as json.Indent does.
func FuzzWriteIndented(f *testing.F) {
	for _, seed := range []string{`{}`, `[]`, `{"a":[]}`, `[{},[],{"b":{}}]`, `"x"`, `1.5e-7`, `null`,
		`{"k\\\"":"v,:{}[]\\\\","n":[1,-2,true,false,null,{"x":"\u2028"}]}`, ` [ 1 , { "a" : "b" } ] `} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if !json.Valid(in) {
			return
		}
		var compact, want bytes.Buffer
		if err := json.Compact(&compact, in); err != nil {
			t.Fatal(err)
		}
		if err := json.Indent(&want, compact.Bytes(), "    ", "  "); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		w := bufio.NewWriter(&got)
		writeIndented(w, compact.Bytes(), "    ", "  ")
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want.String(), got.String()); d != "" {
			t.Errorf("writeIndented(%q) differs from json.Indent (-Indent +writeIndented):\n%s", compact.Bytes(), d)
		}
	})
}

// FuzzAmountJSON: a known Amount encodes as encoding/json encodes its
// float64, byte for byte; NaN, infinities and unknowns as null.
func FuzzAmountJSON(f *testing.F) {
	for _, v := range []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 1e-6, 9.99e-7, 1e-7, 1.5e-300, 5e-324, 1e20, 1e21, 123456789e13, math.MaxFloat64, -2.5e-8, 3600, 0.8500000238418579, math.NaN(), math.Inf(1)} {
		f.Add(math.Float64bits(v), true)
	}
	f.Add(uint64(0), false)
	f.Fuzz(func(t *testing.T, bits uint64, known bool) {
		v := math.Float64frombits(bits)
		a := Unknown
		if known {
			a = Known(v)
		}
		got, err := a.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		want := []byte("null")
		if known && !math.IsNaN(v) && !math.IsInf(v, 0) {
			if want, err = json.Marshal(v); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Amount{%v, %v} encodes as %s, want %s", v, known, got, want)
		}
	})
}

// FuzzAmount: an Amount holds every value but NaN exactly, sign of zero
// included; its zero value and every NaN are unknown; == tells Amounts
// apart by value and knownness alone; JSON reads back what it wrote.
func FuzzAmount(f *testing.F) {
	for _, v := range []float64{0, math.Copysign(0, -1), 1, -1, 5e-324, math.MaxFloat64, math.Inf(-1), math.NaN(), math.Float64frombits(unknownBits)} {
		f.Add(math.Float64bits(v))
	}
	f.Fuzz(func(t *testing.T, bits uint64) {
		v := math.Float64frombits(bits)
		a := Known(v)
		if math.IsNaN(v) {
			if a != Unknown || a.Known() || a.Value() != 0 {
				t.Fatalf("Known(NaN %#x) = %v (known %v, value %v), want Unknown", bits, a, a.Known(), a.Value())
			}
			return
		}
		if !a.Known() || math.Float64bits(a.Value()) != bits {
			t.Fatalf("Known(%v).Value() = %v (known %v), want the same bits", v, a.Value(), a.Known())
		}
		if a == Unknown || !a.Equal(Known(v)) || a.Equal(Unknown) {
			t.Fatalf("Known(%v) compares wrongly with Unknown or itself", v)
		}
		b, err := a.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var back Amount
		if err := back.UnmarshalJSON(b); err != nil {
			t.Fatalf("%s does not read back: %v", b, err)
		}
		if a.finite() && back.Value() != v || !a.finite() && back != Unknown {
			t.Fatalf("Known(%v) wrote %s, read back as %v", v, b, back)
		}
	})
}

func TestAmountZero(t *testing.T) {
	var zero Amount
	if zero.Known() || zero.Value() != 0 || zero != Unknown || zero.String() != "unknown" {
		t.Errorf("the zero Amount is %v (known %v, value %v), want Unknown", zero, zero.Known(), zero.Value())
	}
	if z := Known(0); !z.Known() || z == Unknown || z.String() != "0" {
		t.Errorf("Known(0) = %v (known %v), want a known 0 apart from Unknown", z, z.Known())
	}
	if s := unsafe.Sizeof(zero); s != 8 {
		t.Errorf("an Amount takes %d bytes, want 8: a month of a fleet's report holds about 7 million of them", s)
	}
}
