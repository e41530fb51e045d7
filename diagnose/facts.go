package diagnose

import "github.com/gpupack/gpupack/usage"

// Usage, PodFacts and Pattern are the usage package's per-pod facts and
// pattern names, under the names diagnose's code reads them by: the facts
// have one home (usage), and these are that type, not copies of it.
type (
	Usage    = usage.Facts
	PodFacts = usage.PodFacts
	Pattern  = usage.PatternName
)
