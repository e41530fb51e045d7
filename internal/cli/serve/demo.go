package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gpupack/gpupack/change"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/serve/live"
	"github.com/gpupack/gpupack/plan"
)

// simulateDemo fills in the demo view's simulator curve; a test replaces
// it to hold the simulation back and see what the page shows meanwhile.
var simulateDemo = app.WithDemoCurve

// demoProvider serves the demo view as it is built, in the background, so
// that the server answers at once: first nothing (Ready says what is being
// built), then the view without the simulator's curve (about a second),
// then the whole view (the simulation takes seconds more).
type demoProvider struct {
	mu       sync.Mutex
	view     *app.View
	changes  *app.ChangeStatus
	reclaims *app.ReclaimStatus
	err      error
}

// newDemoProvider starts building the demo view and its change set; the
// work stops when ctx ends.
func newDemoProvider(ctx context.Context) *demoProvider {
	d := &demoProvider{}
	go d.build(ctx)
	return d
}

func (d *demoProvider) build(ctx context.Context) {
	v, err := app.DemoViewWithoutCurve(ctx)
	if err != nil {
		d.fail(fmt.Errorf("serve --demo: %w", err))
		return
	}
	set, _, _, err := app.BuildChangeSet(ctx, app.ChangeSetRequest{Plan: app.PlanRequest{Options: plan.DefaultOptions()}, Change: change.DefaultOptions()}, io.Discard)
	if err != nil {
		d.fail(fmt.Errorf("serve --demo: change set: %w", err))
		return
	}
	// The rest of the demo stands without its reclaim dry run; the
	// section says why it is missing.
	rs := app.NewReclaimStatus(nil)
	if rd, err := app.DetectReclaim(ctx, app.ReclaimRequest{}, io.Discard); err != nil {
		rs.Error = "the demo's reclaim dry run: " + err.Error()
	} else {
		rs = app.NewReclaimStatus(rd.Set)
	}
	d.mu.Lock()
	d.reclaims = &rs
	d.mu.Unlock()
	d.publish(v, &app.ChangeStatus{Set: set, Built: v.AsOf})
	whole, err := simulateDemo(ctx, v)
	if err != nil {
		// The rest of the view stands; the page says why the curve is
		// missing instead of saying it is being computed.
		c := *v
		c.Computing = nil
		c.Warnings = append(append([]string(nil), v.Warnings...), fmt.Sprintf("the simulator's curve could not be computed: %v", err))
		whole = &c
	}
	d.publish(whole, nil)
}

func (d *demoProvider) publish(v *app.View, changes *app.ChangeStatus) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.view = v
	if changes != nil {
		d.changes = changes
	}
}

func (d *demoProvider) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.err = err
}

// View is the demo view as far as it is built; nil before its first part.
func (d *demoProvider) View() *app.View {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.view
}

// Ready is nil once the view's first part is built, else what is being
// built or why it failed.
func (d *demoProvider) Ready() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.view != nil:
		return nil
	case d.err != nil:
		return d.err
	}
	return errors.New("building the demo view (report, diagnose, plan); the simulator's curve follows")
}

// Changes is the demo plan's change set, shown as the apply controller
// would show it: never approved, never applied; an empty status until it
// is built.
func (d *demoProvider) Changes() *app.ChangeStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.changes == nil {
		return &app.ChangeStatus{}
	}
	return d.changes
}

// Reclaims is the demo's reclaim dry run, shown as the reclaim controller
// would show it: nothing approved, nothing acted on, an empty ledger; an
// empty status until it is detected.
func (d *demoProvider) Reclaims() *app.ReclaimStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.reclaims == nil {
		s := app.NewReclaimStatus(nil)
		return &s
	}
	return d.reclaims
}

// demoMetrics serves /metrics over the demo view, under the names and
// labels the live server uses.
func demoMetrics(d *demoProvider) http.Handler {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(live.ViewCollector(d.View))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
}
