package diagnose

import (
	"regexp"
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
//   - GPUs short (Insufficient nvidia.com/gpu or nvidia.com/mig-*) on a node
//     where preemption could help: allocation (or memory, which the
//     scheduler cannot see).
//   - GPUs short, and preemption helps nowhere (the request exceeds every
//     node's allocatable): no such hardware (or memory, when the MIG slice
//     exists on no layout), or placement when rules exclude other nodes.
//   - No GPU shortage, nodes excluded by selector, affinity, taints or
//     cordons: placement, or quota/other when other resources are short too.
//   - GPUs short, and other nodes short of CPU, memory or pods where the
//     GPU-short nodes may all be too small: quota/other as well, the
//     nodes that have the GPUs lack the rest.
//   - Anything else (CPU, memory, pods, volumes): quota/other.
func SchedulerCauses(message string) []Cause {
	main, preemption, _ := strings.Cut(message, " preemption: ")
	nodes, parts, ok := readAvailability(main)
	if !ok {
		return nil
	}
	var gpuShort, migShort, ruled, other int
	for _, part := range parts {
		switch {
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
	notHelpful := 0
	if _, pparts, ok := readAvailability(preemption); ok {
		for _, part := range pparts {
			if strings.HasPrefix(part.words, "Preemption is not helpful") {
				notHelpful += part.nodes
			}
		}
	}
	unresolvable := preemption != "" && notHelpful >= nodes
	// Other nodes short of CPU, memory or pods: when they may be the only
	// nodes the GPUs could ever come from (the GPU-short nodes may all be
	// too small), the shortage outside GPUs is the cause.
	outside := other > 0 && (preemption == "" || gpuShort <= notHelpful)
	var causes []Cause
	switch {
	case gpuShort > 0 && !unresolvable:
		causes = []Cause{Allocation, Memory}
	case gpuShort > 0 && ruled > 0:
		causes = []Cause{Placement, NoSuchHardware}
		if migShort > 0 {
			// The slice no layout offers may be too small for the pod.
			causes = append(causes, Memory)
		}
	case migShort > 0:
		// No GPU's layout offers the profile: the layout (node
		// configuration) or the hardware, or the slice's memory.
		causes = []Cause{Placement, NoSuchHardware, Memory}
	case gpuShort > 0:
		causes = []Cause{NoSuchHardware, Memory}
	case ruled > 0 && other == 0:
		return []Cause{Placement}
	case ruled > 0:
		return []Cause{Placement, Other}
	default:
		return []Cause{Other}
	}
	if outside {
		causes = append(causes, Other)
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
		"didn't match pod topology spread constraints",
		"didn't match pod affinity rules",
		"didn't match pod anti-affinity rules",
		"didn't satisfy existing pods anti-affinity rules",
	} {
		if strings.Contains(words, rule) {
			return true
		}
	}
	return false
}
