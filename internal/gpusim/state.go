package gpusim

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpupack/gpupack/usage"
)

// reading is one device's values at a moment, with its holders.
type reading struct {
	device   usage.Device
	holders  []*Pod
	activity float64 // ratio 0..1 of the whole device
	fbUsed   float64 // MiB
	fbFree   float64 // MiB
	dram     float64 // ratio 0..1
	powerW   float64
	energyMJ float64 // since "boot", the scenario's start
	xid      float64 // the last XID error of the physical GPU, 0 if none
	// The bus rates of the holders' input, bytes per second.
	pcieRx, pcieTx, nvlinkRx, nvlinkTx float64
}

// Power model: idle draw plus a share of the headroom by activity.
const (
	idleWatts = 60.0
	peakWatts = 400.0
)

// devices lists every GPU and MIG slice in a stable order.
func (s *Scenario) devices() []usage.Device {
	var out []usage.Device
	for ni, n := range s.Nodes {
		m := s.models[n.Name]
		for g := 0; g < n.GPUs; g++ {
			base := usage.Device{
				Node:  n.Name,
				GPU:   strconv.Itoa(g),
				UUID:  fmt.Sprintf("GPU-%08x-0000-4000-8000-%012x", ni+1, g+1),
				Model: m.Product,
			}
			slices := n.MIG[strconv.Itoa(g)]
			if len(slices) == 0 {
				out = append(out, base)
				continue
			}
			for si, p := range slices {
				d := base
				d.MIGProfile = p
				d.MIGInstance = strconv.Itoa(si + 1)
				out = append(out, d)
			}
		}
	}
	return out
}

// memory is the framebuffer of a device in MiB.
func (s *Scenario) memory(d usage.Device) float64 {
	m := s.models[d.Node]
	if d.MIGProfile != "" && m.MIG != nil {
		if p, ok := m.MIG.Profile(d.MIGProfile); ok {
			return float64(p.Memory)
		}
	}
	return float64(m.Usable)
}

// holds reports whether the pod holds device d at t.
func (s *Scenario) holds(p *Pod, d usage.Device, t time.Duration) bool {
	if p.Node != d.Node || strconv.Itoa(p.GPU) != d.GPU || t < p.From.D() || t >= p.To.D() {
		return false
	}
	if p.Slice == nil {
		return d.MIGInstance == ""
	}
	return d.MIGInstance == strconv.Itoa(*p.Slice+1)
}

// at is the state of every device t after the scenario's start.
func (s *Scenario) at(t time.Duration) []reading {
	devs := s.devices()
	onDevice := s.podsByDevice(devs)
	out := make([]reading, len(devs))
	for i, d := range devs {
		out[i] = s.readDevice(d, onDevice[i], t, nil) // Parse refuses more memory than the device has
	}
	return out
}

// family describes one metric as dcgm-exporter does.
type family struct {
	name, typ, help string
	value           func(r *reading) float64
}

// families are the metrics served, with dcgm-exporter's HELP texts.
var families = []family{
	{usage.GPUUtil, "gauge", "GPU utilization (in %).", func(r *reading) float64 { return math.Round(r.activity * 100) }},
	{usage.FBFree, "gauge", "Framebuffer memory free (in MiB).", func(r *reading) float64 { return math.Round(r.fbFree) }},
	{usage.FBUsed, "gauge", "Framebuffer memory used (in MiB).", func(r *reading) float64 { return math.Round(r.fbUsed) }},
	{usage.PowerUsage, "gauge", "Power draw (in W).", func(r *reading) float64 { return r.powerW }},
	{usage.TotalEnergy, "counter", "Total energy consumption since boot (in mJ).", func(r *reading) float64 { return math.Round(r.energyMJ) }},
	{usage.GREngineActive, "gauge", "Ratio of time the graphics engine is active.", func(r *reading) float64 { return r.activity }},
	{usage.SMActive, "gauge", "The ratio of cycles an SM has at least 1 warp assigned.", func(r *reading) float64 { return r.activity }},
	{usage.DRAMActive, "gauge", "Ratio of cycles the device memory interface is active sending or receiving data.", func(r *reading) float64 { return r.dram }},
	// In dcgm-exporter's default counters (etc/default-counters.csv); a
	// MIG instance's series carry its GPU's value.
	{usage.XIDErrors, "gauge", "Value of the last XID error encountered.", func(r *reading) float64 { return r.xid }},
}

