// Package charts holds gpupack's Helm chart (charts/gpupack) and renders it
// with Helm's own engine (helm.sh/helm/v4), embedded, so that deploy/
// (rendered by hack/render-deploy), the tests and `helm install` all see
// the same files. It is a build and test edge: no gpupack binary imports it.
package charts

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"sigs.k8s.io/yaml"
)

// Dir is the chart's directory relative to this package (and to
// the repository root: charts/gpupack).
const Dir = "gpupack"

//go:embed all:gpupack
var files embed.FS

// KubeVersion is the Kubernetes version a client-side render assumes: the
// one gpupack pins and tests against.
const KubeVersion = "v1.37.2"

// Load returns the embedded chart.
func Load() (*chart.Chart, error) {
	var buffered []*archive.BufferedFile
	err := fs.WalkDir(files, Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		buffered = append(buffered, &archive.BufferedFile{Name: strings.TrimPrefix(p, Dir+"/"), Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("charts: reading the embedded chart: %w", err)
	}
	c, err := loader.LoadFiles(buffered)
	if err != nil {
		return nil, fmt.Errorf("charts: loading %s: %w", Dir, err)
	}
	return c, nil
}

// Options says what to render.
type Options struct {
	// ReleaseName and Namespace of the release; default gpupack and
	// gpupack-system.
	ReleaseName, Namespace string
	// Values override the chart's values.yaml (as --set or -f would).
	Values map[string]any
	// APIVersions the cluster serves beyond the built-in ones, as
	// .Capabilities.APIVersions holds them: "cert-manager.io/v1",
	// "monitoring.coreos.com/v1/ServiceMonitor".
	APIVersions []string
}

// Doc is one rendered object.
type Doc struct {
	// Source is the template it came from, e.g. templates/webhook.yaml.
	Source string
	// Kind, Name and Namespace identify it.
	Kind, Name, Namespace string
	// YAML is the document as rendered.
	YAML string
}

// Render renders the chart as `helm template` does, client-side, and
// returns its objects in template order (files sorted by name, documents in
// file order). Values are validated against values.schema.json.
func Render(o Options) ([]Doc, error) {
	c, err := Load()
	if err != nil {
		return nil, err
	}
	if o.ReleaseName == "" {
		o.ReleaseName = "gpupack"
	}
	if o.Namespace == "" {
		o.Namespace = "gpupack-system"
	}
	caps := common.DefaultCapabilities.Copy()
	kv, err := common.ParseKubeVersion(KubeVersion)
	if err != nil {
		return nil, err
	}
	caps.KubeVersion = *kv
	caps.APIVersions = append(caps.APIVersions, o.APIVersions...)
	values, err := util.ToRenderValuesWithSchemaValidation(c, o.Values,
		common.ReleaseOptions{Name: o.ReleaseName, Namespace: o.Namespace, Revision: 1, IsInstall: true}, caps, false)
	if err != nil {
		return nil, fmt.Errorf("charts: values: %w", err)
	}
	rendered, err := engine.Render(c, values)
	if err != nil {
		return nil, fmt.Errorf("charts: rendering: %w", err)
	}
	names := make([]string, 0, len(rendered))
	for name := range rendered {
		names = append(names, name)
	}
	sort.Strings(names)
	var docs []Doc
	for _, name := range names {
		source := strings.TrimPrefix(name, c.Name()+"/")
		if path.Ext(source) != ".yaml" || strings.HasPrefix(path.Base(source), "_") {
			continue
		}
		for i, text := range splitDocs(rendered[name]) {
			var meta struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name      string `json:"name"`
					Namespace string `json:"namespace"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(text), &meta); err != nil {
				return nil, fmt.Errorf("charts: %s document %d is not YAML: %w\n%s", source, i+1, err, text)
			}
			if meta.Kind == "" || meta.Metadata.Name == "" {
				return nil, fmt.Errorf("charts: %s document %d has no kind or name:\n%s", source, i+1, text)
			}
			docs = append(docs, Doc{Source: source, Kind: meta.Kind, Name: meta.Metadata.Name, Namespace: meta.Metadata.Namespace, YAML: text})
		}
	}
	return docs, nil
}

// splitDocs splits a rendered file into its YAML documents, dropping those
// that hold only comments or blank lines (an object switched off).
func splitDocs(text string) []string {
	var docs []string
	for _, d := range strings.Split("\n"+text+"\n", "\n---\n") {
		if hasContent(d) {
			docs = append(docs, strings.Trim(d, "\n")+"\n")
		}
	}
	return docs
}

func hasContent(doc string) bool {
	for _, line := range strings.Split(doc, "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			return true
		}
	}
	return false
}

// Manifest joins docs into one multi-document YAML stream.
func Manifest(docs []Doc) string {
	var b strings.Builder
	for i, d := range docs {
		if i > 0 {
			b.WriteString("---\n")
		}
		b.WriteString(d.YAML)
	}
	return b.String()
}
