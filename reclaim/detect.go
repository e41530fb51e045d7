package reclaim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpupack/gpupack/api/wellknown"
	"github.com/gpupack/gpupack/usage"
)

// Input is what detection reads: the accounting of a window ending now,
// the running GPU pods with their owners, the namespaces' reclaim labels
// and, where measured, each pod's CPU use.
type Input struct {
	Now time.Time
	// Report is the accounting of a window that ends at Now and spans at
	// least the longest idle window of the policy.
	Report *usage.Report
	Pods   []PodState
	// Owners are the pods' owners by OwnerKey.
	Owners map[string]*Owner
	// Namespaces holds each namespace's gpupack.io/reclaim label value.
	Namespaces map[string]string
	// CPUCores is each pod's mean CPU use over the window, in cores, by
	// pod key; a pod missing has it unknown.
	CPUCores map[string]float64
	// Warnings are what reading the input found wrong; the set carries
	// them.
	Warnings []string
}

// OwnerKey is the key of an owner in Input.Owners: "Kind/namespace/name".
func OwnerKey(kind Kind, namespace, name string) string {
	return string(kind) + "/" + namespace + "/" + name
}

// MinCoverage is the share of a pod's GPU time whose activity must be
// known for its idleness to count: a gap in the data is never idleness.
const MinCoverage = 0.9

// Set is one detection: the candidates, what was left alone and why, and
// a hash over the candidates that an approval names.
type Set struct {
	Hash       string      `json:"hash"`
	At         time.Time   `json:"at"`
	Candidates []Candidate `json:"candidates"`
	Skipped    []Skip      `json:"skipped"`
	// GPUs and CostPerDay sum the candidates' (the cost where known).
	GPUs       float64  `json:"gpus"`
	CostPerDay *float64 `json:"costPerDay"`
	// BusinessHours says that now is in the policy's business hours: the
	// candidates are notified but not acted on.
	BusinessHours bool     `json:"businessHours"`
	Warnings      []string `json:"warnings,omitempty"`
}

// Candidate is an owner whose every GPU pod is idle-held, with the action
// its kind allows.
type Candidate struct {
	// ID identifies the owner, its pods, the action and the evidence's
	// verdict; an approval or a notice names it.
	ID         string `json:"id"`
	Owner      Ref    `json:"owner"`
	Scaler     *Ref   `json:"scaler,omitempty"`
	Class      Class  `json:"class"`
	Action     Action `json:"action"`
	Restorable bool   `json:"restorable"`
	// Replicas is the owner's replicas before (for scale-to-zero and
	// restore).
	Replicas *int32   `json:"replicas,omitempty"`
	Pods     []PodRef `json:"pods"`
	Evidence Evidence `json:"evidence"`
	// State is where the candidate stands with its notice: to-notify,
	// noticed (Deadline ahead) or due.
	State    string     `json:"state"`
	Deadline *time.Time `json:"deadline,omitempty"`
	// AutoApproved says the policy approves it without a person.
	AutoApproved bool `json:"autoApproved"`
}

// GPUs is what the candidate's pods hold, a slice or replica counted as
// its share, to 3 decimals.
func (c Candidate) GPUs() float64 {
	var g float64
	for _, p := range c.Pods {
		g += p.GPUs
	}
	return round3(g)
}

// Candidate states.
const (
	StateToNotify = "to-notify"
	StateNoticed  = "noticed"
	StateDue      = "due"
)

// PodRef is a pod of a candidate.
type PodRef struct {
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	UID       string   `json:"uid"`
	Node      string   `json:"node"`
	Devices   []string `json:"devices"`
	GPUs      float64  `json:"gpus"`
}

// Key is "namespace/name".
func (p PodRef) Key() string { return p.Namespace + "/" + p.Name }

