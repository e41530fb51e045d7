package cluster

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Quantity is an amount of a DRA device capacity (resource.k8s.io/v1
// device.capacity, a claim request's capacity.requests, an allocation's
// consumedCapacity) in the capacity's base unit: bytes for memory, whole
// units for counts. It is a Kubernetes quantity rounded up to a whole unit,
// as resource.Quantity.Value and the allocator's integer range arithmetic
// read it (fractional capacity ranges, an alpha feature, are not
// modelled). It is written as a quantity string: "80Gi", "4".
type Quantity int64

// quantitySuffixes are the suffixes of Kubernetes quantities
// (k8s.io/apimachinery/pkg/api/resource, suffix.go): binary SI, decimal SI.
var quantitySuffixes = []struct {
	suffix string
	mult   *big.Rat
}{
	{"Ki", big.NewRat(1<<10, 1)}, {"Mi", big.NewRat(1<<20, 1)}, {"Gi", big.NewRat(1<<30, 1)},
	{"Ti", big.NewRat(1<<40, 1)}, {"Pi", big.NewRat(1<<50, 1)}, {"Ei", big.NewRat(1<<60, 1)},
	{"n", big.NewRat(1, 1e9)}, {"u", big.NewRat(1, 1e6)}, {"m", big.NewRat(1, 1e3)},
	{"k", big.NewRat(1e3, 1)}, {"M", big.NewRat(1e6, 1)}, {"G", big.NewRat(1e9, 1)},
	{"T", big.NewRat(1e12, 1)}, {"P", big.NewRat(1e15, 1)}, {"E", big.NewRat(1e18, 1)},
}

// ParseQuantity reads a non-negative Kubernetes quantity ("80Gi", "10G",
// "1.5Gi", "4", "5e3") and rounds it up to a whole unit.
func ParseQuantity(s string) (Quantity, error) {
	s = strings.TrimSpace(s)
	bad := func() (Quantity, error) {
		return 0, fmt.Errorf("%q is not a quantity: want a non-negative number with an optional suffix, such as \"80Gi\", \"10G\" or \"4\"", s)
	}
	if s == "" || strings.HasPrefix(s, "-") {
		return bad()
	}
	num := strings.TrimPrefix(s, "+")
	mult := big.NewRat(1, 1)
	if exp, mant, ok := decimalExponent(num); ok {
		if exp < -18 || exp > 18 {
			return bad()
		}
		mult.SetFrac(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(max(exp, 0))), nil), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(max(-exp, 0))), nil))
		num = mant
	} else {
		for _, u := range quantitySuffixes {
			if v, ok := strings.CutSuffix(num, u.suffix); ok {
				num, mult = v, u.mult
				break
			}
		}
	}
	if num == "" || strings.ContainsAny(num, "eE+-/") {
		return bad()
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return bad()
	}
	r.Mul(r, mult)
	q, rem := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if rem.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return 0, fmt.Errorf("quantity %q is larger than %d units", s, int64(math.MaxInt64))
	}
	return Quantity(q.Int64()), nil
}

// decimalExponent splits "5e3" into 3 and "5"; "1E" (the exa suffix) and
// "1Ei" are not exponents.
func decimalExponent(s string) (int, string, bool) {
	i := strings.IndexAny(s, "eE")
	if i <= 0 || i == len(s)-1 {
		return 0, "", false
	}
	exp, err := strconv.Atoi(s[i+1:])
	if err != nil {
		return 0, "", false
	}
	return exp, s[:i], true
}

// String writes the quantity exactly, with the largest binary suffix that
// divides it from Mi up ("80Gi", "512Mi"), else as a whole number.
func (q Quantity) String() string {
	for _, u := range []struct {
		suffix string
		size   Quantity
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}} {
		if q != 0 && q%u.size == 0 {
			return strconv.FormatInt(int64(q/u.size), 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(q), 10)
}

// MarshalText writes the quantity as String does.
func (q Quantity) MarshalText() ([]byte, error) { return []byte(q.String()), nil }

// UnmarshalText reads a quantity as ParseQuantity does.
func (q *Quantity) UnmarshalText(b []byte) error {
	v, err := ParseQuantity(string(b))
	if err != nil {
		return err
	}
	*q = v
	return nil
}

// DeviceCapacity is one capacity of a DRA device (device.capacity[name])
// with its request policy (DRAConsumableCapacity). A claim request's
// capacity request is judged against it as the kube-scheduler's allocator
// does (placement), which matters most on a device that allows multiple
// allocations: its claims share the capacity.
type DeviceCapacity struct {
	Name  string   `json:"name"`
	Value Quantity `json:"value"`
	// Policy is the capacity's requestPolicy; nil when it has none (a
	// request takes what it asks, an omitted request the whole value).
	Policy *CapacityPolicy `json:"requestPolicy,omitempty"`
}

// CapacityPolicy is a capacity's requestPolicy: the amount taken when a
// request omits the capacity (Default), and either the valid values or a
// valid range (Min, optional Max and Step) to which a request is rounded
// up.
type CapacityPolicy struct {
	Default     *Quantity  `json:"default,omitempty"`
	ValidValues []Quantity `json:"validValues,omitempty"`
	Min         *Quantity  `json:"min,omitempty"`
	Max         *Quantity  `json:"max,omitempty"`
	Step        *Quantity  `json:"step,omitempty"`
}

// checkCapacities validates a file device's capacities.
func checkCapacities(caps []DeviceCapacity) error {
	seen := map[string]bool{}
	for i, c := range caps {
		switch {
		case c.Name == "":
			return fmt.Errorf("capacity[%d].name: missing", i)
		case seen[c.Name]:
			return fmt.Errorf("capacity[%d]: %s is given twice", i, c.Name)
		}
		seen[c.Name] = true
		p := c.Policy
		if p == nil {
			continue
		}
		switch {
		case len(p.ValidValues) > 0 && p.Min != nil:
			return fmt.Errorf("capacity %s: requestPolicy has both validValues and a range (min); give one", c.Name)
		case p.Min == nil && (p.Max != nil || p.Step != nil):
			return fmt.Errorf("capacity %s: requestPolicy's range needs min", c.Name)
		case p.Step != nil && *p.Step == 0:
			return fmt.Errorf("capacity %s: requestPolicy's step is 0", c.Name)
		case p.Min != nil && p.Max != nil && *p.Max < *p.Min:
			return fmt.Errorf("capacity %s: requestPolicy's max %s is below its min %s", c.Name, *p.Max, *p.Min)
		}
		for j := 1; j < len(p.ValidValues); j++ {
			if p.ValidValues[j] <= p.ValidValues[j-1] {
				return fmt.Errorf("capacity %s: requestPolicy's validValues must rise (%s after %s)", c.Name, p.ValidValues[j], p.ValidValues[j-1])
			}
		}
	}
	return nil
}
