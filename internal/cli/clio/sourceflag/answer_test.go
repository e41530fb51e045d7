package sourceflag

import (
	"testing"

	"github.com/spf13/pflag"

	"github.com/gpupack/gpupack/internal/source/promql"
)

// TestMaxAnswerFlag: --prometheus-max-answer takes a quantity or plain
// bytes, refuses anything else, and defaults to promql.DefaultMaxAnswer.
func TestMaxAnswerFlag(t *testing.T) {
	cases := map[string]struct {
		args    []string
		want    int64
		wantErr bool
	}{
		"default":     {want: promql.DefaultMaxAnswer},
		"a quantity":  {args: []string{"--prometheus-max-answer=1Gi"}, want: 1 << 30},
		"plain bytes": {args: []string{"--prometheus-max-answer=1000"}, want: 1000},
		"zero":        {args: []string{"--prometheus-max-answer=0"}, wantErr: true},
		"a fraction":  {args: []string{"--prometheus-max-answer=0.5"}, wantErr: true},
		"a word":      {args: []string{"--prometheus-max-answer=big"}, wantErr: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f := pflag.NewFlagSet("t", pflag.ContinueOnError)
			var got int64
			AddMaxAnswer(f, &got)
			err := f.Parse(c.args)
			if (err != nil) != c.wantErr {
				t.Fatalf("%v: error %v, want one: %v", c.args, err, c.wantErr)
			}
			if !c.wantErr && got != c.want {
				t.Errorf("%v: %d bytes, want %d", c.args, got, c.want)
			}
		})
	}
}
