package charts

import (
	"encoding/json"
	"fmt"
	"regexp"
)

// DashboardPanel is one panel of gpupack's Grafana dashboard: its title and
// its targets' PromQL, as written (with Grafana's variables).
type DashboardPanel struct {
	Title string
	Exprs []string
}

// DashboardVariable is one query variable of the dashboard: its query and,
// where it is Grafana's label_values(METRIC, LABEL), the metric it reads
// ("" otherwise).
type DashboardVariable struct {
	Query, Metric string
}

// labelValues is Grafana's label_values(METRIC, LABEL) variable query.
var labelValues = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)$`)

// ParseDashboard reads what a dashboard's JSON asks Prometheus: each
// panel's queries, and each query variable's.
func ParseDashboard(data []byte) ([]DashboardPanel, []DashboardVariable, error) {
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Type string `json:"type"`
				// A query variable's query is an object; a datasource
				// variable's a string.
				Query any `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, nil, fmt.Errorf("dashboard JSON: %w", err)
	}
	var panels []DashboardPanel
	for _, p := range d.Panels {
		dp := DashboardPanel{Title: p.Title}
		for _, tg := range p.Targets {
			dp.Exprs = append(dp.Exprs, tg.Expr)
		}
		panels = append(panels, dp)
	}
	var vars []DashboardVariable
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		text, _ := q["query"].(string)
		dv := DashboardVariable{Query: text}
		if m := labelValues.FindStringSubmatch(text); m != nil {
			dv.Metric = m[1]
		}
		vars = append(vars, dv)
	}
	return panels, vars, nil
}
