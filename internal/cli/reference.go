package cli

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// WriteReference writes the command reference of root and every command
// below it as Markdown: per command its use line, summary, description,
// examples and flags. docs/reference/cli.md is this output; a test keeps it
// current. Hidden commands and flags, and cobra's own help and completion
// commands, are left out. The text depends only on the command tree, so a
// flag default must not depend on the machine (no $HOME, no clock).
func WriteReference(w io.Writer, root *cobra.Command) error {
	bw := bufio.NewWriter(w)
	cmds := documented(root)
	fmt.Fprintf(bw, "# %s command reference\n\n", root.Name())
	fmt.Fprintf(bw, "Generated from the command tree by `make docs`; do not edit by hand.\n\n")
	for _, c := range cmds {
		fmt.Fprintf(bw, "- [`%s`](#%s): %s\n", c.CommandPath(), anchor(c.CommandPath()), c.Short)
	}
	for _, c := range cmds {
		writeCommand(bw, c)
	}
	return bw.Flush()
}

// documented returns root and its visible descendants, depth first, in
// cobra's order (sorted by name).
func documented(c *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{c}
	for _, sub := range c.Commands() {
		if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
			continue
		}
		out = append(out, documented(sub)...)
	}
	return out
}

func writeCommand(w io.Writer, c *cobra.Command) {
	fmt.Fprintf(w, "\n## %s\n\n%s\n\n", c.CommandPath(), c.Short)
	fmt.Fprintf(w, "```text\n%s\n```\n", c.UseLine())
	if long := strings.TrimSpace(c.Long); long != "" {
		fmt.Fprintf(w, "\n```text\n%s\n```\n", long)
	}
	if ex := strings.TrimSpace(c.Example); ex != "" {
		fmt.Fprintf(w, "\nExamples:\n\n```sh\n%s\n```\n", dedent(ex))
	}
	var rows []string
	c.NonInheritedFlags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" {
			return
		}
		name := "`--" + f.Name + "`"
		if f.Shorthand != "" {
			name = "`-" + f.Shorthand + "`, " + name
		}
		def := ""
		if !zeroDefault[f.DefValue] {
			def = "`" + f.DefValue + "`"
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s |", name, f.Value.Type(), def, cell(f.Usage)))
	})
	if len(rows) > 0 {
		fmt.Fprintf(w, "\n| flag | type | default | description |\n|---|---|---|---|\n%s\n", strings.Join(rows, "\n"))
	}
}

// zeroDefault holds the defaults that say nothing (a zero value), which
// the table leaves blank as cobra's help does; a flag whose usage explains
// its effective default says so there.
var zeroDefault = map[string]bool{"": true, "false": true, "0": true, "0s": true, "[]": true}

// anchor is the fragment GitHub gives a heading: lower case, spaces to
// hyphens, punctuation other than hyphens dropped.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// cell makes s fit one table cell: no line breaks, pipes escaped.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// dedent removes the indentation cobra's examples share.
func dedent(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "  ")
	}
	return strings.Join(lines, "\n")
}
