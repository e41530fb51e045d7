// Package yamldoc reads gpupack's input files (snapshot, usage, prices and
// fake-dcgm scenario files): one YAML or JSON document decoded strictly into
// a Go value whose struct fields carry json tags, with every mistake named
// by file, line and field path ("c.yaml:7: nodes[0].gpus[0].count: "8" is a
// string; want an integer").
//
// It checks the document against the target type before anything is
// decoded, so that wrong types, numbers out of range, unknown or repeated
// fields, a second document and text after the document are refused where
// they are written, instead of surfacing as encoding/json messages with Go
// struct names. A field whose type implements encoding.TextUnmarshaler is
// checked by calling UnmarshalText on its value, so its errors get the
// place too.
//
// It imports only the standard library and go.yaml.in/yaml/v3, so that the
// pure packages may use it.
package yamldoc

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Error is one mistake at a place in a document.
type Error struct {
	Source string
	// Line is the 1-based line of the offending value; 0 when unknown.
	Line int
	// Path is the field path, e.g. "nodes[0].gpus[0].count"; empty for
	// the whole document.
	Path string
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Source)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Path != "" {
		b.WriteString(": ")
		b.WriteString(e.Path)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Doc is a parsed document, kept to find the line of a field path in the
// errors of the validation that follows decoding.
type Doc struct {
	Source string
	root   *yaml.Node // the document's top value; nil when empty
}

// maxErrors bounds the errors one Decode reports.
const maxErrors = 20

// valueBudget bounds the values a document of size bytes may expand to
// through aliases: every value written out takes at least a byte, so only
// aliases can exceed it.
func valueBudget(size int) int { return 2*size + 1<<16 }

// Decode reads data, exactly one YAML or JSON document, into v, a non-nil
// pointer. Field names are the json tags, matched exactly. Wrong types,
// integers out of range, non-finite numbers, unknown and repeated fields, a
// second document and text after the document are errors (*Error, joined
// when several), each naming source, line and field path. An empty
// document decodes to nothing and is not an error; the caller's validation
// says what is missing.
func Decode(data []byte, source string, v any) (*Doc, error) {
	doc := &Doc{Source: source}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var file yaml.Node
	if err := dec.Decode(&file); err != nil {
		if errors.Is(err, io.EOF) {
			return doc, nil
		}
		return nil, &Error{Source: source, Msg: fmt.Sprintf("%s; the file must be one YAML or JSON document", cleanYAMLError(err))}
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, &Error{Source: source, Line: next.Line, Msg: "a second document; the file must hold exactly one (remove the --- separator and what follows, or split the file)"}
	case !errors.Is(err, io.EOF):
		return nil, &Error{Source: source, Msg: fmt.Sprintf("text after the end of the document (%s); the file must hold exactly one YAML or JSON document", cleanYAMLError(err))}
	}
	if len(file.Content) == 0 {
		return doc, nil
	}
	doc.root = file.Content[0]
	w := walker{doc: doc, budget: valueBudget(len(data))}
	tree := w.value(doc.root, reflect.TypeOf(v).Elem(), nil)
	if len(w.errs) > 0 {
		return nil, errors.Join(w.errs...)
	}
	j, err := json.Marshal(tree)
	if err == nil {
		d := json.NewDecoder(bytes.NewReader(j))
		d.DisallowUnknownFields()
		err = d.Decode(v)
	}
	if err != nil {
		// The walk accepts only what encoding/json decodes; reaching this is
		// a bug in the walk, not in the file.
		return nil, &Error{Source: source, Msg: fmt.Sprintf("cannot decode: %v (please report this as a gpupack bug)", err)}
	}
	return doc, nil
}

func cleanYAMLError(err error) string {
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

// Empty reports whether the document holds nothing (no text, or only
// comments).
func (d *Doc) Empty() bool {
	return d.root == nil || d.root.Kind == yaml.ScalarNode && d.root.ShortTag() == "!!null"
}

// Errorf returns an *Error at the field path, given as names and indices
// ("pods", 2, "node"), with the line of the deepest part of the path the
// document has.
func (d *Doc) Errorf(path []any, format string, args ...any) *Error {
	return &Error{Source: d.Source, Line: d.Line(path), Path: FormatPath(path), Msg: fmt.Sprintf(format, args...)}
}

// Line is the line of the deepest node on path that the document has; 0
// for an empty document.
func (d *Doc) Line(path []any) int {
	n := d.root
	if n == nil {
		return 0
	}
	line := n.Line
	for _, p := range path {
		n = resolve(n)
		var next *yaml.Node
		switch p := p.(type) {
		case int:
			if n.Kind == yaml.SequenceNode && p >= 0 && p < len(n.Content) {
				next = n.Content[p]
			}
		case string:
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == p {
						next = n.Content[i+1]
						line = n.Content[i].Line
						break
					}
				}
			}
		}
		if next == nil {
			return line
		}
		n = next
		line = n.Line
	}
	return line
}