// Evidence is why a candidate is idle-held.
type Evidence struct {
	// IdleFor is the class's idle window that every hour of which stayed
	// under the floor; MeanActivity the mean over it (0..1).
	IdleFor      Duration `json:"idleFor"`
	MeanActivity float64  `json:"meanActivity"`
	// LastActive is the end of the last hour at or above the floor in the
	// window; nil when the whole window was idle.
	LastActive *time.Time `json:"lastActive"`
	// IdleGPUHours are the GPUs times the hours since LastActive (or the
	// pod's first hour in the window).
	IdleGPUHours float64 `json:"idleGPUHours"`
	// CostPerDay is what the held GPUs cost a day; nil where no price is
	// known.
	CostPerDay *float64 `json:"costPerDay"`
	// KeepAlive flags pods whose samples show short bursts (BurstRatio of
	// them at 30% activity or more) that never lift an hour over the
	// floor: periodic work that only keeps them alive.
	KeepAlive  bool    `json:"keepAlive"`
	BurstRatio float64 `json:"burstRatio"`
	// CPUCores is the pods' mean CPU use in cores; nil where unknown.
	CPUCores *float64 `json:"cpuCores"`
	// App is the application metric's mean per pod, all zero; empty when
	// none was given.
	App []string `json:"app,omitempty"`
	// LoadP95Seconds is the workload's p95 load time (containers started
	// to app ready) in the window, which a restore of a KEDA-paused
	// workload keeps as its initialCooldownPeriod; nil when none started.
	LoadP95Seconds *float64 `json:"loadP95Seconds,omitempty"`
}

// Skip is an owner left alone, and why.
type Skip struct {
	Owner  Ref      `json:"owner"`
	Pods   []string `json:"pods"`
	Reason string   `json:"reason"`
	Detail string   `json:"detail"`
}

// Why an owner is left alone.
const (
	SkipNotOptedIn  = "not-opted-in"
	SkipExempt      = "exempt"
	SkipSnoozed     = "snoozed"
	SkipStarting    = "starting"
	SkipYoung       = "in-grace"
	SkipActive      = "active"
	SkipAppActive   = "app-active"
	SkipCPUBusy     = "cpu-busy"
	SkipShort       = "held-too-short"
	SkipUnmeasured  = "unmeasured"
	SkipUnsupported = "unsupported-owner"
	SkipCap         = "cap"
	SkipPaused      = "already-paused"
)

// Notice is what reclaim writes on an owner before acting
// (wellknown.AnnotationReclaimNotice, as JSON).
type Notice struct {
	ID       string    `json:"id"`
	Given    time.Time `json:"given"`
	Deadline time.Time `json:"deadline"`
	// Evidence in words, for the owner's team.
	Summary string `json:"summary"`
}

// Detect finds the owners whose every GPU pod has been idle-held for its
// class's window, and says for the others why they are left alone.
func Detect(in Input, p *Policy) *Set {
	s := &Set{At: in.Now, BusinessHours: p.InBusinessHours(in.Now), Warnings: in.Warnings}
	pods := map[string]*usage.PodUsage{}
	if in.Report != nil {
		for i := range in.Report.Pods {
			pods[in.Report.Pods[i].Key()] = &in.Report.Pods[i]
		}
	}
	for _, g := range groupByOwner(in) {
		c, skip := judge(in, p, g, pods)
		if skip != nil {
			s.Skipped = append(s.Skipped, *skip)
			continue
		}
		s.Candidates = append(s.Candidates, *c)
	}
	s.cap(p)
	s.total()
	return s
}

// ownerGroup is an owner and its running GPU pods.
type ownerGroup struct {
	owner *Owner
	pods  []PodState
}

func groupByOwner(in Input) []ownerGroup {
	byKey := map[string]*ownerGroup{}
	var keys []string
	for _, pod := range in.Pods {
		o := in.Owners[pod.Owner]
		if o == nil {
			o = &Owner{Ref: Ref{Kind: Pod, APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}, Labels: pod.Labels, Annotations: pod.Annotations}
			pod.Owner = OwnerKey(Pod, pod.Namespace, pod.Name)
		}
		g := byKey[pod.Owner]
		if g == nil {
			g = &ownerGroup{owner: o}
			byKey[pod.Owner] = g
			keys = append(keys, pod.Owner)
		}
		g.pods = append(g.pods, pod)
	}
	sort.Strings(keys)
	out := make([]ownerGroup, len(keys))
	for i, k := range keys {
		g := byKey[k]
		sort.Slice(g.pods, func(a, b int) bool { return g.pods[a].Key() < g.pods[b].Key() })
		out[i] = *g
	}
	return out
}

