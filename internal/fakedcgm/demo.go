package fakedcgm

import (
	_ "embed"

	"github.com/gpupack/gpupack/gpu"
)

//go:embed demo.yaml
var demoYAML []byte

// Demo is the embedded demo scenario: a day on three GPU nodes.
func Demo(c *gpu.Catalogue) *Scenario {
	s, err := Parse(demoYAML, "demo.yaml", c)
	if err != nil {
		panic("fakedcgm: the embedded demo scenario is invalid: " + err.Error())
	}
	return s
}
