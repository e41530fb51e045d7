package cli

import (
	"bytes"
	"context"
	"testing"

	"github.com/gpupack/gpupack/internal/testkit/golden"
)

// TestCLIReferenceIsCurrent keeps docs/reference/cli.md what WriteReference
// makes of the command tree: a changed flag, default or help text fails it
// until the reference is regenerated with -update (make docs).
func TestCLIReferenceIsCurrent(t *testing.T) {
	var b bytes.Buffer
	if err := WriteReference(&b, NewRoot(context.Background())); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "../../docs/reference/cli.md", b.Bytes())
}
