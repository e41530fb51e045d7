package promql

import (
	"context"
	"fmt"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// readingBy is a copy of s that reads by the reference paths ref (and
// shares s's provenance counts).
func (s *Source) readingBy(ref referencePaths) *Source {
	c := *s
	c.ref = &ref
	return &c
}

// clientDecoding runs queries with client_golang's QueryRange and Query
// and their decoding: the reference that tests compare gpupack's
// decoders with.
type clientDecoding struct{}

func (clientDecoding) queryRange(ctx context.Context, s *Source, query string, r v1.Range) (model.Matrix, error) {
	v, _, _, err := s.api.QueryRange(ctx, query, r)
	if err != nil {
		return nil, s.fail(query, rangeWhen(r), err)
	}
	m, ok := v.(model.Matrix)
	if !ok {
		return nil, fmt.Errorf("prometheus %s: query %q returned a %s, want a range vector", s.shown, query, v.Type())
	}
	return m, nil
}

func (clientDecoding) queryVector(ctx context.Context, s *Source, query string, t time.Time) (model.Vector, error) {
	v, _, _, err := s.api.Query(ctx, query, t)
	if err != nil {
		return nil, s.fail(query, instantWhen(t), err)
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("prometheus %s: query %q returned a %s, want an instant vector", s.shown, query, v.Type())
	}
	return vec, nil
}
