package cluster

import (
	"errors"
	"io"
)

// maxTraceSeconds is the latest trace time taken for real: about 300 years.
const maxTraceSeconds = int64(1) << 33

// TraceLifetime is when a trace pod was created, bound and deleted, in
// seconds from the trace's start (openb's creation_time, scheduled_time and
// deletion_time columns).
type TraceLifetime struct {
	CreatedSeconds int64
	// ScheduledSeconds is when the trace's own scheduler bound the pod; -1
	// when it never did (a pod that stayed Pending).
	ScheduledSeconds int64
	DeletedSeconds   int64
}

// RunSeconds is how long the pod ran in the trace: deletion minus
// scheduling, or deletion minus creation for a pod never scheduled (it held
// nothing in the trace, so its whole life is the best guess of the run it
// asked for).
func (l TraceLifetime) RunSeconds() int64 {
	if l.ScheduledSeconds < 0 {
		return l.DeletedSeconds - l.CreatedSeconds
	}
	return l.DeletedSeconds - l.ScheduledSeconds
}

// LoadTraceLifetimes reads the times of an openb pod list, one per row in
// the order LoadTracePods returns the pods. creation_time and deletion_time
// are required on every row; scheduled_time may be missing (the column or
// a cell) for pods never scheduled.
func LoadTraceLifetimes(r io.Reader, file string) ([]TraceLifetime, error) {
	t, err := newCSVTable(r, file, []string{"name", "creation_time", "deletion_time"})
	if err != nil {
		return nil, err
	}
	_, hasScheduled := t.cols["scheduled_time"]
	var out []TraceLifetime
	for {
		ok, err := t.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		l := TraceLifetime{ScheduledSeconds: -1}
		if l.CreatedSeconds, err = t.int("creation_time", maxTraceSeconds); err != nil {
			return nil, err
		}
		if isNone(t.get("deletion_time")) {
			return nil, t.errorf("deletion_time", "empty; a replay needs every pod's deletion time (use the time the trace ends for pods still running)")
		}
		if l.DeletedSeconds, err = t.int("deletion_time", maxTraceSeconds); err != nil {
			return nil, err
		}
		if l.DeletedSeconds < l.CreatedSeconds {
			return nil, t.errorf("deletion_time", "%d is before creation_time %d", l.DeletedSeconds, l.CreatedSeconds)
		}
		if hasScheduled && !isNone(t.get("scheduled_time")) {
			if l.ScheduledSeconds, err = t.int("scheduled_time", maxTraceSeconds); err != nil {
				return nil, err
			}
			if l.ScheduledSeconds < l.CreatedSeconds || l.ScheduledSeconds > l.DeletedSeconds {
				return nil, t.errorf("scheduled_time", "%d is outside the pod's life, creation_time %d to deletion_time %d", l.ScheduledSeconds, l.CreatedSeconds, l.DeletedSeconds)
			}
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		return nil, &TraceError{File: file, Line: 2, Err: errors.New("no pods; the file has only a header")}
	}
	return out, nil
}
