// Package clio holds the small pieces every gpupack verb shares: the
// cluster and catalogue flags, progress lines on terminals, and format
// flags. It is an edge package.
package clio

import (
	"fmt"
	"os"
	"strings"
)

// IsTerminal reports whether f is a terminal, for progress output.
func IsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Progress returns a function that redraws one progress line on w when w
// is a terminal, and nil otherwise.
func Progress(w *os.File, label string) func(done, total int) {
	if !IsTerminal(w) {
		return nil
	}
	return func(done, total int) {
		pct := 100 * float64(done) / float64(max(total, 1))
		fmt.Fprintf(w, "\r%s: %d/%d (%.0f%%)", label, done, total, pct)
		if done >= total {
			fmt.Fprint(w, "\r\033[K")
		}
	}
}

// CheckFormat validates a --format value against the allowed ones.
func CheckFormat(format string, allowed ...string) error {
	for _, a := range allowed {
		if format == a {
			return nil
		}
	}
	return fmt.Errorf("--format %q: want one of %s", format, strings.Join(allowed, ", "))
}

// KubeconfigUsage is the help of every verb's --kubeconfig flag.
const KubeconfigUsage = "kubeconfig file of the cluster to read; when not given: the files in $KUBECONFIG, then the in-cluster config of a pod, then ~/.kube/config"
