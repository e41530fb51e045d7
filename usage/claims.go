package usage

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpupack/gpupack/cluster"
)

// ClaimHold is a GPU that a live pod holds through a ResourceClaim (Dynamic
// Resource Allocation), as the claim's allocation names it, with the
// physical GPU's UUID from the ResourceSlice that offers it.
type ClaimHold struct {
	Pod      string // "namespace/name"
	Claim    string // "namespace/name"
	DeviceID string // "driver/pool/device"
	UUID     string
	// Since is when the pod was scheduled; zero if not known.
	Since time.Time
}

// WarnUnattributedClaims checks the report's attribution against the
// live cluster's claim allocations: a GPU that a pod has held through a
// claim since two steps or more before the window's end, that the report
// has series of, but that no series attributes to the pod, is counted as
// unallocated (dcgm-exporter named no pod). That happens where the
// exporter does not read ResourceClaims from the kubelet's pod-resources
// API (dcgm-exporter before its DRA support, or a kubelet without
// KubeletPodResourcesDynamicResources). Each such hold adds a warning to
// the report's quality, with the fix.
func (r *Report) WarnUnattributedClaims(holds []ClaimHold) {
	uuids := map[string]bool{}
	byKey := map[string]string{}
	for _, d := range r.Devices {
		if !d.Uninstantiated && d.UUID != "" {
			uuids[d.UUID] = true
			byKey[d.Key()] = d.UUID
		}
	}
	attributed := map[string]bool{} // pod + "|" + UUID
	for _, p := range r.Pods {
		for _, k := range p.Devices {
			attributed[p.Key()+"|"+byKey[k]] = true
		}
	}
	cutoff := r.End.Add(-2 * time.Duration(float64(r.StepSecond)*float64(time.Second)))
	var missed []string
	for _, h := range holds {
		if h.UUID == "" || !uuids[h.UUID] || attributed[h.Pod+"|"+h.UUID] || (!h.Since.IsZero() && h.Since.After(cutoff)) {
			continue
		}
		missed = append(missed, fmt.Sprintf("%s (claim %s, DRA device %s, GPU %s)", h.Pod, h.Claim, h.DeviceID, h.UUID))
	}
	if len(missed) == 0 {
		return
	}
	r.Quality.Warnings = append(r.Quality.Warnings, fmt.Sprintf(
		"%d GPU(s) held through ResourceClaims have series that name no pod, so their time counts as unallocated: %s; run dcgm-exporter 4.x with its DRA support on kubelets with KubeletPodResourcesDynamicResources (on by default since Kubernetes 1.34), so that it labels them with the pod and claim",
		len(missed), strings.Join(missed, "; ")))
}

// ClaimHolds lists the GPUs the snapshot's bound pods hold through their
// claims' allocations: each allocated device that a node's GPU offers
// (by driver, pool and device name, a MIG slice by its parent GPU), with
// the pod's scheduling time from events where known.
func ClaimHolds(s *cluster.Snapshot, events []PodEvents) []ClaimHold {
	scheduled := map[string]time.Time{}
	for _, e := range events {
		scheduled[e.Namespace+"/"+e.Pod] = e.Scheduled
	}
	var out []ClaimHold
	for _, p := range s.Pods {
		if !p.Bound() || !p.UsesDRA() {
			continue
		}
		n, ok := s.Node(p.NodeName)
		if !ok {
			continue
		}
		for _, c := range p.Claims {
			for _, d := range c.Allocated {
				for _, g := range n.GPUs {
					if g.DRA == nil || g.DRA.Driver != d.Driver || g.DRA.Pool != d.Pool || !slices.Contains(g.DRA.Names(), d.Device) {
						continue
					}
					claim := c.Name
					if claim != "" {
						claim = p.Namespace + "/" + claim
					}
					out = append(out, ClaimHold{Pod: p.Key(), Claim: claim, DeviceID: d.ID(), UUID: g.UUID, Since: scheduled[p.Key()]})
				}
			}
		}
	}
	return out
}
