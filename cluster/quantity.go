package cluster

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gpupack/gpupack/gpu"
)

// ParseCPU reads a CPU quantity as Kubernetes writes it: "8", "0.5" or
// "500m". The result is in milli-CPU.
func ParseCPU(s string) (gpu.CPUMilli, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty CPU quantity; write cores (\"8\", \"0.5\") or millicores (\"500m\")")
	}
	if v, ok := strings.CutSuffix(s, "m"); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("CPU quantity %q: want a non-negative whole number of millicores", s)
		}
		return gpu.CPUMilli(n), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > 1e7 {
		return 0, fmt.Errorf("CPU quantity %q: want cores (\"8\", \"0.5\") or millicores (\"500m\")", s)
	}
	return gpu.CPUMilli(math.Round(f * 1000)), nil
}

var memUnits = []struct {
	suffix string
	mib    float64
}{
	{"Ki", 1.0 / 1024}, {"Mi", 1}, {"Gi", 1024}, {"Ti", 1024 * 1024}, {"Pi", 1024 * 1024 * 1024},
	{"k", 1000.0 / (1 << 20)}, {"M", 1e6 / (1 << 20)}, {"G", 1e9 / (1 << 20)}, {"T", 1e12 / (1 << 20)},
}

// ParseMemory reads a memory quantity as Kubernetes writes it ("64Gi",
// "512Mi", "1G", or plain bytes). The result is in MiB, rounded up.
func ParseMemory(s string) (gpu.MiB, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty memory quantity; write it with a unit, such as \"64Gi\"")
	}
	mult := 1.0 / (1 << 20) // plain bytes
	num := s
	for _, u := range memUnits {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = v, u.mib
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, fmt.Errorf("memory quantity %q: want a number with a unit such as \"64Gi\" or \"512Mi\"", s)
	}
	mib := math.Ceil(f*mult - 1e-9)
	if mib > float64(1<<40) {
		return 0, fmt.Errorf("memory quantity %q is absurdly large", s)
	}
	return gpu.MiB(mib), nil
}

// FormatMemory writes MiB as the shortest exact Kubernetes quantity.
func FormatMemory(m gpu.MiB) string {
	switch {
	case m != 0 && m%(1024*1024) == 0:
		return fmt.Sprintf("%dTi", m/(1024*1024))
	case m != 0 && m%1024 == 0:
		return fmt.Sprintf("%dGi", m/1024)
	}
	return fmt.Sprintf("%dMi", m)
}

// FormatCPU writes milli-CPU as a Kubernetes quantity.
func FormatCPU(c gpu.CPUMilli) string {
	if c%1000 == 0 {
		return strconv.FormatInt(int64(c/1000), 10)
	}
	return fmt.Sprintf("%dm", c)
}