// judge decides one owner: a candidate, or a skip with its reason.
func judge(in Input, p *Policy, g ownerGroup, pods map[string]*usage.PodUsage) (*Candidate, *Skip) {
	o := g.owner
	skip := func(reason, format string, args ...any) (*Candidate, *Skip) {
		names := make([]string, len(g.pods))
		for i, pod := range g.pods {
			names[i] = pod.Key()
		}
		return nil, &Skip{Owner: o.Ref, Pods: names, Reason: reason, Detail: fmt.Sprintf(format, args...)}
	}
	if r, d := eligible(in, p, g); r != "" {
		return skip(r, "%s", d)
	}
	class := ClassOf(o, g.pods[0].Labels)
	cp := p.Classes[class]
	ev := Evidence{IdleFor: cp.IdleFor}
	c := &Candidate{Owner: o.Ref, Scaler: o.Scaler, Class: class, Replicas: o.Replicas}
	c.Action, c.Restorable = ActionFor(o)
	var cost float64
	costKnown := true
	for _, pod := range g.pods {
		if in.Now.Sub(pod.Created) < cp.Grace.D() {
			return skip(SkipYoung, "%s is %s old, within the %s grace of a %s", pod.Key(), in.Now.Sub(pod.Created).Round(time.Minute), cp.Grace.D(), class)
		}
		if !pod.Ready {
			return skip(SkipStarting, "%s is not ready yet: still starting (pulling images or loading its model)", pod.Key())
		}
		u := pods[pod.Key()]
		if u == nil {
			return skip(SkipUnmeasured, "%s: no GPU series in the window; missing data is never idleness", pod.Key())
		}
		idle, r, d := idleFor(in, p, cp, u)
		if r != "" {
			return skip(r, "%s: %s", pod.Key(), d)
		}
		if len(u.App) > 0 {
			for _, a := range u.App {
				if !a.Mean.Known() || a.Mean.Value() > 0 {
					return skip(SkipAppActive, "%s: application metric %s is %s over the window", pod.Key(), a.Name, amountText(a.Mean))
				}
				ev.App = append(ev.App, pod.Key()+" "+a.Name+" 0")
			}
		}
		if cores, ok := in.CPUCores[pod.Key()]; ok {
			if p.CPUBusyCores > 0 && cores > p.CPUBusyCores {
				return skip(SkipCPUBusy, "%s: GPU-idle but uses %.2f CPU cores (over %.2f): it works without its GPU; give it a CPU node instead of stopping it", pod.Key(), cores, p.CPUBusyCores)
			}
			ev.CPUCores = ptr(round3(deref(ev.CPUCores) + cores))
		}
		idle.IdleGPUHours *= pod.GPUs
		ev.merge(idle)
		c.Pods = append(c.Pods, PodRef{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Node: pod.Node, Devices: u.Devices, GPUs: pod.GPUs})
		if pc, ok := perGPUHourCost(u); ok {
			cost += pc * pod.GPUs * 24
		} else {
			costKnown = false
		}
	}
	ev.MeanActivity = round4(ev.MeanActivity / float64(len(g.pods)))
	if costKnown {
		ev.CostPerDay = ptr(round2(cost))
	}
	c.Evidence = ev
	c.ID = candidateID(c)
	c.State, c.Deadline = noticeState(o, c.ID, cp, in.Now)
	c.AutoApproved = c.Restorable && p.autoApproves(class, o.Namespace)
	return c, nil
}

// eligible checks what does not need measurement: opt-in, exemption,
// snooze, and whether reclaim can pause the owner at all.
func eligible(in Input, p *Policy, g ownerGroup) (reason, detail string) {
	o := g.owner
	switch {
	case in.Namespaces[o.Namespace] == wellknown.ReclaimNever:
		return SkipExempt, fmt.Sprintf("namespace %s is labelled %s=%s", o.Namespace, wellknown.LabelReclaim, wellknown.ReclaimNever)
	case !p.optedIn(o.Namespace, in.Namespaces):
		return SkipNotOptedIn, fmt.Sprintf("namespace %s is not opted in: list it in the policy's namespaces or label it %s=%s", o.Namespace, wellknown.LabelReclaim, wellknown.ReclaimEnabled)
	case o.Labels[wellknown.LabelReclaim] == wellknown.ReclaimNever:
		return SkipExempt, fmt.Sprintf("%s is labelled %s=%s", o.Ref, wellknown.LabelReclaim, wellknown.ReclaimNever)
	case o.Unsupported != "":
		return SkipUnsupported, o.Unsupported
	}
	for _, pod := range g.pods {
		if pod.Labels[wellknown.LabelReclaim] == wellknown.ReclaimNever {
			return SkipExempt, fmt.Sprintf("pod %s is labelled %s=%s", pod.Key(), wellknown.LabelReclaim, wellknown.ReclaimNever)
		}
	}
	if v, ok := o.Annotations[wellknown.AnnotationReclaimSnooze]; ok {
		until, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return SkipSnoozed, fmt.Sprintf("%s=%q is not an RFC 3339 time; treated as snoozed: write a time such as 2026-12-31T18:00:00Z", wellknown.AnnotationReclaimSnooze, v)
		}
		if in.Now.Before(until) {
			return SkipSnoozed, fmt.Sprintf("snoozed by its owner until %s", until.UTC().Format(time.RFC3339))
		}
	}
	if _, ok := o.Annotations[wellknown.AnnotationReclaimed]; ok {
		return SkipPaused, fmt.Sprintf("already reclaimed (%s); `gpupack restore` puts it back", wellknown.AnnotationReclaimed)
	}
	return "", ""
}

