package charts

import (
	"fmt"
	"path"
	"sort"
	"strings"
)

// DeployNamespace and DeployRelease are the namespace and release name
// deploy/ is rendered with.
const (
	DeployNamespace = "gpupack-system"
	DeployRelease   = "gpupack"
)

// deployHeaders says, per file of deploy/, what it is and how to apply it.
var deployHeaders = map[string]string{
	"rbac.yaml": `# The namespace, and read-only access for gpupack serve and the live CLI
# verbs (gpupack snapshot, diagnose --live, report --live): list and watch
# nodes, pods, the DRA objects (resource.k8s.io), events,
# PersistentVolumeClaims, ResourceQuotas, Leases and Kueue's objects.
#   kubectl apply -f deploy/rbac.yaml
#   kubectl create token gpupack -n gpupack-system   # for use outside the cluster
# The end-to-end tests apply this file and read a cluster with this
# ServiceAccount's token, so a missing verb fails them.`,
	"serve.yaml": `# gpupack serve: the dashboard on :9401/, the JSON API under /api/v1/ and
# gpupack's counters on /metrics. Edit --prometheus first.
#   kubectl apply -f deploy/rbac.yaml -f deploy/serve.yaml
#   kubectl -n gpupack-system port-forward svc/gpupack 9401   # then open http://127.0.0.1:9401/`,
	"grafana.yaml": `# gpupack's Grafana dashboard, a ConfigMap that Grafana's dashboard sidecar
# loads by its label grafana_dashboard: "1" (or import its gpupack.json).
#   kubectl apply -f deploy/grafana.yaml`,
	"rules.yaml": `# gpupack's recording rules (gpupack rules) as a ConfigMap: mount it into
# the Prometheus that scrapes dcgm-exporter and list gpupack-rules.yaml
# under rule_files (or load the output of gpupack rules directly).
#   kubectl apply -f deploy/rbac.yaml -f deploy/rules.yaml`,
	"scheduler.yaml": `# gpupack-scheduler: a second scheduler (schedulerName: gpupack) with
# leader election.
#   kubectl apply -f deploy/rbac.yaml -f deploy/scheduler.yaml`,
	"webhook.yaml": `# gpupack webhook, with its certificate self-managed (no cert-manager
# needed; the chart's webhook.certificate=cert-manager uses cert-manager).
#   gpupack plan ... --out plan/     # writes plan/workload-requests.yaml
#   kubectl -n gpupack-system create configmap gpupack-workload-requests --from-file=plan/workload-requests.yaml
#   kubectl apply -f deploy/rbac.yaml -f deploy/webhook.yaml
#   kubectl label namespace ml gpupack.io/pack=enabled
# The ConfigMap is optional: without it the webhook only sets the scheduler
# name.`,
}

// namespaceDoc is the namespace that `helm install --create-namespace`
// would make; deploy/rbac.yaml creates it for kubectl users.
const namespaceDoc = `apiVersion: v1
kind: Namespace
metadata:
  name: ` + DeployNamespace + `
`

// DeployFiles renders the chart with its default values as release
// gpupack in gpupack-system, as `helm template` does, and returns the files
// of deploy/: one per template (templates/webhook.yaml becomes
// webhook.yaml), each with a header saying it is generated and how to
// apply it, rbac.yaml first creating the namespace.
func DeployFiles() (map[string]string, error) {
	docs, err := Render(Options{ReleaseName: DeployRelease, Namespace: DeployNamespace})
	if err != nil {
		return nil, err
	}
	byFile := map[string][]Doc{}
	for _, d := range docs {
		name := path.Base(d.Source)
		byFile[name] = append(byFile[name], d)
	}
	byFile["rbac.yaml"] = append([]Doc{{Kind: "Namespace", Name: DeployNamespace, YAML: namespaceDoc}}, byFile["rbac.yaml"]...)
	out := map[string]string{}
	for name, docs := range byFile {
		header, ok := deployHeaders[name]
		if !ok {
			return nil, fmt.Errorf("charts: templates/%s has no header in deployHeaders; add one saying how to apply deploy/%s", name, name)
		}
		out[name] = trimLines(header + "\n#\n# Generated from charts/gpupack by `make deploy` (the chart's default\n# values, release gpupack in gpupack-system): edit the chart, not this\n# file; a test fails when they differ.\n" + Manifest(docs))
	}
	for name := range deployHeaders {
		if _, ok := out[name]; !ok {
			return nil, fmt.Errorf("charts: the default values render nothing for deploy/%s", name)
		}
	}
	return out, nil
}

// DeployNames lists DeployFiles' names in order.
func DeployNames(files map[string]string) []string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// trimLines drops trailing blanks from every line, as gofmt would.
func trimLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	return strings.Join(lines, "\n")
}
