package vram

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpupack/gpupack/internal/golden"
)

func TestGolden(t *testing.T) {
	cases := map[string]options{
		"70b-fp16":   {params: "70B", dtype: "fp16", context: 4096, batch: 1, format: "table"},
		"7b-int4":    {params: "7B", dtype: "int4", context: 4096, batch: 1, format: "table"},
		"8b-kv.json": {params: "8B", dtype: "bf16", context: 8192, batch: 4, layers: 32, hidden: 4096, format: "json"},
	}
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := run(context.Background(), &o, &out); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", name+".golden"), out.Bytes())
		})
	}
}

func TestBadFlags(t *testing.T) {
	cases := map[string]struct {
		o    options
		want string
	}{
		"params": {options{params: "huge", dtype: "fp16", format: "table"}, "--params"},
		"dtype":  {options{params: "7B", dtype: "fp4", format: "table"}, "--dtype"},
		"layers": {options{params: "7B", dtype: "fp16", layers: 32, format: "table"}, "--layers and hidden"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := run(context.Background(), &tc.o, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
