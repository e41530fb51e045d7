package main

import (
	"math"
	"os"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// TestSetMemoryLimit: a container's limit becomes the runtime's soft
// limit at 90%; no limit leaves none; GOMEMLIMIT overrides it; an
// AUTOMEMLIMIT that is not a ratio is an error.
func TestSetMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("AUTOMEMLIMIT", "")
	os.Unsetenv("AUTOMEMLIMIT") // restored by Setenv's cleanup
	var gib uint64 = 1 << 30
	want := int64(float64(gib) * 0.9)
	if got, err := setMemoryLimit(memlimit.Limit(gib)); err != nil || got != want || debug.SetMemoryLimit(-1) != want {
		t.Errorf("limit %d, %v (runtime %d), want %d", got, err, debug.SetMemoryLimit(-1), want)
	}
	if got, err := setMemoryLimit(func() (uint64, error) { return 0, memlimit.ErrNoLimit }); err != nil || got != math.MaxInt64 {
		t.Errorf("without a limit: %d, %v, want none (%d)", got, err, int64(math.MaxInt64))
	}
	debug.SetMemoryLimit(123 << 20)
	t.Setenv("GOMEMLIMIT", "123MiB")
	if got, err := setMemoryLimit(memlimit.Limit(gib)); err != nil || got != 123<<20 {
		t.Errorf("with GOMEMLIMIT set: %d, %v, want it kept (%d)", got, err, 123<<20)
	}
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("AUTOMEMLIMIT", "lots")
	if _, err := setMemoryLimit(memlimit.Limit(gib)); err == nil {
		t.Error("AUTOMEMLIMIT=lots: no error, want one that names it")
	}
}

// TestNoCgroupIsNoLimit: outside Linux or any cgroup there is no limit
// to follow, and no warning to print at every command.
func TestNoCgroupIsNoLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("AUTOMEMLIMIT", "")
	os.Unsetenv("AUTOMEMLIMIT")
	for _, e := range []error{memlimit.ErrNoCgroup, memlimit.ErrCgroupsNotSupported} {
		if _, err := setMemoryLimit(func() (uint64, error) { return 0, e }); err != nil {
			t.Errorf("%v: %v, want no error", e, err)
		}
	}
}
