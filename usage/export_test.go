package usage

// What the external tests (package usage_test, which may import the test
// kit's reportdiff without an import cycle) use of this package's test
// helpers.
var (
	Bucketize = bucketize
	MustPod   = mustPod
	T0        = t0
)
