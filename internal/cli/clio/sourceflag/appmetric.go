package sourceflag

import (
	"fmt"
	"strings"
)

// AppMetrics reads --app-metric's NAME=PROMQL values.
func AppMetrics(values []string) (map[string]string, error) {
	apps := map[string]string{}
	for _, a := range values {
		name, query, ok := strings.Cut(a, "=")
		if !ok || name == "" || query == "" {
			return nil, fmt.Errorf("--app-metric %q: want NAME=PROMQL, e.g. tokens='sum by (namespace, pod) (rate(tokens_total[5m]))'", a)
		}
		if _, twice := apps[name]; twice {
			return nil, fmt.Errorf("--app-metric %s is given twice; give each name once", name)
		}
		apps[name] = query
	}
	return apps, nil
}