// idleFor checks that every hour of the class's idle window was under the
// floor with the activity known, and gives the pod's evidence.
func idleFor(in Input, p *Policy, cp *ClassPolicy, u *usage.PodUsage) (Evidence, string, string) {
	var ev Evidence
	r := in.Report
	hours := int(math.Ceil(r.End.Sub(r.Start).Hours()))
	k := int(cp.IdleFor.D() / time.Hour)
	last := hours - 1
	if cov := u.ActivityCoverage; !cov.Known() || cov.Value() < MinCoverage {
		return ev, SkipUnmeasured, fmt.Sprintf("activity known for %s of its GPU time (want %.0f%%); missing data is never idleness", amountText(cov), 100*MinCoverage)
	}
	if u.HourlyActivity == nil || u.FirstHour+len(u.HourlyActivity)-1 < last {
		return ev, SkipUnmeasured, "no activity in the window's last hour; missing data is never idleness"
	}
	if hours < k || u.FirstHour > last-k+1 {
		return ev, SkipShort, fmt.Sprintf("held its GPU for %dh of the window, less than the %s idle window", last-u.FirstHour+1, cp.IdleFor.D())
	}
	var sum float64
	for h := last; h > last-k; h-- {
		a := u.HourlyActivity[h-u.FirstHour]
		if a >= p.ActivityFloor {
			return ev, SkipActive, fmt.Sprintf("%.1f%% active in the hour from %s, at or over the %.1f%% floor", 100*a, r.Start.Add(time.Duration(h)*time.Hour).UTC().Format(time.RFC3339), 100*p.ActivityFloor)
		}
		sum += a
	}
	ev.MeanActivity = sum / float64(k)
	idleFrom := r.Start.Add(time.Duration(u.FirstHour) * time.Hour)
	for h := last - k; h >= u.FirstHour; h-- {
		if u.HourlyActivity[h-u.FirstHour] >= p.ActivityFloor {
			t := r.Start.Add(time.Duration(h+1) * time.Hour).UTC()
			ev.LastActive, idleFrom = &t, t
			break
		}
	}
	ev.IdleGPUHours = r.End.Sub(idleFrom).Hours()
	if br := u.Pattern.BurstRatio; ev.LastActive == nil && br.Known() && br.Value() > 0 {
		ev.KeepAlive, ev.BurstRatio = true, br.Value()
	}
	return ev, "", ""
}

// merge adds one pod's evidence to the owner's.
func (e *Evidence) merge(pod Evidence) {
	e.MeanActivity += pod.MeanActivity
	if pod.LastActive != nil && (e.LastActive == nil || pod.LastActive.After(*e.LastActive)) {
		e.LastActive = pod.LastActive
	}
	e.IdleGPUHours = round2(e.IdleGPUHours + pod.IdleGPUHours)
	e.KeepAlive = e.KeepAlive || pod.KeepAlive
	e.BurstRatio = max(e.BurstRatio, pod.BurstRatio)
}

// perGPUHourCost is the pod's cost per allocated GPU-hour, where known.
func perGPUHourCost(u *usage.PodUsage) (float64, bool) {
	c := u.CostPerAllocatedGPUHour
	if !c.Known() {
		return 0, false
	}
	return c.Value(), true
}

