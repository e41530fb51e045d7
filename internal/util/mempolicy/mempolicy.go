// Package mempolicy is gpupack's one policy for giving freed memory back to
// the operating system between the phases of a run, and for the
// collector's margin while a one-shot run reads its window and while a
// large report's JSON is written.
//
// A one-shot command (gpupack report) is measured by its peak
// resident memory: a month of a fleet's report reads answers, accounts,
// builds the report and writes it, and each phase frees most of what the
// one before took. Kept, that memory stays resident in pieces too small
// for the next phase's large allocations, which are laid beside it, and
// the peak is the phases' sum instead of the largest. Handed back between
// them, it is the largest.
//
// A long-running process (serve) repeats the same phases every refresh:
// memory handed back is taken again a minute later, its pages faulted in
// again, and each hand-back is a full collection. It hands nothing back;
// its bound is the soft memory limit (GOMEMLIMIT) set from its container.
//
// The zero Policy is the long-running one.
package mempolicy

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// Large is how many pods (or an account's owners, about as many) make a
// phase large enough to hand its memory back after: at 10,000 a report
// holds tens of MB; below, a hand-back (a full collection and the return
// of every free page) costs more than it saves.
const Large = 10_000

// WritingGCPercent is the collector's margin (GOGC) while a large
// report's JSON is written: half the live heap, the report. The JSON adds
// nothing live, only its own garbage (about a seventh of its text); at
// GOGC's 100 the heap would grow to twice the report between collections.
// A smaller margin collects more often for little less memory; half keeps
// the write under the reading's peak (docs/benchmarks.md has the figures).
const WritingGCPercent = 50

// ReadingGCPercent is the collector's margin (GOGC) while a one-shot run
// reads its window: the buckets, then the pods' times. What is live then
// is the account as it grows and the answers in flight; each answer read
// is garbage at once, so at GOGC's 100 the heap would grow to twice the
// live set between collections, above the report that follows. 75 keeps
// the reading under the report's peak for the same CPU
// (BenchmarkSyntheticMonth; docs/benchmarks.md has the figures).
const ReadingGCPercent = 75

// Policy says whether a run hands memory back between its phases.
type Policy struct{ handBack bool }

// OneShot is the policy of commands that run once and exit.
var OneShot = Policy{handBack: true}

// LongRunning is the policy of serve: nothing is handed back.
var LongRunning = Policy{}

// HandsBack reports whether p hands memory back after a phase of n pods.
func (p Policy) HandsBack(n int) bool { return p.handBack && n >= Large }

// HandBack is called between two phases of a run that holds n pods:
// under a one-shot policy, from Large pods, it collects and returns what
// is free to the operating system. It reports whether it did.
func (p Policy) HandBack(n int) bool {
	if !p.HandsBack(n) {
		return false
	}
	debug.FreeOSMemory()
	return true
}

// Reading is called before a one-shot run reads its window, and the
// function it returns once it has. Under a one-shot policy it sets the
// collector's margin to ReadingGCPercent, unless GOGC asked for less or
// for none, whatever the window's size: the size is known only once it is
// read, and a small window's extra collections are of a small heap. The
// function puts the margin back; calling it again does nothing.
func (p Policy) Reading() (done func()) {
	if !p.handBack {
		return func() {}
	}
	return lowerGCPercent(ReadingGCPercent)
}

// Writing is called before a report of n pods is written, and the
// function it returns after. Under a one-shot policy, from Large pods, it
// collects what came before (the report alone stays live) and sets the
// collector's margin to WritingGCPercent while the report is written,
// unless GOGC asked for less or for none; the function puts it back.
func (p Policy) Writing(n int) (done func()) {
	if !p.HandsBack(n) {
		return func() {}
	}
	runtime.GC()
	return lowerGCPercent(WritingGCPercent)
}

// lowerGCPercent sets the collector's margin to percent where it is
// higher, and returns the function that puts it back once.
func lowerGCPercent(percent int) (restore func()) {
	prev := debug.SetGCPercent(percent)
	if prev < percent {
		debug.SetGCPercent(prev) // GOGC asked for less, or off
		return func() {}
	}
	var once sync.Once
	return func() { once.Do(func() { debug.SetGCPercent(prev) }) }
}
