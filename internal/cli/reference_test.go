package cli

import (
	"bytes"
	"context"
	"testing"

	"github.com/spf13/pflag"

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

// TestFlagValueNamesAreTypes: help shows each flag's value as its type
// ("--usage string"). pflag takes a back-quoted word of the usage string
// for the value's name instead, so a usage quoting a command in back
// quotes would print "--usage gpupack report --format podusage".
func TestFlagValueNamesAreTypes(t *testing.T) {
	for _, c := range documented(NewRoot(context.Background())) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			plain := *f
			plain.Usage = ""
			want, _ := pflag.UnquoteUsage(&plain)
			if got, _ := pflag.UnquoteUsage(f); got != want {
				t.Errorf("%s --%s: help names the value %q, not its type %q; keep back quotes out of the usage string", c.CommandPath(), f.Name, got, want)
			}
		})
	}
}
