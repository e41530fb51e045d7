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
			b, err := json.MarshalIndent(p.elem(j), "    ", "  ")
			if err != nil {
				return fmt.Errorf("report JSON: %s[%d]: %w", p.key, j, err)
			}
			if j > 0 {
				bw.WriteByte(',')
			}
			bw.WriteString("\n    ")
			bw.Write(b)
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
