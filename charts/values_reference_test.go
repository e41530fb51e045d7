package charts

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/gpupack/gpupack/internal/testkit/golden"
)

// TestHelmValuesReferenceIsCurrent keeps docs/reference/helm-values.md the
// table that valuesReference makes of values.yaml: a value added, removed,
// given another default or another comment fails it until the reference is
// regenerated with -update (make docs).
func TestHelmValuesReferenceIsCurrent(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(Dir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := valuesReference(src)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "../docs/reference/helm-values.md", got)
}

// valuesReference renders a values file as a Markdown table: every key by
// its dotted path, its type, its default and the comment lines above it.
// A block mapping gets a row of its own (its comment) and rows for its
// keys; a flow mapping or sequence (`{}`, `[]`, `{cpu: 100m}`) is a leaf.
func valuesReference(src []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("values.yaml: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("values.yaml: want one mapping")
	}
	var b bytes.Buffer
	b.WriteString("# Helm values of charts/gpupack\n\n")
	b.WriteString("Generated from `charts/gpupack/values.yaml` by `make docs`; do not edit by hand.\n\n")
	if c := commentText(doc.HeadComment + doc.Content[0].HeadComment); c != "" {
		b.WriteString(c + "\n\n")
	}
	b.WriteString("| key | type | default | description |\n|---|---|---|---|\n")
	if err := valueRows(&b, "", doc.Content[0]); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func valueRows(b *bytes.Buffer, prefix string, m *yaml.Node) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		key, val := m.Content[i], m.Content[i+1]
		path := prefix + key.Value
		desc := commentText(key.HeadComment)
		if val.Kind == yaml.MappingNode && val.Style&yaml.FlowStyle == 0 {
			fmt.Fprintf(b, "| `%s` | map |  | %s |\n", path, desc)
			if err := valueRows(b, path+".", val); err != nil {
				return err
			}
			continue
		}
		typ, def, err := typeAndDefault(val)
		if err != nil {
			return fmt.Errorf("values.yaml:%d: %s: %w", key.Line, path, err)
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", path, typ, def, desc)
	}
	return nil
}

// typeAndDefault names a leaf's type and writes its default as YAML.
func typeAndDefault(n *yaml.Node) (typ, def string, err error) {
	switch n.Kind {
	case yaml.ScalarNode:
		typ = map[string]string{"!!str": "string", "!!int": "int", "!!bool": "bool", "!!float": "float", "!!null": "null"}[n.ShortTag()]
		if typ == "" {
			return "", "", fmt.Errorf("scalar of tag %s", n.ShortTag())
		}
	case yaml.MappingNode:
		typ = "map"
	case yaml.SequenceNode:
		typ = "list"
	default:
		return "", "", fmt.Errorf("unexpected YAML node kind %d", n.Kind)
	}
	plain := *n
	plain.HeadComment, plain.LineComment, plain.FootComment = "", "", ""
	text, err := yaml.Marshal(&plain)
	if err != nil {
		return "", "", err
	}
	return typ, "`" + escapePipes(strings.TrimSpace(string(text))) + "`", nil
}

// commentText joins comment lines into one table cell: prose lines run on,
// lines indented beyond the comment's margin (examples, lists of choices)
// each become code on a line of their own, and a line indented deeper than
// the code line before it continues that line, unless it ends with a colon
// (a YAML key that opens a block).
func commentText(c string) string {
	var out []string
	prose, codeIndent := "", -1 // codeIndent: the last code line's, -1 after prose
	flush := func() {
		if prose != "" {
			out = append(out, prose)
			prose = ""
		}
	}
	for _, line := range strings.Split(c, "\n") {
		text, ok := strings.CutPrefix(strings.TrimSpace(line), "#")
		if !ok {
			continue
		}
		if strings.HasPrefix(text, "   ") {
			flush()
			indent := len(text) - len(strings.TrimLeft(text, " "))
			code := escapePipes(strings.TrimSpace(text))
			// A line indented deeper than the one before continues it,
			// unless that one opens a YAML block (ends with a colon).
			if last := len(out) - 1; last >= 0 && codeIndent >= 0 && indent > codeIndent && !strings.HasSuffix(out[last], ":`") {
				out[last] = strings.TrimSuffix(out[last], "`") + " " + code + "`"
				continue
			}
			codeIndent = indent
			out = append(out, "`"+code+"`")
			continue
		}
		codeIndent = -1
		if text = strings.TrimSpace(text); text == "" {
			flush()
			continue
		}
		text = strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(escapePipes(text))
		prose = strings.TrimSpace(prose + " " + text)
	}
	flush()
	return strings.Join(out, "<br>")
}

func escapePipes(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
