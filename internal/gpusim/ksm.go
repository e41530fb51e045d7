package gpusim

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// ksmFamilies are the kube-state-metrics pod families that WriteStateMetrics
// serves: each a gauge whose value is a Unix time in seconds, set once the
// event has happened (kube-state-metrics' names, HELP and labels).
var ksmFamilies = []struct {
	name, help string
	at         func(st *Startup) *Duration
}{
	{"kube_pod_created", "[STABLE] Unix creation timestamp", func(st *Startup) *Duration { return st.Created }},
	{"kube_pod_status_scheduled_time", "[STABLE] Unix timestamp when pod moved into scheduled status", func(st *Startup) *Duration { return st.Scheduled }},
	{"kube_pod_status_container_ready_time", "Readiness achieved time in unix timestamp for a pod containers.", func(st *Startup) *Duration { return st.ContainersReady }},
	{"kube_pod_status_ready_time", "Readiness achieved time in unix timestamp for a pod.", func(st *Startup) *Duration { return st.Ready }},
}

// WriteStateMetrics writes, t after the scenario's start (at start), what
// kube-state-metrics would expose of the scenario's pods that exist by
// then (created, or first holding a GPU, at or before t): the pod time
// gauges above, kube_pod_container_state_started per container, and
// kube_pod_owner naming the scripted workload as a ReplicaSet's pods do.
// A pod's time appears once it has passed, as kube-state-metrics shows
// the pod object's state. Pods without a startup script have no series.
func (s *Scenario) WriteStateMetrics(w io.Writer, start time.Time, t time.Duration) error {
	var b strings.Builder
	type live struct {
		p   *Pod
		uid string
	}
	var pods []live
	for i := range s.Pods {
		p := &s.Pods[i]
		st := &p.Startup
		first := p.From.D()
		if st.Created != nil {
			first += st.Created.D()
		}
		if !st.hasStateTimes() || first > t {
			continue
		}
		pods = append(pods, live{p, fmt.Sprintf("00000000-0000-4000-8000-%012d", i)})
	}
	unix := func(p *Pod, d *Duration) (string, bool) {
		if d == nil || p.From.D()+d.D() > t {
			return "", false
		}
		at := start.Add(p.From.D() + d.D())
		return strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', -1, 64), true
	}
	podLabels := func(l live) string {
		return label("namespace", l.p.Namespace) + "," + label("pod", l.p.Name) + "," + label("uid", l.uid)
	}
	for _, f := range ksmFamilies {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", f.name, f.help, f.name)
		for _, l := range pods {
			if v, ok := unix(l.p, f.at(&l.p.Startup)); ok {
				fmt.Fprintf(&b, "%s{%s} %s\n", f.name, podLabels(l), v)
			}
		}
	}
	fmt.Fprintf(&b, "# HELP kube_pod_container_state_started [STABLE] Start time in unix timestamp for a pod container.\n# TYPE kube_pod_container_state_started gauge\n")
	for _, l := range pods {
		if v, ok := unix(l.p, l.p.Startup.ContainersStarted); ok {
			fmt.Fprintf(&b, "kube_pod_container_state_started{%s,%s} %s\n", label("container", l.p.container()), podLabels(l), v)
		}
	}
	fmt.Fprintf(&b, "# HELP kube_pod_owner [STABLE] Information about the Pod's owner.\n# TYPE kube_pod_owner gauge\n")
	for _, l := range pods {
		if wl := l.p.Startup.Workload; wl != "" {
			fmt.Fprintf(&b, "kube_pod_owner{%s,%s,%s,%s} 1\n", podLabels(l), label("owner_kind", "ReplicaSet"), label("owner_name", wl+"-"+replicaSetHash), label("owner_is_controller", "true"))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// hasStateTimes says whether the script sets a time that WriteStateMetrics
// serves: one of ksmFamilies' or a container's start.
func (st *Startup) hasStateTimes() bool {
	for _, f := range ksmFamilies {
		if f.at(st) != nil {
			return true
		}
	}
	return st.ContainersStarted != nil
}

// replicaSetHash is the pod-template-hash that the scripted workloads'
// ReplicaSets carry in their names, as a Deployment's do.
const replicaSetHash = "7d9f8c6b5"