// FormatPath writes a field path: names joined by dots, indices in
// brackets ("pods[2].activity.on").
func FormatPath(path []any) string {
	var b strings.Builder
	for i, p := range path {
		switch p := p.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", p)
		default:
			if i > 0 {
				b.WriteByte('.')
			}
			fmt.Fprint(&b, p)
		}
	}
	return b.String()
}

func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// walker checks a node tree against a Go type and builds the JSON value
// that encoding/json decodes into that type.
type walker struct {
	doc    *Doc
	errs   []error
	budget int
}

func (w *walker) fail(n *yaml.Node, path []any, format string, args ...any) {
	if len(w.errs) < maxErrors {
		w.errs = append(w.errs, &Error{Source: w.doc.Source, Line: n.Line, Path: FormatPath(path), Msg: fmt.Sprintf(format, args...)})
	}
}

// spend counts one value against the budget, false when it is spent.
func (w *walker) spend(n *yaml.Node, path []any) bool {
	w.budget--
	if w.budget == -1 {
		w.fail(n, path, "the document expands through aliases to more values than it has bytes; write it out")
	}
	return w.budget >= 0
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// value returns the JSON form of n for a target of type t, or nil after
// recording an error.
func (w *walker) value(n *yaml.Node, t reflect.Type, path []any) any {
	if !w.spend(n, path) {
		return nil
	}
	n = resolve(n)
	if n.Kind == yaml.AliasNode {
		w.fail(n, path, "alias to an unknown anchor")
		return nil
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		if n.Kind != yaml.ScalarNode {
			w.fail(n, path, "%s; want a single value", describe(n))
			return nil
		}
		if err := reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(n.Value)); err != nil {
			w.fail(n, path, "%v", err)
			return nil
		}
		return n.Value
	}
	switch t.Kind() {
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			w.fail(n, path, "%s; want a string", describe(n))
			return nil
		}
		return n.Value
	case reflect.Bool:
		if b, err := strconv.ParseBool(n.Value); err == nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool" {
			return b
		}
		w.fail(n, path, "%s; want true or false", describe(n))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return w.integer(n, t, path)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return w.integer(n, t, path)
	case reflect.Float32, reflect.Float64:
		return w.float(n, t, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			w.fail(n, path, "%s; want a list", describe(n))
			return nil
		}
		out := make([]any, len(n.Content))
		for i, c := range n.Content {
			out[i] = w.value(c, t.Elem(), append(path[:len(path):len(path)], i))
		}
		return out
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			w.fail(n, path, "cannot read a map keyed by %s (please report this as a gpupack bug)", t.Key())
			return nil
		}
		return w.mapping(n, path, nil, func(string) (reflect.Type, bool) { return t.Elem(), true })
	case reflect.Struct:
		fields := jsonFields(t)
		return w.mapping(n, path, fields, func(k string) (reflect.Type, bool) {
			ft, ok := fields[k]
			return ft, ok
		})
	case reflect.Interface:
		var x any
		if err := n.Decode(&x); err != nil {
			w.fail(n, path, "%s", cleanYAMLError(err))
		}
		return x
	default:
		w.fail(n, path, "cannot read a %s (please report this as a gpupack bug)", t)
	}
	return nil
}

// mapping reads a mapping node; field gives the type of each key's value,
// false for an unknown key (fields lists the known ones for the message).
func (w *walker) mapping(n *yaml.Node, path []any, fields map[string]reflect.Type, field func(string) (reflect.Type, bool)) any {
	if n.Kind != yaml.MappingNode {
		w.fail(n, path, "%s; want a mapping (key: value)", describe(n))
		return nil
	}
	out := map[string]any{}
	own, merged := w.pairs(n, path, 0)
	seen := map[string]int{}
	for i, kv := range append(own, merged...) {
		k, v := kv[0], kv[1]
		if k.Kind != yaml.ScalarNode {
			w.fail(k, path, "%s as a key; want a name", describe(k))
			continue
		}
		if line, dup := seen[k.Value]; dup {
			if i < len(own) { // a merged key yields to the mapping's own
				w.fail(k, append(path[:len(path):len(path)], k.Value), "given twice (first at line %d); give each field once", line)
			}
			continue
		}
		seen[k.Value] = k.Line
		ft, ok := field(k.Value)
		if !ok {
			w.fail(k, path, "unknown field %q; want one of %s", k.Value, names(fields))
			continue
		}
		out[k.Value] = w.value(v, ft, append(path[:len(path):len(path)], k.Value))
	}
	return out
}

