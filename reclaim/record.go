package reclaim

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/gpupack/gpupack/usage"
)

// Record is the ledger's entry for one action: what was done to which
// owner, on whose approval, what it replaced (to put back), and the saving
// it predicted. Measure adds what it saved.
type Record struct {
	ID         string     `json:"id"`
	Owner      Ref        `json:"owner"`
	Scaler     *Ref       `json:"scaler,omitempty"`
	Class      Class      `json:"class"`
	Action     Action     `json:"action"`
	Restorable bool       `json:"restorable"`
	ApprovedBy string     `json:"approvedBy"`
	At         time.Time  `json:"at"`
	Pods       []PodRef   `json:"pods"`
	Neighbours []string   `json:"neighbours,omitempty"`
	Evidence   Evidence   `json:"evidence"`
	Before     Before     `json:"before"`
	Predicted  Predicted  `json:"predicted"`
	Outcome    string     `json:"outcome"`
	Reason     string     `json:"reason,omitempty"`
	Restored   *time.Time `json:"restored,omitempty"`
	RestoredBy string     `json:"restoredBy,omitempty"`
	// InitialCooldownSeconds is what restore set as a ScaledObject's
	// spec.initialCooldownPeriod: at least the workload's measured p95
	// load time, so that KEDA never scales it to zero mid-load.
	InitialCooldownSeconds *int32 `json:"initialCooldownSeconds,omitempty"`
}

// Outcomes of a record.
const (
	OutcomeReclaimed     = "reclaimed"
	OutcomeRefused       = "refused" // the re-check before acting found it busy or changed
	OutcomeFailed        = "failed"
	OutcomeRestored      = "restored"
	OutcomeRestoreFailed = "restore-failed"
)

// Before is what an action replaced, on the object it changed (the owner,
// or the ScaledObject for PauseKEDA).
type Before struct {
	Replicas *int32 `json:"replicas,omitempty"`
	// Annotations are the previous values of the annotations the action
	// set; nil for one that was absent.
	Annotations map[string]*string `json:"annotations,omitempty"`
	Suspend     *bool              `json:"suspend,omitempty"`
	Active      *bool              `json:"active,omitempty"`
}

// Predicted is what a reclaim expects to free: the GPUs its pods held,
// GPU-hours a day, and their cost a day where priced.
type Predicted struct {
	GPUs       float64  `json:"gpus"`
	CostPerDay *float64 `json:"costPerDay"`
}

// NewRecord is the record of acting on a candidate now; neighbours are
// the pods that shared its GPUs (their use afterwards is not reuse).
func NewRecord(c Candidate, approvedBy string, at time.Time, neighbours []string) Record {
	return Record{
		ID: c.ID, Owner: c.Owner, Scaler: c.Scaler, Class: c.Class, Action: c.Action, Restorable: c.Restorable,
		ApprovedBy: approvedBy, At: at.UTC(), Pods: c.Pods, Neighbours: neighbours, Evidence: c.Evidence,
		Predicted: Predicted{GPUs: c.GPUs(), CostPerDay: c.Evidence.CostPerDay},
	}
}

// End is when the record's saving stopped accruing: its restore, else now.
func (r *Record) End(now time.Time) time.Time {
	if r.Restored != nil {
		return *r.Restored
	}
	return now
}

// Measured is what a reclaim saved, from the accounting of the hours
// after it: the GPU-hours its pods would have held at the predicted rate,
// what they still held (0 once stopped), what that freed, and how much of
// it other pods took up (reused) or nobody did (unused: money saved only
// where that capacity is released).
type Measured struct {
	From            time.Time `json:"from"`
	To              time.Time `json:"to"`
	Hours           float64   `json:"hours"`
	PredictedGPUHrs float64   `json:"predictedGPUHours"`
	StillHeldGPUHrs float64   `json:"stillHeldGPUHours"`
	FreedGPUHours   float64   `json:"freedGPUHours"`
	ReusedGPUHours  float64   `json:"reusedGPUHours"`
	UnusedGPUHours  float64   `json:"unusedGPUHours"`
	// FreedCost and ReusedCost price those hours; nil where unpriced.
	FreedCost  *float64 `json:"freedCost"`
	ReusedCost *float64 `json:"reusedCost"`
}

// Measure is the record's saving by the accounting r of [At, End]: the
// reclaimed pods' allocation there is what they still held, and the
// allocation of pods other than them and their neighbours on their
// devices is reuse (a pod on several devices counts its share on them).
func Measure(rec Record, r *usage.Report) Measured {
	m := Measured{From: r.Start, To: r.End, Hours: r.End.Sub(r.Start).Hours()}
	m.PredictedGPUHrs = round4(rec.Predicted.GPUs * m.Hours)
	mine := map[string]bool{}
	freed := map[string]bool{}
	for _, p := range rec.Pods {
		mine[p.Key()] = true
		for _, d := range p.Devices {
			freed[d] = true
		}
	}
	var held, reused float64
	for i := range r.Pods {
		p := &r.Pods[i]
		gpuHours := p.AllocatedGPUSeconds.Hours()
		switch {
		case mine[p.Key()]:
			held += gpuHours
		case slices.Contains(rec.Neighbours, p.Key()) || len(p.Devices) == 0:
		default:
			on := 0
			for _, d := range p.Devices {
				if freed[d] {
					on++
				}
			}
			reused += gpuHours * float64(on) / float64(len(p.Devices))
		}
	}
	m.StillHeldGPUHrs = round4(held)
	m.FreedGPUHours = round4(max(m.PredictedGPUHrs-held, 0))
	m.ReusedGPUHours = round4(min(reused, m.FreedGPUHours))
	m.UnusedGPUHours = round4(m.FreedGPUHours - m.ReusedGPUHours)
	if c := rec.Predicted.CostPerDay; c != nil && rec.Predicted.GPUs > 0 {
		perGPUHour := *c / 24 / rec.Predicted.GPUs
		m.FreedCost = ptr(round2(m.FreedGPUHours * perGPUHour))
		m.ReusedCost = ptr(round2(m.ReusedGPUHours * perGPUHour))
	}
	return m
}

// Actuator is what reclaim writes to a cluster; internal/actuator/kube
// implements it on the Kubernetes API. Every write is one that the record
// can undo, except the eviction of a bare pod.
type Actuator interface {
	// Notify writes the notice on the owner (wellknown.AnnotationReclaimNotice)
	// and records an Event on it.
	Notify(ctx context.Context, c Candidate, n Notice) error
	// Pause carries out the candidate's action and fills rec.Before with
	// what it replaced; it also writes rec on the owner
	// (wellknown.AnnotationReclaimed) and an Event.
	Pause(ctx context.Context, c Candidate, rec *Record) error
	// Restore puts back what rec.Before holds, sets the ScaledObject's
	// initialCooldownPeriod to cooldown when given, and removes the
	// record from the owner.
	Restore(ctx context.Context, rec Record, cooldown *int32) error
	// Records reads the ledger, oldest first; Save adds or replaces the
	// record of its ID.
	Records(ctx context.Context) ([]Record, error)
	Save(ctx context.Context, rec Record) error
}

// ErrNotRestorable says a record's action cannot be undone (an evicted
// bare pod) or was already.
var ErrNotRestorable = errors.New("not restorable")
