package usage

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// WriteJSON writes r as a json.Encoder indenting by two spaces writes it,
// byte for byte (one trailing newline), but marshals its devices,
// containers and pods one at a time as it writes them: a month of a
// fleet's report is hundreds of MB of text, which the encoder would hold
// whole, twice (compact, then indented).
func (r *Report) WriteJSON(w io.Writer) error {
	cp := *r
	type streamed struct {
		key  string
		n    int
		elem func(i int) any
	}
	// In the order of the fields: WriteJSON splices them in that order.
	var parts []streamed
	if r.Devices != nil {
		cp.Devices = nil
		parts = append(parts, streamed{"devices", len(r.Devices), func(i int) any { return &r.Devices[i] }})
	}
	if r.Containers != nil {
		cp.Containers = nil
		parts = append(parts, streamed{"containers", len(r.Containers), func(i int) any { return &r.Containers[i] }})
	}
	if r.Pods != nil {
		cp.Pods = nil
		parts = append(parts, streamed{"pods", len(r.Pods), func(i int) any { return &r.Pods[i] }})
	}
	rest, err := json.MarshalIndent(&cp, "", "  ")
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	// Each entry is marshalled compact into one reused buffer and
	// indented as it is written: json.MarshalIndent allocates both texts
	// and its indenter re-validates every byte.
	var compact bytes.Buffer
	enc := json.NewEncoder(&compact)
	for _, p := range parts {
		// The field as the report without it marshals it, at the top
		// level (the only place indented by exactly two spaces).
		field := []byte("\n  \"" + p.key + "\": null")
		i := bytes.Index(rest, field)
		if i < 0 {
			return fmt.Errorf("report JSON: no top-level %q to write the %d entries into", p.key, p.n)
		}
		bw.Write(rest[:i])
		bw.WriteString("\n  \"" + p.key + "\": [")
		for j := range p.n {
			compact.Reset()
			if err := enc.Encode(p.elem(j)); err != nil {
				return fmt.Errorf("report JSON: %s[%d]: %w", p.key, j, err)
			}
			if j > 0 {
				bw.WriteByte(',')
			}
			bw.WriteString("\n    ")
			writeIndented(bw, bytes.TrimSuffix(compact.Bytes(), []byte{'\n'}), "    ", "  ")
		}
		if p.n > 0 {
			bw.WriteString("\n  ")
		}
		bw.WriteByte(']')
		rest = rest[i+len(field):]
	}
	bw.Write(rest)
	bw.WriteByte('\n')
	return bw.Flush()
}

// writeIndented writes src, compact JSON as encoding/json marshals it
// (valid, no space outside strings), indented exactly as json.Indent
// indents it with prefix and indent: a newline, the prefix and depth
// indents after each opening bracket and comma and before each closing
// one, ": " after a key, and empty objects and arrays left as {} and [].
// It does not validate src, which json.Indent would.
func writeIndented(w *bufio.Writer, src []byte, prefix, indent string) {
	depth := 0
	opened := false // an opening bracket whose newline waits on what follows
	newline := func() {
		w.WriteByte('\n')
		w.WriteString(prefix)
		for range depth {
			w.WriteString(indent)
		}
	}
	for i := 0; i < len(src); {
		c := src[i]
		if opened && c != '}' && c != ']' {
			opened = false
			depth++
			newline()
		}
		switch c {
		case '"':
			// Copy the string whole, escapes included.
			j := i + 1
			for j < len(src) && src[j] != '"' {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+1, len(src))
			w.Write(src[i:j])
			i = j
			continue
		case '{', '[':
			opened = true
			w.WriteByte(c)
		case ',':
			w.WriteByte(c)
			newline()
		case ':':
			w.WriteString(": ")
		case '}', ']':
			if opened {
				opened = false
			} else {
				depth--
				newline()
			}
			w.WriteByte(c)
		default:
			// A number or a literal: up to the next punctuation.
			j := i + 1
			for j < len(src) && !punctuation(src[j]) {
				j++
			}
			w.Write(src[i:j])
			i = j
			continue
		}
		i++
	}
}

func punctuation(c byte) bool {
	switch c {
	case ',', ':', '{', '}', '[', ']', '"':
		return true
	}
	return false
}
