package mempolicy

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func gcPercent() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

// TestHandBack: only a one-shot policy hands back, and only from Large
// pods; a hand-back is a collection.
func TestHandBack(t *testing.T) {
	for _, c := range []struct {
		name string
		p    Policy
		n    int
		want bool
	}{
		{"one-shot, large", OneShot, Large, true},
		{"one-shot, larger", OneShot, 10 * Large, true},
		{"one-shot, small", OneShot, Large - 1, false},
		{"long-running, large", LongRunning, 10 * Large, false},
		{"zero value, large", Policy{}, Large, false},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		got := c.p.HandBack(c.n)
		runtime.ReadMemStats(&after)
		if got != c.want || c.p.HandsBack(c.n) != c.want {
			t.Errorf("%s: HandBack(%d) = %v, HandsBack %v, want %v", c.name, c.n, got, c.p.HandsBack(c.n), c.want)
		}
		if collected := after.NumForcedGC > before.NumForcedGC; collected != c.want {
			t.Errorf("%s: forced collection %v, want %v", c.name, collected, c.want)
		}
	}
}

// TestWriting: a one-shot large report is written at WritingGCPercent
// unless GOGC asked for less or none, and the margin is put back after;
// anything else leaves it alone.
func TestWriting(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	for _, c := range []struct {
		name          string
		p             Policy
		n             int
		before, while int
	}{
		{"default GOGC", OneShot, Large, 100, WritingGCPercent},
		{"higher GOGC", OneShot, Large, 400, WritingGCPercent},
		{"lower GOGC", OneShot, Large, 10, 10},
		{"GOGC off", OneShot, Large, -1, -1},
		{"small", OneShot, Large - 1, 100, 100},
		{"long-running", LongRunning, 10 * Large, 100, 100},
	} {
		debug.SetGCPercent(c.before)
		done := c.p.Writing(c.n)
		while := gcPercent()
		done()
		if after := gcPercent(); while != c.while || after != c.before {
			t.Errorf("%s: GC percent %d while writing, %d after; want %d, %d", c.name, while, after, c.while, c.before)
		}
	}
}

// TestReading: a one-shot run reads at ReadingGCPercent, whatever its
// size, unless GOGC asked for less or none; the margin is put back once,
// so that a second call cannot undo a later change; a long-running one
// leaves it alone.
func TestReading(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	for _, c := range []struct {
		name          string
		p             Policy
		before, while int
	}{
		{"default GOGC", OneShot, 100, ReadingGCPercent},
		{"higher GOGC", OneShot, 400, ReadingGCPercent},
		{"lower GOGC", OneShot, 10, 10},
		{"GOGC off", OneShot, -1, -1},
		{"long-running", LongRunning, 100, 100},
	} {
		debug.SetGCPercent(c.before)
		done := c.p.Reading()
		while := gcPercent()
		done()
		if after := gcPercent(); while != c.while || after != c.before {
			t.Errorf("%s: GC percent %d while reading, %d after; want %d, %d", c.name, while, after, c.while, c.before)
		}
		debug.SetGCPercent(33) // what a later phase may set
		done()
		if again := gcPercent(); again != 33 {
			t.Errorf("%s: a second done set the GC percent to %d, want it left at 33", c.name, again)
		}
	}
}
