package reclaim

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/internal/util/yamldoc"
	"github.com/gpupack/gpupack/usage"
)

// PolicyAPIVersion and PolicyKind identify a policy file.
const (
	PolicyAPIVersion = "gpupack.io/v1alpha1"
	PolicyKind       = "ReclaimPolicy"
)

// Policy says which workloads reclaim may act on, when and how many: the
// policy file (kind ReclaimPolicy), YAML or JSON:
//
//	apiVersion: gpupack.io/v1alpha1
//	kind: ReclaimPolicy
//	namespaces: [ml, research]   # opted in, beside those labelled gpupack.io/reclaim=enabled
//	activityFloor: 0.05          # an hour whose mean GPU activity is below this is idle, 0..1
//	cpuBusyCores: 0.5            # a GPU-idle pod using more CPU than this works without its GPU: left alone
//	classes:
//	  notebook:  {idleFor: 24h, grace: 1h, notice: 4h, autoApprove: {excludeNamespaces: [prod]}}
//	  inference: {idleFor: 6h, grace: 30m, notice: 1h}
//	  training:  {idleFor: 2h, grace: 30m, notice: 30m}
//	businessHours: {timezone: Europe/Berlin, days: [Mon, Tue, Wed, Thu, Fri], start: "08:00", end: "19:00"}
//	maxPerRun: 10                # actions per run at most
//	maxPerNamespace: 3           # actions per namespace and run at most
type Policy struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Namespaces are opted in by the policy; a namespace labelled
	// gpupack.io/reclaim=enabled is opted in too, one labelled never is
	// out whatever the policy says.
	Namespaces []string `json:"namespaces,omitempty"`
	// ActivityFloor is the mean activity of an hour (0..1) under which
	// the hour counts as idle.
	ActivityFloor float64 `json:"activityFloor"`
	// CPUBusyCores is the mean CPU use, in cores, above which a GPU-idle
	// pod is still working (on its CPU) and is left alone; 0 turns the
	// check off.
	CPUBusyCores float64                `json:"cpuBusyCores"`
	Classes      map[Class]*ClassPolicy `json:"classes"`
	Hours        *BusinessHours         `json:"businessHours,omitempty"`
	MaxPerRun    int                    `json:"maxPerRun"`
	MaxPerNS     int                    `json:"maxPerNamespace"`
	// location is the business hours' time zone.
	location *time.Location
}

// ClassPolicy is the policy of one class of workloads.
type ClassPolicy struct {
	// IdleFor is how long, in whole hours, every hour of a workload's GPU
	// activity must have stayed under the floor.
	IdleFor Duration `json:"-"`
	// Grace keeps pods younger than it out, whatever their activity.
	Grace Duration `json:"-"`
	// Notice is the time between the notice to the owner and the earliest
	// action; 0 acts at the first run after approval.
	Notice Duration `json:"-"`
	// The durations as the file writes them ("24h", "30m", "2d", "0").
	IdleForText string `json:"idleFor,omitempty"`
	GraceText   string `json:"grace,omitempty"`
	NoticeText  string `json:"notice,omitempty"`
	// AutoApprove, when set, approves this class's candidates without a
	// person, except in the namespaces it excludes. A bare pod (evicted,
	// not restorable) is never approved by policy.
	AutoApprove *AutoApprove `json:"autoApprove,omitempty"`
}

// AutoApprove is a class's standing approval.
type AutoApprove struct {
	ExcludeNamespaces []string `json:"excludeNamespaces,omitempty"`
}

// BusinessHours are the hours in which reclaim notifies but never acts.
type BusinessHours struct {
	Timezone string   `json:"timezone"`
	Days     []string `json:"days"`
	Start    string   `json:"start"`
	End      string   `json:"end"`
}

// Duration is a duration written as Go writes it ("90m", "24h") or in
// whole days ("2d").
type Duration time.Duration

// parseDuration reads "24h", "90m", "2d" or "0"; "" keeps def.
func parseDuration(s string, def Duration) (Duration, error) {
	switch s {
	case "":
		return def, nil
	case "0":
		return 0, nil
	}
	v, err := usage.ParseWindow(s)
	return Duration(v), err
}

