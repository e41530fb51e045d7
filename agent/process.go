package agent

import (
	"slices"

	"github.com/gpupack/gpupack/usage"
)

// UtilSample is one of NVML's per-process utilisation samples
// (nvmlProcessUtilizationSample_t): SM and memory-interface use in
// percent over NVML's sampling period ending at TimeStampUs.
type UtilSample struct {
	PID         uint32
	TimeStampUs uint64
	SMPercent   uint32
	MemPercent  uint32
}

// RunningProcess is a compute process holding device memory
// (nvmlProcessInfo_t).
type RunningProcess struct {
	PID       uint32
	UsedBytes uint64
}

// Processes merges an interval's utilisation samples and the running
// processes into one ProcessSample per PID, sorted by PID. A PID's
// activity is the mean of its samples; a running process without a
// sample was idle (0) where utilisation was measured. A PID sampled but
// no longer running (it exited in the interval) holds 0 MiB; with
// runningKnown false every process's framebuffer is unknown.
func Processes(util []UtilSample, running []RunningProcess, activityMeasured, runningKnown bool) []ProcessSample {
	type sums struct {
		sm, mem float64
		n       int
		used    uint64
	}
	byPID := map[uint32]*sums{}
	get := func(pid uint32) *sums {
		s := byPID[pid]
		if s == nil {
			s = &sums{}
			byPID[pid] = s
		}
		return s
	}
	for _, u := range util {
		s := get(u.PID)
		s.sm += float64(min(u.SMPercent, 100)) / 100
		s.mem += float64(min(u.MemPercent, 100)) / 100
		s.n++
	}
	for _, r := range running {
		get(r.PID).used += r.UsedBytes
	}
	out := make([]ProcessSample, 0, len(byPID))
	for pid, s := range byPID {
		p := ProcessSample{PID: pid, SMActive: usage.Unknown, MemActive: usage.Unknown, FBUsedMiB: usage.Unknown}
		if activityMeasured {
			p.SMActive, p.MemActive = usage.Known(0), usage.Known(0)
			if s.n > 0 {
				p.SMActive, p.MemActive = usage.Known(s.sm/float64(s.n)), usage.Known(s.mem/float64(s.n))
			}
		}
		if runningKnown {
			p.FBUsedMiB = usage.Known(float64(s.used) / (1 << 20))
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(x, y ProcessSample) int { return int(int64(x.PID) - int64(y.PID)) })
	return out
}

// CgroupCache keeps each PID's cgroup from the interval it was first read
// in, so that a process that exits before the next read is still
// attributed to its container while NVML still reports its samples. It
// forgets a PID that no device reported for keepIntervals intervals, so
// it holds at most the PIDs of the last few intervals.
type CgroupCache struct {
	entries map[uint32]cacheEntry
	tick    int
}

type cacheEntry struct {
	ref      CgroupRef
	ok       bool
	lastSeen int
}

// keepIntervals is how many intervals a PID no device reports stays known.
const keepIntervals = 2

// NewCgroupCache makes an empty cache.
func NewCgroupCache() *CgroupCache { return &CgroupCache{entries: map[uint32]cacheEntry{}} }

// Resolve gives the cgroups of the samples' processes: from the cache, or
// read (read returns ok false for a process in no pod, an error for one
// that is gone or unreadable: it stays unresolved and is tried again next
// interval). It then forgets PIDs unseen for keepIntervals intervals.
func (c *CgroupCache) Resolve(samples []DeviceSample, read func(pid uint32) (CgroupRef, bool, error)) map[uint32]CgroupRef {
	c.tick++
	out := map[uint32]CgroupRef{}
	for _, s := range samples {
		for _, p := range s.Processes {
			e, cached := c.entries[p.PID]
			if !cached {
				ref, ok, err := read(p.PID)
				if err != nil {
					continue
				}
				e = cacheEntry{ref: ref, ok: ok}
			}
			e.lastSeen = c.tick
			c.entries[p.PID] = e
			if e.ok {
				out[p.PID] = e.ref
			}
		}
	}
	for pid, e := range c.entries {
		if c.tick-e.lastSeen >= keepIntervals {
			delete(c.entries, pid)
		}
	}
	return out
}

// Len is the number of PIDs the cache holds.
func (c *CgroupCache) Len() int { return len(c.entries) }