// busFamilies are DCGM's PCIe and NVLink rate fields, served where a pod
// scripts its input: the PCIe ones with the HELP of dcgm-exporter's
// etc/default-counters.csv; the NVLink ones (DCGM fields 1011 and 1012)
// are not among its default counters and need a counters file that names
// them.
var busFamilies = []family{
	{usage.PCIeTxBytes, "gauge", "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.", func(r *reading) float64 { return r.pcieTx }},
	{usage.PCIeRxBytes, "gauge", "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.", func(r *reading) float64 { return r.pcieRx }},
	{usage.NVLinkTxBytes, "gauge", "The rate of data transmitted over NVLink, not including protocol headers, in bytes per second.", func(r *reading) float64 { return r.nvlinkTx }},
	{usage.NVLinkRxBytes, "gauge", "The rate of data received over NVLink, not including protocol headers, in bytes per second.", func(r *reading) float64 { return r.nvlinkRx }},
}

// served are the families the scenario's exporter serves: the bus rates
// only where a pod scripts its input, as an exporter without them in its
// counters file serves none.
func (s *Scenario) served() []family {
	for i := range s.Pods {
		if s.Pods[i].Input != nil {
			return append(families[:len(families):len(families)], busFamilies...)
		}
	}
	return families
}

// driverVersion is the DCGM_FI_DRIVER_VERSION label dcgm-exporter adds.
const driverVersion = "550.90.07"

