package diagnose

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// SchedulerCauses reads a kube-scheduler FailedScheduling message, such as
//
//	0/12 nodes are available: 2 node(s) had untolerated taint {gpu: reserved},
//	10 Insufficient nvidia.com/gpu. preemption: 0/12 nodes are available:
//	2 Preemption is not helpful for scheduling, 10 No preemption victims
//	found for incoming pod.
//
// and returns the causes its words are consistent with, the likeliest
// first; nil when it is not such a message. The scheduler reports, per node,
// only the first filter that fails, and says nothing of VRAM or of how busy
// the holders are, so one message may fit several causes; gpupack's own
// diagnosis agrees with the scheduler when its cause is among them.
//
// DefaultPreemption's part says on how many nodes preemption could help
// (the resolvable ones); a node that a rule excludes never is, so when the
// GPU-short nodes outnumber the other unresolvable ones, some GPU-short
// node is held rather than too small, and the cause is allocation.
// Otherwise:
//
//   - GPUs short on a node where preemption may help: allocation (or
//     memory, which the scheduler cannot see).
//   - Nodes excluded by selector, affinity, taints or cordons: placement,
//     and no-such-hardware or quota/other too, since the scheduler did not
//     look at their resources.
//   - Nodes excluded by a topology spread skew or pod anti-affinity, whose
//     resources the scheduler found enough (those filters run after
//     NodeResourcesFit): placement, whatever else holds. Preemption may
//     help on them (their status is resolvable), so they count with the
//     GPU-short nodes in the preemption part.
//   - GPUs short where preemption cannot help: no such hardware, or
//     placement (the node's configuration offers its GPUs under another
//     resource, or a MIG layout lacks the profile), or memory.
//   - "cannot allocate all claims" (the DynamicResources filter, for pods
//     with ResourceClaims): allocation, placement, memory or no such
//     hardware; the filter says the same whether the devices are held,
//     none is accepted, or the selectors on their capacity (memory) refuse
//     them.
//   - CPU, memory or pods short somewhere, or nothing GPU-related:
//     quota/other, or no such hardware where preemption cannot help.
func SchedulerCauses(message string) []Cause {
	main, preemption, _ := strings.Cut(message, " preemption: ")
	nodes, parts, ok := readAvailability(main)
	if !ok {
		return nil
	}
	var gpuShort, migShort, ruled, spread, claims, other int
	for _, part := range parts {
		switch {
		case part.words == reasonClaims:
			claims += part.nodes
		case isResolvableRuleWords(part.words):
			spread += part.nodes
		case strings.HasPrefix(part.words, "Insufficient nvidia.com/mig-"):
			gpuShort += part.nodes
			migShort += part.nodes
		case strings.HasPrefix(part.words, "Insufficient nvidia.com/gpu"):
			gpuShort += part.nodes
		case isRuleWords(part.words):
			ruled += part.nodes
		default:
			other += part.nodes
		}
	}
	// notHelpful is 0 without a preemption part: every node may be helped.
	notHelpful := 0
	if _, pparts, ok := readAvailability(preemption); ok {
		for _, part := range pparts {
			if strings.HasPrefix(part.words, "Preemption is not helpful") {
				notHelpful += part.nodes
			}
		}
	}
	allocPossible := gpuShort > 0 && notHelpful < nodes
	allocCertain := gpuShort > max(notHelpful-ruled, 0)
	var causes []Cause
	add := func(cs ...Cause) {
		for _, c := range cs {
			if !slices.Contains(causes, c) {
				causes = append(causes, c)
			}
		}
	}
	if claims > 0 {
		// The DRA filter's one answer, whatever the request lacks: devices
		// held, none that the class and selectors accept, or none with the
		// capacity that selectors ask.
		add(Allocation, Placement, Memory, NoSuchHardware)
	}
	if allocPossible {
		add(Allocation, Memory)
	}
	if spread > 0 {
		add(Placement)
	}
	if !allocCertain {
		if ruled > 0 {
			add(Placement)
		}
		if migShort > 0 {
			// No GPU's layout offers the profile: the layout (node
			// configuration) or the hardware, or the slice's memory.
			add(Placement, NoSuchHardware, Memory)
		}
		if gpuShort > 0 {
			// Too few GPUs under the resource asked for: too few on the
			// node, the node's configuration (the device plugin offers
			// them under another name), or their memory.
			add(NoSuchHardware, Placement, Memory)
		}
		if ruled > 0 || (other > 0 && notHelpful > 0) {
			// A node a rule excludes had its resources not looked at; one
			// too small in CPU or memory is hardware too.
			add(NoSuchHardware)
		}
		if other > 0 || ruled > 0 || (gpuShort == 0 && claims == 0) {
			add(Other)
		}
	}
	return causes
}

// ImpliedCauses is SchedulerCauses of the message for the pod of finding
// f, with placement added when a cross-node rule excludes some node
// (Finding.CrossNode): the scheduler reports only the first filter that
// fails on each node, and PodTopologySpread and InterPodAffinity come
// last, so a node it calls short of GPUs, CPU or pods may be excluded by
// such a rule too, which its message cannot show.
func ImpliedCauses(f Finding, message string) []Cause {
	causes := SchedulerCauses(message)
	if f.CrossNode && causes != nil && !slices.Contains(causes, Placement) {
		causes = append(causes, Placement)
	}
	return causes
}

// availability is one "N reason" part of an availability line.
type availability struct {
	nodes int
	words string
}

var availabilityLine = regexp.MustCompile(`^\s*\d+/(\d+) nodes are available(?:: (.*))?$`)

// readAvailability reads "0/N nodes are available: 3 reason, 2 reason."
func readAvailability(line string) (int, []availability, bool) {
	m := availabilityLine.FindStringSubmatch(strings.TrimSuffix(strings.TrimSpace(line), "."))
	if m == nil {
		return 0, nil, false
	}
	nodes, _ := strconv.Atoi(m[1])
	var parts []availability
	for _, part := range strings.Split(m[2], ", ") {
		count, words, ok := strings.Cut(part, " ")
		n, err := strconv.Atoi(count)
		if !ok || err != nil {
			continue
		}
		parts = append(parts, availability{nodes: n, words: strings.TrimSuffix(words, ".")})
	}
	return nodes, parts, true
}

// isRuleWords reports whether the scheduler's words are about a rule of the
// pod or a node's configuration rather than a shortage.
func isRuleWords(words string) bool {
	for _, rule := range []string{
		"didn't match Pod's node affinity/selector",
		"had untolerated taint",
		"were unschedulable",
		"didn't match pod topology spread constraints (missing required label)",
		"didn't match pod affinity rules",
	} {
		if strings.Contains(words, rule) {
			return true
		}
	}
	return false
}

// isResolvableRuleWords reports whether the words are of a cross-node rule
// that the scheduler calls resolvable (preemption might help): a topology
// spread skew, the pod's anti-affinity, the existing pods' anti-affinity.
func isResolvableRuleWords(words string) bool {
	return words == "node(s) didn't match pod topology spread constraints" ||
		strings.Contains(words, "didn't match pod anti-affinity rules") ||
		strings.Contains(words, "didn't satisfy existing pods anti-affinity rules")
}
