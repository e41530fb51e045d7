package gpu

import (
	"fmt"
	"strconv"
	"strings"
)

// MiB is an amount of memory in mebibytes (2^20 bytes).
type MiB int64

// GiB converts gibibytes to MiB.
func GiB(n float64) MiB { return MiB(n * 1024) }

// String prints the amount in the largest unit that keeps it readable:
// under 1 GiB in MiB, else in GiB to one decimal, a whole number of GiB
// without it ("15GiB" for the T4's 15,360 MiB and the A16's 15,356 alike,
// "22.5GiB"), so that one amount has one form wherever it is printed.
func (m MiB) String() string {
	if m < 1024 {
		return fmt.Sprintf("%dMiB", int64(m))
	}
	return strings.TrimSuffix(strconv.FormatFloat(float64(m)/1024, 'f', 1, 64), ".0") + "GiB"
}

// Milli is a fraction of one GPU in thousandths: 1000 is a whole GPU, 250 a
// quarter of one. It is the unit of the openb trace's gpu_milli column.
type Milli int64

// WholeGPU is one whole GPU in Milli.
const WholeGPU Milli = 1000

// Ratio returns the fraction as a number in 0..1 (or more for several GPUs).
func (m Milli) Ratio() float64 { return float64(m) / float64(WholeGPU) }

// String prints the fraction as GPUs, e.g. "0.25".
func (m Milli) String() string {
	if m%WholeGPU == 0 {
		return fmt.Sprintf("%d", m/WholeGPU)
	}
	return fmt.Sprintf("%.3g", m.Ratio())
}

// CPUMilli is CPU in thousandths of a core, as Kubernetes counts it.
type CPUMilli int64

// String prints cores, e.g. "7.5".
func (c CPUMilli) String() string {
	if c%1000 == 0 {
		return fmt.Sprintf("%d", c/1000)
	}
	return fmt.Sprintf("%g", float64(c)/1000)
}
