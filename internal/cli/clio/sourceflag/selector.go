package sourceflag

import (
	"errors"

	"github.com/spf13/pflag"

	"github.com/gpupack/gpupack/internal/source/promql"
)

// AddSelector registers --prometheus-selector into s: the PromQL label
// matchers that select dcgm-exporter's series (promql.Selector), checked
// as the flag is parsed.
func AddSelector(f *pflag.FlagSet, s *promql.Selector) {
	f.Var((*selectorFlag)(s), "prometheus-selector", `PromQL label matchers that select dcgm-exporter's series, such as job="dcgm-exporter": series of the same names from other jobs are not read (they would add phantom pods and take a share of real pods' GPUs); gpupack's recording rules are read only where recorded with the same selector (gpupack rules --selector). Empty reads every series of the DCGM names`)
}

// selectorFlag is a promql.Selector as a flag.
type selectorFlag promql.Selector

func (s *selectorFlag) String() string { return (*promql.Selector)(s).String() }

func (s *selectorFlag) Set(v string) error {
	sel, err := promql.ParseSelector(v)
	if err != nil {
		return err
	}
	*s = selectorFlag(sel)
	return nil
}

func (s *selectorFlag) Type() string { return "matchers" }

// CheckSelector refuses --prometheus-selector without the --prometheus
// URL it is for.
func CheckSelector(s promql.Selector, prometheus string) error {
	if !s.IsZero() && prometheus == "" {
		return errors.New("--prometheus-selector says which series of --prometheus to read: give --prometheus too, or drop it")
	}
	return nil
}
