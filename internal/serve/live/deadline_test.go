package live

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpupack/gpupack/internal/source/promql"
	"github.com/gpupack/gpupack/usage"
)

// hangingSource answers as fixedSource does until hang is set, then blocks
// every read until its context ends, as a hung Prometheus behind a client
// without a timeout would. A read without a deadline is refused at once,
// so that a refresh without one fails the test rather than blocking it.
type hangingSource struct {
	fixedSource
	hang       atomic.Bool
	noDeadline atomic.Int32
}

func (h *hangingSource) wait(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		h.noDeadline.Add(1)
		return errors.New("read without a deadline")
	}
	if !h.hang.Load() {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (h *hangingSource) LoadBuckets(ctx context.Context, w usage.Window, b time.Duration) ([]usage.Bucket, error) {
	return nil, h.wait(ctx)
}

func (h *hangingSource) LoadPodTimes(ctx context.Context, w usage.Window, b time.Duration) ([]*promql.PodTimes, error) {
	return nil, h.wait(ctx)
}

func (h *hangingSource) LoadHealth(ctx context.Context, w usage.Window) ([]usage.DeviceHealth, error) {
	if err := h.wait(ctx); err != nil {
		return nil, err
	}
	return h.fixedSource.LoadHealth(ctx, w)
}

// TestRefreshEndsOnAHungPrometheus: every read of a refresh has a
// deadline within the refresh interval, the first read of the window as
// the later ones, so that a Prometheus that never answers fails the
// refresh and Ready says so, however long the HTTP client would wait.
func TestRefreshEndsOnAHungPrometheus(t *testing.T) {
	cases := map[string]struct {
		hangFirst bool // the first read of the window hangs, not a later refresh
	}{
		"first read": {hangFirst: true},
		"later read": {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clk := &clock{t: time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)}
			src := &hangingSource{}
			e, err := New(Options{Window: 2 * time.Hour, Step: step, Refresh: 20 * time.Millisecond, Now: clk.now}, src, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.hangFirst {
				e.Refresh(t.Context())
				if err := e.Ready(); err != nil {
					t.Fatalf("Ready after a good first read: %v", err)
				}
				clk.set(clk.now().Add(step))
			}
			src.hang.Store(true)
			e.Refresh(t.Context()) // t.Context() ends only with the test
			if n := src.noDeadline.Load(); n > 0 {
				t.Fatalf("%d reads from the source had no deadline", n)
			}
			if err := e.Ready(); err == nil || !strings.Contains(err.Error(), context.DeadlineExceeded.Error()) {
				t.Errorf("Ready after a refresh on a hung Prometheus = %v, want the deadline's error", err)
			}
		})
	}
}

// TestReadyWhenStale: Ready turns not ready once the last good data is
// older than three refresh intervals and a step, and says how old.
func TestReadyWhenStale(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	clk := &clock{t: t0}
	e, err := New(Options{Window: 2 * time.Hour, Step: step, Refresh: time.Minute, Now: clk.now}, fixedSource{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Refresh(t.Context())
	bound := 3*time.Minute + step
	clk.set(t0.Add(bound))
	if err := e.Ready(); err != nil {
		t.Fatalf("Ready with data %s old = %v, want ready", bound, err)
	}
	clk.set(t0.Add(bound + time.Second))
	err = e.Ready()
	if err == nil || !strings.Contains(err.Error(), "the data is 3m31s old (as of 2026-01-05T12:00:00Z)") {
		t.Errorf("Ready with data %s old = %v, want not ready, saying how old", bound+time.Second, err)
	}
}
