package main

import (
	"strings"
	"testing"
	"time"
)

func TestCreationTime(t *testing.T) {
	cases := map[string]struct {
		flag, epoch string
		want        time.Time
		err         string
	}{
		"flag wins":          {flag: "2026-01-02T03:04:05Z", epoch: "1", want: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		"SOURCE_DATE_EPOCH":  {epoch: "1767323045", want: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		"neither: the epoch": {want: time.Unix(0, 0)},
		"flag not RFC 3339":  {flag: "2026-01-02", err: `--created "2026-01-02": want RFC 3339`},
		"epoch not seconds":  {epoch: "yesterday", err: `SOURCE_DATE_EPOCH "yesterday": want whole seconds`},
		"epoch before 1970":  {epoch: "-5", err: `SOURCE_DATE_EPOCH "-5": want whole seconds`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := creationTime(tc.flag, tc.epoch)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, %v; want error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || !got.Equal(tc.want) {
				t.Errorf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestRunRequiresFlags(t *testing.T) {
	err := run([]string{"--binary", "x", "--entrypoint", "/x", "--out", "x.tar"})
	if err == nil || !strings.Contains(err.Error(), "--ref is required") {
		t.Errorf("run without --ref: got %v, want --ref named as required", err)
	}
}
