// Package openb embeds part of the openb GPU trace (Weng et al., "Beware of
// Fragmentation", USENIX ATC'23): the GPU node list and four pod lists. See
// PROVENANCE.md and LICENSE-NOTE.md for the source and terms (research and
// study use).
package openb

import (
	"embed"
	"fmt"
	"io"
	"sort"
	"strings"
)

//go:embed *.csv
var files embed.FS

// Nodes is the name of the embedded GPU node list.
const Nodes = "openb_node_list_gpu_node"

// DefaultPods is the name of the embedded default pod list.
const DefaultPods = "openb_pod_list_default"

// Names lists the embedded files, without the .csv suffix.
func Names() []string {
	entries, _ := files.ReadDir(".")
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".csv"))
	}
	sort.Strings(out)
	return out
}

// Open opens an embedded file by name. A short name works too: "default"
// is openb_pod_list_default.
func Open(name string) (io.ReadCloser, string, error) {
	name = strings.TrimSuffix(strings.TrimPrefix(name, "openb:"), ".csv")
	for _, full := range []string{name, "openb_pod_list_" + name, "openb_node_list_" + name} {
		if f, err := files.Open(full + ".csv"); err == nil {
			return f, "openb:" + full, nil
		}
	}
	return nil, "", fmt.Errorf("no embedded trace file %q (embedded: %s)", name, strings.Join(Names(), ", "))
}
