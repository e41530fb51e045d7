package app

import (
	"context"
	"errors"
	"io"
	"testing"
)

// TestDiagnoseStopsWhenCancelled: a diagnosis whose context is done (a
// SIGINT or SIGTERM to gpupack diagnose) returns the context's error, not
// a finished report.
func TestDiagnoseStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d, err := Diagnose(ctx, DiagnoseRequest{}, io.Discard)
	if !errors.Is(err, context.Canceled) || d != nil {
		t.Errorf("Diagnose with a cancelled context = %v, %v; want no diagnosis and context.Canceled", d, err)
	}
}
