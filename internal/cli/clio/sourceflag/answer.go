package sourceflag

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpupack/gpupack/internal/source/promql"
)

// AddMaxAnswer registers --prometheus-max-answer into p, bytes, its
// default promql.DefaultMaxAnswer.
func AddMaxAnswer(f *pflag.FlagSet, p *int64) {
	*p = promql.DefaultMaxAnswer
	f.Var((*byteQuantity)(p), "prometheus-max-answer", "most bytes of one Prometheus answer read (after decompression), a Kubernetes quantity (256Mi, 1Gi) or plain bytes; a longer answer fails its query")
}

// byteQuantity is a count of bytes written as a Kubernetes quantity.
type byteQuantity int64

func (b *byteQuantity) String() string {
	return resource.NewQuantity(int64(*b), resource.BinarySI).String()
}

func (b *byteQuantity) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("%q is not a quantity of bytes such as 256Mi or 268435456", s)
	}
	n, ok := q.AsInt64()
	if !ok || n <= 0 {
		return fmt.Errorf("%q is not a whole number of bytes above 0, such as 256Mi or 268435456", s)
	}
	*b = byteQuantity(n)
	return nil
}

func (b *byteQuantity) Type() string { return "bytes" }
