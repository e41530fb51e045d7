package usage

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gpupack/gpupack/cluster"
)

// dcgm-exporter's metric names that usage reads.
const (
	// GREngineActive is the ratio (0..1) of time the graphics or compute
	// engine was busy: the preferred activity source.
	GREngineActive = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
	// SMActive is the ratio (0..1) of time at least one warp was resident
	// on an SM, averaged over SMs: the second activity source.
	SMActive = "DCGM_FI_PROF_SM_ACTIVE"
	// GPUUtil is the percentage (0..100) of time a kernel ran: the last
	// activity source, coarse and available without profiling.
	GPUUtil = "DCGM_FI_DEV_GPU_UTIL"
	// FBUsed and FBFree are framebuffer MiB used and free.
	FBUsed = "DCGM_FI_DEV_FB_USED"
	FBFree = "DCGM_FI_DEV_FB_FREE"
	// DRAMActive is the ratio (0..1) of cycles the memory interface was busy.
	DRAMActive = "DCGM_FI_PROF_DRAM_ACTIVE"
	// PowerUsage is the board power draw in watts.
	PowerUsage = "DCGM_FI_DEV_POWER_USAGE"
	// TotalEnergy is a counter of energy since boot in millijoules.
	TotalEnergy = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
)

// Metrics lists every metric usage reads, activity sources first in their
// order of preference.
var Metrics = []string{GREngineActive, SMActive, GPUUtil, FBUsed, FBFree, DRAMActive, PowerUsage, TotalEnergy}

// ActivitySources are the activity metrics in order of preference.
var ActivitySources = []string{GREngineActive, SMActive, GPUUtil}

// Seconds is a duration in seconds; GPU-seconds are Seconds of one whole GPU.
type Seconds float64

// Hours converts to hours.
func (s Seconds) Hours() float64 { return float64(s) / 3600 }

// Device names one GPU or one MIG slice by dcgm-exporter's labels.
type Device struct {
	Node  string `json:"node"`  // Hostname
	GPU   string `json:"gpu"`   // gpu: the index on the node
	UUID  string `json:"uuid"`  // UUID of the physical GPU
	Model string `json:"model"` // modelName, e.g. "NVIDIA H100 80GB HBM3"
	// MIGProfile and MIGInstance are GPU_I_PROFILE and GPU_I_ID; empty for
	// a whole GPU.
	MIGProfile  string `json:"migProfile,omitempty"`
	MIGInstance string `json:"migInstance,omitempty"`
}

// Key identifies the device uniquely within a cluster.
func (d Device) Key() string {
	var buf [128]byte
	return string(d.appendKey(buf[:0]))
}

// appendKey appends the device's Key to b: where a key is only looked up,
// a map index with string(b) allocates nothing.
func (d Device) appendKey(b []byte) []byte {
	b = append(append(append(append(append(b, d.Node...), '/'), d.GPU...), '/'), d.UUID...)
	if d.MIGInstance != "" {
		b = append(append(b, "/mig"...), d.MIGInstance...)
	}
	return b
}

// Owner is the container that holds a device; the zero Owner is nobody.
type Owner struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Container string `json:"container,omitempty"`
}

// IsZero reports whether nobody holds the device.
func (o Owner) IsZero() bool { return o.Pod == "" }

// PodKey is "namespace/pod".
func (o Owner) PodKey() string { return o.Namespace + "/" + o.Pod }

// compareOwnerKeys orders owners as their keys "namespace/pod/container" order,
// without building them (a report sorts every device's owners).
func compareOwnerKeys(x, y Owner) int {
	return compareJoined([]string{x.Namespace, "/", x.Pod, "/", x.Container}, []string{y.Namespace, "/", y.Pod, "/", y.Container})
}

// compareJoined compares the strings that xs and ys join into, without
// joining them.
func compareJoined(xs, ys []string) int {
	i, j := 0, 0 // the part of each
	var a, b string
	for {
		for a == "" && i < len(xs) {
			a, i = xs[i], i+1
		}
		for b == "" && j < len(ys) {
			b, j = ys[j], j+1
		}
		switch {
		case a == "" && b == "":
			return 0
		case a == "":
			return -1
		case b == "":
			return 1
		}
		n := min(len(a), len(b))
		if c := strings.Compare(a[:n], b[:n]); c != 0 {
			return c
		}
		a, b = a[n:], b[n:]
	}
}