// MarshalJSON writes the duration as Go writes it.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads what MarshalJSON writes, as records and sets are
// read back (the ledger, the JSON output).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// D is the duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// DefaultPolicy opts no namespace in, counts an hour under 5% activity as
// idle, leaves pods using more than half a core alone, and waits 24 hours
// for a notebook, 6 for an inference server and 2 for a training job; it
// auto-approves nothing and caps a run at 10 actions, 3 per namespace.
func DefaultPolicy() *Policy {
	p := &Policy{
		APIVersion: PolicyAPIVersion, Kind: PolicyKind,
		ActivityFloor: usage.ActivityIdleFloor, CPUBusyCores: 0.5,
		Classes: map[Class]*ClassPolicy{
			ClassNotebook:  {IdleFor: Duration(24 * time.Hour), Grace: Duration(time.Hour), Notice: Duration(4 * time.Hour)},
			ClassInference: {IdleFor: Duration(6 * time.Hour), Grace: Duration(30 * time.Minute), Notice: Duration(time.Hour)},
			ClassTraining:  {IdleFor: Duration(2 * time.Hour), Grace: Duration(30 * time.Minute), Notice: Duration(30 * time.Minute)},
		},
		MaxPerRun: 10, MaxPerNS: 3,
	}
	p.location = time.UTC
	return p
}

// ParsePolicy reads a policy file; classes it leaves out keep the
// defaults, as do fields of a class it leaves at zero (except notice,
// where 0 means none). source names the file in errors.
func ParsePolicy(data []byte, source string) (*Policy, error) {
	p := DefaultPolicy()
	p.Classes = map[Class]*ClassPolicy{}
	p.ActivityFloor, p.CPUBusyCores, p.MaxPerRun, p.MaxPerNS = -1, -1, -1, -1
	if _, err := yamldoc.Decode(data, source, p); err != nil {
		return nil, err
	}
	if err := p.complete(); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return p, nil
}

// complete fills in the defaults and validates.
func (p *Policy) complete() error {
	if p.APIVersion != PolicyAPIVersion || p.Kind != PolicyKind {
		return fmt.Errorf("apiVersion %q, kind %q: want %s, %s", p.APIVersion, p.Kind, PolicyAPIVersion, PolicyKind)
	}
	def := DefaultPolicy()
	if p.ActivityFloor < 0 {
		p.ActivityFloor = def.ActivityFloor
	}
	if p.CPUBusyCores < 0 {
		p.CPUBusyCores = def.CPUBusyCores
	}
	if p.MaxPerRun < 0 {
		p.MaxPerRun = def.MaxPerRun
	}
	if p.MaxPerNS < 0 {
		p.MaxPerNS = def.MaxPerNS
	}
	switch {
	case math.IsNaN(p.ActivityFloor) || p.ActivityFloor > 1:
		return fmt.Errorf("activityFloor: %v is not a ratio (want 0..1; 0.05 is 5%%)", p.ActivityFloor)
	case math.IsNaN(p.CPUBusyCores) || p.CPUBusyCores > 1024:
		return fmt.Errorf("cpuBusyCores: %v: want 0 (off) up to 1024 cores", p.CPUBusyCores)
	case p.MaxPerRun < 1 || p.MaxPerNS < 1:
		return fmt.Errorf("maxPerRun %d, maxPerNamespace %d: want at least 1 each", p.MaxPerRun, p.MaxPerNS)
	}
	if p.Classes == nil {
		p.Classes = map[Class]*ClassPolicy{}
	}
	for c, cp := range p.Classes {
		if !slices.Contains(Classes, c) {
			return fmt.Errorf("classes.%s: not a class (want %s)", c, classNames())
		}
		if cp == nil {
			return fmt.Errorf("classes.%s: empty; give idleFor, grace and notice, or leave the class out for the defaults", c)
		}
		if err := cp.parse(def.Classes[c]); err != nil {
			return fmt.Errorf("classes.%s.%w", c, err)
		}
		if cp.IdleFor == 0 || cp.IdleFor.D()%time.Hour != 0 {
			return fmt.Errorf("classes.%s.idleFor: %s: want whole hours, at least one (the accounting's idle check is hourly)", c, cp.IdleFor.D())
		}
	}
	for _, c := range Classes {
		if p.Classes[c] == nil {
			p.Classes[c] = def.Classes[c]
		}
	}
	for i, ns := range p.Namespaces {
		if ns == "" || strings.ContainsAny(ns, "/ ") {
			return fmt.Errorf("namespaces[%d]: %q is not a namespace name", i, ns)
		}
	}
	p.location = time.UTC
	if p.Hours != nil {
		loc, err := p.Hours.check()
		if err != nil {
			return fmt.Errorf("businessHours: %w", err)
		}
		p.location = loc
	}
	return nil
}

