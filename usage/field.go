package usage

// FieldAverage is the published average that a cluster's GPU use is put
// beside: Cast AI's 2026 State of Kubernetes Optimization Report found
// GPUs about 5% utilised on average across the 23,000 Kubernetes clusters
// it analysed (as reported by itbrief.in, "Cast AI report finds 5% GPU use
// in Kubernetes clusters", and datacentre.solutions, "Kubernetes resource
// utilisation in the AI era"). The report measures used against
// provisioned capacity, not DCGM's engine activity, so the two are close
// kin rather than the same figure.
var FieldAverage = Published{
	Ratio:    0.05,
	Source:   "Cast AI, 2026 State of Kubernetes Optimization Report",
	Clusters: 23000,
}

// Published is a published average GPU utilisation and its source.
type Published struct {
	// Ratio is the average, 0..1.
	Ratio    float64 `json:"ratio"`
	Source   string  `json:"source"`
	Clusters int     `json:"clusters"`
}

// FieldComparison puts the cluster's active-of-allocated ratio beside the
// published average.
type FieldComparison struct {
	// ActiveOfAllocated is the cluster's active GPU-seconds over its
	// allocated GPU-seconds that had an activity sample, 0..1; unknown
	// without any.
	ActiveOfAllocated Amount    `json:"activeOfAllocated"`
	Published         Published `json:"published"`
}

// CompareWithField sets r.Field from the cluster's totals.
func (r *Report) CompareWithField() {
	c := r.Cluster.Totals
	f := FieldComparison{Published: FieldAverage}
	if known := float64(c.AllocatedGPUSeconds - c.ActivityUnknownGPUSeconds); known > 0 && c.ActiveGPUSeconds.Known() {
		f.ActiveOfAllocated = Known(round4(c.ActiveGPUSeconds.Value() / known))
	}
	r.Field = &f
}