// Sample is one value at a time in Unix milliseconds.
type Sample struct {
	TimeMs int64
	Value  float64
}

// DRAHold is what dcgm-exporter's DRA labels say of an owner's series
// (dra_claim_namespace, dra_claim_name, dra_driver_name, dra_pool_name,
// dra_device_name: dcgm-exporter 4.x on a kubelet whose pod-resources API
// lists ResourceClaims, KubeletPodResourcesDynamicResources): the claim
// that allocated the device to the owner and the DRA device it names. The
// zero DRAHold is a device of the device plugin, or an exporter without
// those labels.
type DRAHold struct {
	ClaimNamespace string `json:"claimNamespace,omitempty"`
	ClaimName      string `json:"claimName,omitempty"`
	Driver         string `json:"driver,omitempty"`
	Pool           string `json:"pool,omitempty"`
	Device         string `json:"device,omitempty"`
}

// IsZero reports whether the series carried no DRA labels.
func (h DRAHold) IsZero() bool { return h == DRAHold{} }

// Claim is "namespace/name" of the claim; "" if the labels name none.
func (h DRAHold) Claim() string {
	if h.ClaimName == "" {
		return ""
	}
	return h.ClaimNamespace + "/" + h.ClaimName
}

// DeviceID is "driver/pool/device" (cluster.DeviceID); "" if the labels
// name no device.
func (h DRAHold) DeviceID() string {
	if h.Device == "" {
		return ""
	}
	return cluster.DeviceID(h.Driver, h.Pool, h.Device)
}

// Series is one metric of one device as seen by one owner (or by nobody).
type Series struct {
	Metric  string
	Device  Device
	Owner   Owner
	Samples []Sample
	// DRA is what the series' DRA labels say of its owner's hold; zero
	// without them.
	DRA DRAHold
}

// Window is the span accounted and the spacing of samples in it. Samples
// are taken to stand for Step seconds from their time on; a range query
// with this step gives exactly that.
type Window struct {
	Start time.Time
	End   time.Time
	Step  time.Duration
}

// MaxSteps is the most steps one Window may have, whatever the source:
// Account keeps several values per step of every device, and a Prometheus
// range query returns at most 11,000 points per series. A longer window
// needs a longer step (MinStep).
const MaxSteps = 11000

// MinStep is the shortest whole-second step that keeps a window of this
// length within MaxSteps.
func MinStep(length time.Duration) time.Duration {
	step := (length + MaxSteps - 1) / MaxSteps
	return (step + time.Second - 1).Truncate(time.Second)
}

// DefaultStep is the query step for a window read raw: 30 s, or the
// shortest whole number of seconds that keeps the window within MaxSteps.
func DefaultStep(length time.Duration) time.Duration {
	return max(30*time.Second, MinStep(length))
}

// Slots is the number of steps in the window, the last possibly partial.
func (w Window) Slots() int {
	if w.Step <= 0 || !w.End.After(w.Start) {
		return 0
	}
	return int((w.End.Sub(w.Start) + w.Step - 1) / w.Step)
}

// Check says why the window cannot be accounted: it has no steps, or more
// than MaxSteps. Sources call it before they read or allocate anything.
func (w Window) Check() error {
	slots := w.Slots()
	if slots == 0 {
		return fmt.Errorf("window %s..%s with step %s has no steps; give an end after the start and a positive step", w.Start.Format(time.RFC3339), w.End.Format(time.RFC3339), w.Step)
	}
	if w.Step%time.Millisecond != 0 {
		return fmt.Errorf("window step %s is not a whole number of milliseconds, the resolution of samples; use a step such as 30s", w.Step)
	}
	if slots > MaxSteps {
		return fmt.Errorf("window %s..%s with step %s has %d steps, more than the %d one window may have; use a step of %s or more, or a shorter window", w.Start.Format(time.RFC3339), w.End.Format(time.RFC3339), w.Step, slots, MaxSteps, MinStep(w.End.Sub(w.Start)))
	}
	return nil
}

// Amount is a number that may be unknown. Unknown prints as "unknown" and
// encodes as JSON null; it is never silently zero. Its zero value is
// Unknown.
//
// It is held in 8 bytes, not as a float and a flag (16 with padding): a
// report holds about 40 of them per pod, and a month of a fleet's report
// 180,000 pods. bits is the value's IEEE 754 bits XOR unknownBits, so
// that the zero value is unknown; a NaN is unknown, which is what it
// always printed and encoded as. Amounts compare with == (unknown equals
// unknown).
type Amount struct {
	bits uint64
}

