package promql

import (
	"context"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// referencePaths are the simpler, slower ways of reading that tests and
// benchmarks compare gpupack's own with. A Source reads by them only
// where its ref is set, which only tests do (reference_test.go); in
// production ref is nil, and the zero referencePaths, gpupack's own
// paths, apply.
type referencePaths struct {
	// answers, where set, runs the queries and decodes their answers in
	// place of gpupack's own decoders (decodeMatrix, decodeVector,
	// eachVectorSample): in tests, client_golang's API and decoding.
	answers answerReader
	// fastest is the fastest way StreamBuckets may read buckets, and
	// whether LoadHealth may read the rules' XID windows; the slower
	// ways read what it cannot, as in production.
	fastest bucketPath
	// daysPerGroup, where set, is how many days of hourly windows one
	// query of the hourly path reads, in place of groupDays' choice for
	// the fleet's size.
	daysPerGroup int
}

// answerReader runs a query and decodes its answer, as Source's
// queryRange and queryVector do with gpupack's own decoders.
type answerReader interface {
	queryRange(ctx context.Context, s *Source, query string, r v1.Range) (model.Matrix, error)
	queryVector(ctx context.Context, s *Source, query string, t time.Time) (model.Vector, error)
}

// bucketPath is a way StreamBuckets reads buckets, fastest first: each
// reads the hours that the faster ones cannot (see LoadBuckets).
type bucketPath int

const (
	// pathHourlyRules reads the second level of gpupack's recording
	// rules (streamHourly).
	pathHourlyRules bucketPath = iota
	// pathFiveMinuteRules reads the first level, the 5-minute windows
	// (streamRecorded).
	pathFiveMinuteRules
	// pathComputed computes the buckets from the series: the plain
	// figures on the device-hours that are plain, subqueries on the
	// others (computeChunk).
	pathComputed
	// pathSubqueries computes every figure of every device-hour with
	// subqueries (subqueryChunk).
	pathSubqueries
)

// paths are the ways s reads: gpupack's own (the zero value), or the
// reference paths that a test set.
func (s *Source) paths() referencePaths {
	if s.ref == nil {
		return referencePaths{}
	}
	return *s.ref
}