// pairs lists a mapping's own key and value nodes, and those that its
// merge keys (<<) bring in.
func (w *walker) pairs(n *yaml.Node, path []any, depth int) (own, merged [][2]*yaml.Node) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!merge" {
			own = append(own, [2]*yaml.Node{k, v})
			continue
		}
		sources := []*yaml.Node{v}
		if rv := resolve(v); rv.Kind == yaml.SequenceNode {
			sources = rv.Content
		}
		for _, s := range sources {
			if !w.spend(s, path) {
				return own, merged
			}
			s = resolve(s)
			if s.Kind != yaml.MappingNode || depth > 32 {
				w.fail(s, path, "a merge key (<<) takes a mapping or a list of mappings")
				continue
			}
			o, m := w.pairs(s, path, depth+1)
			merged = append(append(merged, o...), m...)
		}
	}
	return own, merged
}

func (w *walker) integer(n *yaml.Node, t reflect.Type, path []any) any {
	if n.Kind != yaml.ScalarNode {
		w.fail(n, path, "%s; want a whole number", describe(n))
		return nil
	}
	digits := strings.ReplaceAll(n.Value, "_", "")
	switch n.ShortTag() {
	case "!!int":
		if t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64 {
			u, err := strconv.ParseUint(digits, 0, 64)
			if err == nil && !reflect.Zero(t).OverflowUint(u) {
				return json.Number(strconv.FormatUint(u, 10))
			}
			w.fail(n, path, "%s is out of range (want 0..%d)", n.Value, maxUint(t))
			return nil
		}
		i, err := strconv.ParseInt(digits, 0, 64)
		if err == nil && !reflect.Zero(t).OverflowInt(i) {
			return json.Number(strconv.FormatInt(i, 10))
		}
		w.fail(n, path, "%s is out of range (want %d..%d)", n.Value, minInt(t), maxInt(t))
	case "!!float":
		if isDigits(digits) { // an integer too long for YAML's int
			w.fail(n, path, "%s is out of range (want %d..%d)", n.Value, minInt(t), maxInt(t))
			return nil
		}
		w.fail(n, path, "%s is not a whole number; want an integer", n.Value)
	default:
		w.fail(n, path, "%s; want an integer", describe(n))
	}
	return nil
}

func (w *walker) float(n *yaml.Node, t reflect.Type, path []any) any {
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
		w.fail(n, path, "%s; want a number", describe(n))
		return nil
	}
	var f float64
	if n.ShortTag() == "!!int" {
		i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
		if err != nil {
			w.fail(n, path, "%s is out of range; want a number", n.Value)
			return nil
		}
		f = float64(i)
	} else {
		var x float64
		if err := n.Decode(&x); err != nil {
			w.fail(n, path, "%s is not a number", n.Value)
			return nil
		}
		f = x
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || reflect.Zero(t).OverflowFloat(f) {
		w.fail(n, path, "%s is not a finite number; want a number such as 0.5", n.Value)
		return nil
	}
	return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
}

func isDigits(s string) bool {
	s = strings.TrimLeft(s, "+-")
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func minInt(t reflect.Type) int64 { return -1 << (t.Bits() - 1) }
func maxInt(t reflect.Type) int64 { return 1<<(t.Bits()-1) - 1 }
func maxUint(t reflect.Type) uint64 {
	return 1<<t.Bits() - 1
}

// describe says what a node is, for "X; want Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return fmt.Sprintf("%q is a string", n.Value)
		case "!!int", "!!float":
			return fmt.Sprintf("%s is a number", n.Value)
		case "!!bool":
			return fmt.Sprintf("%s is true/false", n.Value)
		case "!!null":
			return "null"
		}
		return fmt.Sprintf("%s is a %s", n.Value, strings.TrimPrefix(n.ShortTag(), "!!"))
	}
	return "an alias"
}

// jsonFields lists the fields encoding/json decodes into a struct type, by
// their json name, with embedded structs' fields promoted.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					if _, own := out[k]; !own {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func names(fields map[string]reflect.Type) string {
	if fields == nil {
		return "a name"
	}
	out := make([]string, 0, len(fields))
	for k := range fields {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