// parse reads the durations, taking def's for those left out.
func (cp *ClassPolicy) parse(def *ClassPolicy) error {
	var err error
	if cp.IdleFor, err = parseDuration(cp.IdleForText, def.IdleFor); err != nil {
		return fmt.Errorf("idleFor: %w", err)
	}
	if cp.Grace, err = parseDuration(cp.GraceText, def.Grace); err != nil {
		return fmt.Errorf("grace: %w", err)
	}
	if cp.Notice, err = parseDuration(cp.NoticeText, def.Notice); err != nil {
		return fmt.Errorf("notice: %w", err)
	}
	return nil
}

// MaxIdleFor is the longest idle window of the classes: the accounting
// window detection needs.
func (p *Policy) MaxIdleFor() time.Duration {
	var w time.Duration
	for _, c := range p.Classes {
		w = max(w, c.IdleFor.D())
	}
	return w
}

var weekdays = []string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}

func (b *BusinessHours) check() (*time.Location, error) {
	tz := b.Timezone
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("timezone %q: %v (want an IANA name such as Europe/Berlin)", b.Timezone, err)
	}
	if len(b.Days) == 0 {
		return nil, fmt.Errorf("days: none; list the business days, such as [Mon, Tue, Wed, Thu, Fri]")
	}
	for i, d := range b.Days {
		if !slices.Contains(weekdays, d) {
			return nil, fmt.Errorf("days[%d]: %q (want one of %s)", i, d, strings.Join(weekdays, ", "))
		}
	}
	start, err1 := clock(b.Start)
	end, err2 := clock(b.End)
	if err1 != nil || err2 != nil || start >= end {
		return nil, fmt.Errorf("start %q, end %q: want HH:MM times with start before end", b.Start, b.End)
	}
	return loc, nil
}

func clock(s string) (time.Duration, error) {
	t, err := time.Parse("15:04", s)
	if err != nil {
		return 0, err
	}
	return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute, nil
}

// InBusinessHours says whether t lies in the policy's business hours.
func (p *Policy) InBusinessHours(t time.Time) bool {
	if p.Hours == nil {
		return false
	}
	loc := p.location
	if loc == nil {
		loc = time.UTC
	}
	lt := t.In(loc)
	if !slices.Contains(p.Hours.Days, weekdays[lt.Weekday()]) {
		return false
	}
	start, _ := clock(p.Hours.Start)
	end, _ := clock(p.Hours.End)
	since := time.Duration(lt.Hour())*time.Hour + time.Duration(lt.Minute())*time.Minute
	return since >= start && since < end
}

// optedIn says whether a namespace is in, given the namespaces labelled
// enabled and never.
func (p *Policy) optedIn(ns string, labelled map[string]string) bool {
	switch labelled[ns] {
	case wellknown.ReclaimNever:
		return false
	case wellknown.ReclaimEnabled:
		return true
	}
	return slices.Contains(p.Namespaces, ns)
}

// autoApproves says whether the class's standing approval covers a
// candidate in namespace ns.
func (p *Policy) autoApproves(c Class, ns string) bool {
	a := p.Classes[c].AutoApprove
	return a != nil && !slices.Contains(a.ExcludeNamespaces, ns)
}

func classNames() string {
	names := make([]string, len(Classes))
	for i, c := range Classes {
		names[i] = string(c)
	}
	return strings.Join(names, ", ")
}