// unknownBits is a quiet NaN: the bits of no value a known Amount holds,
// since Known makes every NaN unknown.
const unknownBits = 0x7ff8_0000_0000_0001

// Known makes a known Amount; a NaN makes Unknown.
func Known(v float64) Amount {
	if math.IsNaN(v) {
		return Unknown
	}
	return Amount{bits: math.Float64bits(v) ^ unknownBits}
}

// Unknown is the unknown Amount.
var Unknown = Amount{}

// Known says whether a has a value.
func (a Amount) Known() bool { return a.bits != 0 }

// Value is a's value, 0 when unknown.
func (a Amount) Value() float64 {
	if a.bits == 0 {
		return 0
	}
	return math.Float64frombits(a.bits ^ unknownBits)
}

// Equal is ==: go-cmp compares Amounts by it.
func (a Amount) Equal(b Amount) bool { return a == b }

// String prints a's value as %g does, or "unknown".
func (a Amount) String() string {
	if !a.Known() {
		return "unknown"
	}
	return strconv.FormatFloat(a.Value(), 'g', -1, 64)
}

// Fixed prints the amount times scale with prec decimals and suffix, or
// "unknown": the one way every table and page prints an Amount.
func (a Amount) Fixed(scale float64, prec int, suffix string) string {
	if !a.finite() {
		return "unknown"
	}
	return strconv.FormatFloat(a.Value()*scale, 'f', prec, 64) + suffix
}

// jsonNull is what every unknown Amount encodes as: one slice, which the
// encoder copies and never changes (a month of a fleet's report has
// millions of unknowns).
var jsonNull = []byte("null")[:4:4]

// MarshalJSON encodes unknown as null and a known value as encoding/json
// encodes a float64, byte for byte, in one allocation of its length
// rather than json.Marshal's two.
func (a Amount) MarshalJSON() ([]byte, error) {
	if !a.finite() {
		return jsonNull, nil
	}
	var buf [32]byte
	b := a.appendJSON(buf[:0])
	return append(make([]byte, 0, len(b)), b...), nil // no larger than it is: most are a few bytes, which the runtime packs together
}

// appendJSON appends a as MarshalJSON writes it.
func (a Amount) appendJSON(b []byte) []byte {
	if !a.finite() {
		return append(b, jsonNull...)
	}
	return appendJSONFloat(b, a.Value())
}

// finite says a is known and a finite number: what JSON can hold.
func (a Amount) finite() bool {
	return a.Known() && !math.IsInf(a.Value(), 0) // Known holds no NaN
}

// appendJSONFloat appends f as encoding/json writes a float64: the
// shortest decimal that reads back as f, in exponent form only below 1e-6
// or from 1e21 on, with a one-digit exponent where it fits (1e-7, not
// 1e-07).
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// UnmarshalJSON reads null as unknown.
func (a *Amount) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*a = Unknown
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*a = Known(v)
	return nil
}

// The per-pod series of `gpupack agent`, labelled as dcgm-exporter labels
// a device (Hostname, gpu, UUID, modelName, GPU_I_PROFILE, GPU_I_ID) and
// its holder (namespace, pod, container). Account reads PodSMActive and
// PodFBUsed to attribute a shared GPU (AttributionPerProcess).
const (
	// PodSMActive is the share, 0..1, of the interval in which the
	// container's processes ran kernels on the device (NVML's per-process
	// SM utilisation, summed over the container's processes).
	PodSMActive = "GPUPACK_POD_SM_ACTIVE"
	// PodMemActive is the share, 0..1, of the interval in which the
	// container's processes used the memory interface.
	PodMemActive = "GPUPACK_POD_MEM_ACTIVE"
	// PodFBUsed is the framebuffer MiB the container's processes held.
	PodFBUsed = "GPUPACK_POD_FB_USED"
	// DeviceAttributed is the agent's coverage of a device: the share,
	// 0..1, of its processes' activity that went to pods holding it.
	DeviceAttributed = "GPUPACK_DEV_ATTRIBUTED_RATIO"
)

// AgentMetrics are the agent's series Account reads.
var AgentMetrics = []string{PodSMActive, PodFBUsed}