// WriteMetrics writes the state t after the start in dcgm-exporter's text
// exposition format. A device held by several pods (time-slicing) has one
// series per pod; a device held by none keeps its series without pod labels.
func (s *Scenario) WriteMetrics(w io.Writer, t time.Duration) error {
	readings := s.at(t)
	var b strings.Builder
	for _, f := range s.served() {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", f.name, f.help, f.name, f.typ)
		for i := range readings {
			r := &readings[i]
			v := strconv.FormatFloat(f.value(r), 'g', -1, 64)
			if len(r.holders) == 0 {
				fmt.Fprintf(&b, "%s{%s} %s\n", f.name, deviceLabels(r.device), v)
				continue
			}
			for _, p := range r.holders {
				fmt.Fprintf(&b, "%s{%s,%s} %s\n", f.name, deviceLabels(r.device), p.labels(), v)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func deviceLabels(d usage.Device) string {
	l := label("gpu", d.GPU) + "," + label("UUID", d.UUID) + "," + label("pci_bus_id", pciBusID(d.GPU)) + "," +
		label("device", "nvidia"+d.GPU) + "," + label("modelName", d.Model)
	if d.MIGProfile != "" {
		l += "," + label("GPU_I_PROFILE", d.MIGProfile) + "," + label("GPU_I_ID", d.MIGInstance)
	}
	return l + "," + label("Hostname", d.Node) + "," + label("DCGM_FI_DRIVER_VERSION", driverVersion)
}

// pciBusID makes a plausible PCI address for a GPU index.
func pciBusID(gpu string) string {
	n, _ := strconv.Atoi(gpu)
	return fmt.Sprintf("00000000:%02X:00.0", 0x18+8*n)
}

// labelEscaper escapes a label value as the text format wants it.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func label(name, value string) string {
	return name + `="` + labelEscaper.Replace(value) + `"`
}

// labels are the pod's labels on its device's series, in dcgm-exporter's
// order: container, the DRA labels of its claim if any, namespace, pod.
func (p *Pod) labels() string {
	l := label("container", p.container()) + ","
	if h := p.hold(); !h.IsZero() {
		l += label("dra_claim_name", h.ClaimName) + "," + label("dra_claim_namespace", h.ClaimNamespace) + "," +
			label("dra_device_name", h.Device) + "," + label("dra_driver_name", h.Driver) + "," + label("dra_pool_name", h.Pool) + ","
	}
	return l + label("namespace", p.Namespace) + "," + label("pod", p.Name)
}

// hold is what the pod's DRA labels say; zero without a claim.
func (p *Pod) hold() usage.DRAHold {
	if p.DRA == nil {
		return usage.DRAHold{}
	}
	h := usage.DRAHold{ClaimNamespace: p.Namespace, ClaimName: p.DRA.Claim, Driver: p.DRA.Driver, Pool: p.DRA.Pool, Device: p.DRA.Device}
	if h.Driver == "" {
		h.Driver = "gpu.nvidia.com"
	}
	if h.Pool == "" {
		h.Pool = p.Node
	}
	return h
}

func (p *Pod) container() string {
	if p.Container != "" {
		return p.Container
	}
	return "main"
}

// Series samples the scenario on the window's steps, as a range query
// against Prometheus scraping fake-dcgm would return it; start is the
// scenario's start in wall-clock time. Each device is read from its own
// pods, and each holder's series are found once per step, not per sample,
// so that a week of a small cluster samples in well under a second.
func (s *Scenario) Series(start time.Time, w usage.Window) []usage.Series {
	devices := s.devices()
	onDevice := s.podsByDevice(devices)
	// first[d][holder] is the index of the first of the families' series
	// of device d and that holder (nil: held by nobody).
	first := make([]map[*Pod]int, len(devices))
	for i := range first {
		first[i] = map[*Pod]int{}
	}
	var out []usage.Series
	seriesOf := func(di int, d usage.Device, p *Pod) int {
		if si, ok := first[di][p]; ok {
			return si
		}
		o, h := usage.Owner{}, usage.DRAHold{}
		if p != nil {
			o, h = usage.Owner{Namespace: p.Namespace, Pod: p.Name, Container: p.container()}, p.hold()
		}
		si := len(out)
		first[di][p] = si
		for _, f := range families {
			out = append(out, usage.Series{Metric: f.name, Device: d, Owner: o, DRA: h})
		}
		return si
	}
	// usage.Account refuses a window of more than MaxSteps steps, so no
	// more are ever sampled.
	for k := range min(w.Slots(), usage.MaxSteps) {
		ts := w.Start.Add(time.Duration(k) * w.Step)
		t := ts.Sub(start)
		if t < 0 {
			continue
		}
		ms := ts.UnixMilli()
		for di, d := range devices {
			r := s.readDevice(d, onDevice[di], t, nil)
			holders := r.holders
			if len(holders) == 0 {
				holders = []*Pod{nil}
			}
			for _, p := range holders {
				si := seriesOf(di, d, p)
				for fi, f := range families {
					out[si+fi].Samples = append(out[si+fi].Samples, usage.Sample{TimeMs: ms, Value: f.value(&r)})
				}
			}
		}
	}
	// Family by family, each in the order of devices and holders.
	sort.SliceStable(out, func(i, j int) bool { return familyIndex[out[i].Metric] < familyIndex[out[j].Metric] })
	return out
}

// familyIndex is each family's place in families.
var familyIndex = func() map[string]int {
	m := map[string]int{}
	for i, f := range families {
		m[f.name] = i
	}
	return m
}()

// podsByDevice lists, for each of devices, the pods that ever hold it.
func (s *Scenario) podsByDevice(devices []usage.Device) [][]*Pod {
	out := make([][]*Pod, len(devices))
	for i := range s.Pods {
		p := &s.Pods[i]
		d := s.device(p)
		for di, dd := range devices {
			if dd.Node == d.Node && dd.GPU == d.GPU && dd.MIGInstance == d.MIGInstance {
				out[di] = append(out[di], p)
			}
		}
	}
	return out
}
