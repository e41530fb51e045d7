// Package mempolicy is gpupack's one policy for giving freed memory back to
// the operating system between the phases of a run, and for the
// collector's margin while a large report's JSON is written.
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
)

// Large is how many pods (or an account's owners, about as many) make a
// phase large enough to hand its memory back after: at 10,000 a report
// holds tens of MB; below, a hand-back (a full collection and the return
// of every free page) costs more than it saves.
const Large = 10_000

// WritingGCPercent is the collector's margin (GOGC) while a large
// report's JSON is written: half the live heap, the report. The JSON adds
// nothing live, only its own garbage (about a seventh of its text), and at
// GOGC's 100 the heap grew to twice the report. At a month of 1,000 GPUs
// (a 270 MiB report) a quarter kept the JSON at about 400 MiB of RSS for
// about six collections of the report instead of one; half keeps it at
// about 450 MiB, under the reading's peak, for about three.
const WritingGCPercent = 50

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
	prev := debug.SetGCPercent(WritingGCPercent)
	if prev < WritingGCPercent {
		debug.SetGCPercent(prev) // GOGC asked for less, or off
		return func() {}
	}
	return func() { debug.SetGCPercent(prev) }
}
