// Package version is the `version` verb of gpupack and of gpupack-scheduler:
// the module version, the commit, whether the tree was modified, the Go
// version and the platform (see internal/util/buildversion), as a table or JSON.
package version

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpupack/gpupack/internal/cli/clio"
	buildversion "github.com/gpupack/gpupack/internal/util/buildversion"
)

// Extra is one more line of the output, after gpupack's own, such as the
// Kubernetes version that gpupack-scheduler is built on.
type Extra struct {
	// Name is the table's label and the JSON key, e.g. "kubernetes".
	Name string
	// Value is what the build reports; empty is printed as unknown.
	Value string
}

type options struct {
	format string
}

// NewCommand returns the version command, printing the running binary's
// build (internal/util/buildversion.Get) and the extras after it.
func NewCommand(extras ...Extra) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and platform of this build",
		Long: `version prints the build of this binary: the module version, the VCS
commit it was built from and that commit's time, whether the work tree had
uncommitted changes, the Go version and the platform. A value the build did
not record is "unknown".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(o, buildversion.Get(), extras, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&o.format, "format", "table", "output format: table or json")
	return cmd
}

func run(o *options, info buildversion.Info, extras []Extra, stdout io.Writer) error {
	if err := clio.CheckFormat(o.format, "table", "json"); err != nil {
		return err
	}
	fields := []Extra{
		{"version", info.Version},
		{"commit", info.Commit},
		{"commitTime", info.CommitTime},
		{"modified", info.Modified},
		{"goVersion", info.GoVersion},
		{"platform", info.Platform},
	}
	for _, e := range extras {
		if e.Value == "" {
			e.Value = buildversion.Unknown
		}
		fields = append(fields, e)
	}
	if o.format == "json" {
		object := make(map[string]string, len(fields))
		for _, f := range fields {
			object[f.Name] = f.Value
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(object)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	for _, f := range fields {
		fmt.Fprintf(tw, "%s\t%s\n", f.Name, f.Value)
	}
	return tw.Flush()
}