// noticeState reads the owner's notice: none or another candidate's means
// to notify; this candidate's is noticed until its deadline, then due. A
// class with no notice period is due at once.
func noticeState(o *Owner, id string, cp *ClassPolicy, now time.Time) (string, *time.Time) {
	if cp.Notice == 0 {
		return StateDue, nil
	}
	var n Notice
	if raw, ok := o.Annotations[wellknown.AnnotationReclaimNotice]; !ok || json.Unmarshal([]byte(raw), &n) != nil || n.ID != id {
		return StateToNotify, nil
	}
	d := n.Deadline
	if now.Before(d) {
		return StateNoticed, &d
	}
	return StateDue, &d
}

// candidateID hashes what an approval binds to: the owner and its UID,
// the action, each pod and its UID and GPUs, and the verdict (keep-alive
// bursts, application metrics given).
func candidateID(c *Candidate) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s|%s|%s|%s|%s\n", c.Owner.Kind, c.Owner.Namespace, c.Owner.Name, c.Owner.UID, c.Action)
	for _, p := range c.Pods {
		fmt.Fprintf(h, "%s|%s|%.3f|%s\n", p.Key(), p.UID, p.GPUs, strings.Join(p.Devices, ","))
	}
	fmt.Fprintf(h, "keepalive=%t app=%d\n", c.Evidence.KeepAlive, len(c.Evidence.App))
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// cap keeps the candidates that idle the most GPU-hours within the
// policy's caps per run and per namespace; the rest wait for a later run.
func (s *Set) cap(p *Policy) {
	sort.SliceStable(s.Candidates, func(i, j int) bool {
		return s.Candidates[i].Evidence.IdleGPUHours > s.Candidates[j].Evidence.IdleGPUHours
	})
	perNS := map[string]int{}
	var kept []Candidate
	for _, c := range s.Candidates {
		switch {
		case len(kept) >= p.MaxPerRun:
			s.Skipped = append(s.Skipped, capSkip(c, fmt.Sprintf("the run's cap of %d is reached; a later run takes it", p.MaxPerRun)))
		case perNS[c.Owner.Namespace] >= p.MaxPerNS:
			s.Skipped = append(s.Skipped, capSkip(c, fmt.Sprintf("namespace %s's cap of %d per run is reached; a later run takes it", c.Owner.Namespace, p.MaxPerNS)))
		default:
			perNS[c.Owner.Namespace]++
			kept = append(kept, c)
		}
	}
	s.Candidates = kept
	sort.Slice(s.Candidates, func(i, j int) bool { return s.Candidates[i].Owner.String() < s.Candidates[j].Owner.String() })
	sort.SliceStable(s.Skipped, func(i, j int) bool { return s.Skipped[i].Owner.String() < s.Skipped[j].Owner.String() })
}

func capSkip(c Candidate, detail string) Skip {
	names := make([]string, len(c.Pods))
	for i, p := range c.Pods {
		names[i] = p.Key()
	}
	return Skip{Owner: c.Owner, Pods: names, Reason: SkipCap, Detail: detail}
}

// total sums the candidates and hashes the set.
func (s *Set) total() {
	h := sha256.New()
	var cost float64
	costKnown := len(s.Candidates) > 0
	s.GPUs = 0
	for _, c := range s.Candidates {
		fmt.Fprintln(h, c.ID)
		s.GPUs += c.GPUs()
		if c.Evidence.CostPerDay == nil {
			costKnown = false
		} else {
			cost += *c.Evidence.CostPerDay
		}
	}
	s.GPUs = round3(s.GPUs)
	s.CostPerDay = nil
	if costKnown {
		s.CostPerDay = ptr(round2(cost))
	}
	s.Hash = hex.EncodeToString(h.Sum(nil))[:16]
}

// Only cuts the set to the candidates with these IDs and hashes it again;
// an ID not in the set is an error.
func (s *Set) Only(ids []string) (*Set, error) {
	out := *s
	out.Candidates = nil
	for _, id := range ids {
		i := slices.IndexFunc(s.Candidates, func(c Candidate) bool { return c.ID == id })
		if i < 0 {
			return nil, fmt.Errorf("candidate %s is not in the set (now %s): the cluster or its usage changed; run the dry run again", id, s.Hash)
		}
		out.Candidates = append(out.Candidates, s.Candidates[i])
	}
	out.total()
	return &out, nil
}

func amountText(a usage.Amount) string {
	if !a.Known() {
		return "unknown"
	}
	return fmt.Sprintf("%.4g", a.Value())
}

func ptr[T any](v T) *T { return &v }

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }
func round3(x float64) float64 { return math.Round(x*1000) / 1000 }
func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }
