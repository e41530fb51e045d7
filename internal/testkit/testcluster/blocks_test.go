package testcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestBlockOverlap: blocks overlap where one begins before another ends;
// touching ends do not (a block's maxTime is exclusive), and a block
// still being written (no meta.json) does not count.
func TestBlockOverlap(t *testing.T) {
	for _, c := range []struct {
		name    string
		spans   [][2]int64
		overlap bool
	}{
		{"none", nil, false},
		{"one", [][2]int64{{0, 10}}, false},
		{"touching", [][2]int64{{10, 20}, {0, 10}, {20, 30}}, false},
		{"per rule", [][2]int64{{0, 10}, {0, 10}}, true},
		{"inside", [][2]int64{{0, 30}, {10, 20}}, true},
		{"late start", [][2]int64{{20, 40}, {0, 21}}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for i, s := range c.spans {
				b := filepath.Join(dir, fmt.Sprintf("01BLOCK%02d", i))
				if err := os.Mkdir(b, 0o755); err != nil {
					t.Fatal(err)
				}
				meta := fmt.Sprintf(`{"ulid": "01BLOCK%02d", "minTime": %d, "maxTime": %d, "version": 1}`, i, s[0], s[1])
				if err := os.WriteFile(filepath.Join(b, "meta.json"), []byte(meta), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Mkdir(filepath.Join(dir, "01WRITING.tmp-for-creation"), 0o755); err != nil {
				t.Fatal(err)
			}
			n, overlap, err := blockOverlap(dir)
			if err != nil {
				t.Fatal(err)
			}
			if n != len(c.spans) || overlap != c.overlap {
				t.Errorf("%d blocks, overlap %v; want %d, %v", n, overlap, len(c.spans), c.overlap)
			}
		})
	}
	if _, _, err := blockOverlap(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing directory: no error")
	}
}
