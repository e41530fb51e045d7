package app

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/gpupack/gpupack/diagnose"
	"github.com/gpupack/gpupack/internal/render/planout"
	"github.com/gpupack/gpupack/plan"
	"github.com/gpupack/gpupack/sim"
	"github.com/gpupack/gpupack/usage"
)

// View is everything the page and the API show, as of one refresh. A
// Provider builds a new View at each refresh and never changes one it has
// handed out: the server reads it without locks.
type View struct {
	// Source says where the data comes from: "demo (embedded)",
	// "Prometheus http://prometheus:9090".
	Source string `json:"source"`
	// AsOf is the time of the last good refresh; Err and ErrAt the last
	// failed one, when it came after AsOf (the page then shows the data as
	// of AsOf beside the error).
	AsOf  time.Time  `json:"asOf"`
	Err   string     `json:"error,omitempty"`
	ErrAt *time.Time `json:"errorAt,omitempty"`
	// Start and End are the window the figures cover.
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Report is the accounting of the window, as `gpupack report --format
	// json` prints it.
	Report *usage.Report `json:"report"`
	// Hours is the fleet's accounting per hour of the window, oldest first.
	Hours []Hour `json:"hours"`
	// Nodes and GPUs are the size of the cluster the pending pods were
	// diagnosed on; Pending its pending pods with their diagnosis.
	Nodes   int          `json:"nodes"`
	GPUs    int          `json:"gpus"`
	Pending []PendingPod `json:"pending"`
	// Failed are the GPU pods that failed after scheduling, with their
	// diagnosis as `gpupack diagnose --format json` prints its failures.
	Failed []diagnose.Finding `json:"failed,omitempty"`
	// QueueWait is how long GPU pods have waited: those pending now and
	// those scheduled in the window, by namespace, GPU shape and cause.
	QueueWait *usage.QueueWait `json:"queueWait,omitempty"`
	// Health is, per GPU that reported XID errors in the window, its XIDs
	// and the fix: nil when the view has not read GPU health, empty when
	// no GPU reported an XID.
	Health []planout.GPUHealth `json:"health"`
	// Plan is the sharing plan, as `gpupack plan --format json` prints it,
	// and PlanFiles the files `gpupack plan --out` writes for it.
	Plan      *plan.Plan `json:"plan"`
	PlanFiles []PlanFile `json:"planFiles"`
	// Curve is the simulator's allocation curve, one run per policy;
	// optional.
	Curve []CurveRun `json:"curve,omitempty"`
	// Bounds are the same arrivals' bounds: the cap on every policy that
	// places each pod that fits, and the hindsight packing (a lower
	// estimate of the offline optimum); optional.
	Bounds *sim.Bounds `json:"bounds,omitempty"`
	// Warnings are what the sources said was inconsistent.
	Warnings []string `json:"warnings,omitempty"`
	// Computing names the parts of the view still being computed
	// (ComputingCurve), which a later view of the same provider fills in;
	// empty when the view is whole.
	Computing []string `json:"computing,omitempty"`
}

// ComputingCurve in View.Computing says that the simulator's curve
// (Curve, Bounds) is still being computed.
const ComputingCurve = "curve"

// IsComputing says whether part (ComputingCurve) of v is still being
// computed.
func (v *View) IsComputing(part string) bool { return slices.Contains(v.Computing, part) }

// Hour is the whole fleet over one hour. Capacity is the GPU time the
// devices offered, Allocated what pods held, Active what they used;
// IdleCost is what the allocated but idle part cost. Unknown where the
// hour had no data, never 0.
type Hour struct {
	Start               time.Time    `json:"start"`
	CapacityGPUSeconds  usage.Amount `json:"capacityGPUSeconds"`
	AllocatedGPUSeconds usage.Amount `json:"allocatedGPUSeconds"`
	ActiveGPUSeconds    usage.Amount `json:"activeGPUSeconds"`
	IdleCost            usage.Amount `json:"idleCost"`
}

// HourOf is the fleet's Hour from start, out of the report r of that
// hour: unknown throughout when the hour had no sample at all.
func HourOf(start time.Time, r *usage.Report) Hour {
	h := Hour{Start: start}
	if !r.Quality.Coverage.Known() || r.Quality.Coverage.Value() == 0 {
		return h
	}
	cl := r.Cluster
	h.CapacityGPUSeconds = usage.Known(float64(cl.CapacityGPUSeconds))
	h.AllocatedGPUSeconds = usage.Known(float64(cl.AllocatedGPUSeconds))
	h.ActiveGPUSeconds = cl.ActiveGPUSeconds
	h.IdleCost = cl.IdleCost
	return h
}

// PendingPod is one pending pod: gpupack's diagnosis as `gpupack diagnose
// --format json` prints it, when the pod was created and how long it has
// waited (unknown when its creation time is), and the kube-scheduler's
// last FailedScheduling message when known.
type PendingPod struct {
	diagnose.Finding
	Created          *time.Time   `json:"created"`
	WaitedSeconds    usage.Amount `json:"waitedSeconds"`
	SchedulerMessage string       `json:"schedulerMessage,omitempty"`
}

// PlanFilesPath is where the dashboard serves the plan's files, by name.
const PlanFilesPath = "/plan/files/"

// PlanFile is one file the plan emits, served at PlanFilesPath + Name.
type PlanFile struct {
	Name string
	Data []byte
}

// MarshalJSON lists the file by name, size and download path; the content
// is at the path.
func (f PlanFile) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Name  string `json:"name"`
		Bytes int    `json:"bytes"`
		Href  string `json:"href"`
	}{f.Name, len(f.Data), PlanFilesPath + f.Name})
}

// CurveRun is one simulator run and its allocation curve (sim.Result
// leaves the curve out of its JSON; here it is Points).
type CurveRun struct {
	sim.Result
	Points []sim.Point `json:"points"`
}
