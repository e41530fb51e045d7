package usage

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/internal/util/mempolicy"
)

// incrementalWorld makes the buckets of a random cluster (randomWorld's)
// over hours complete hours from t0 and a partial hour of partial after
// them, at a step of a minute.
func incrementalWorld(rng *rand.Rand, hours int, partial time.Duration) (complete, rest []Bucket) {
	const step = time.Minute
	cur := t0.Add(time.Duration(hours) * time.Hour)
	series, _ := randomWorld(rng, Window{Start: t0, End: cur.Add(partial), Step: step})
	complete = bucketize(series, t0, hours, time.Hour, step)
	if partial > 0 {
		rest = bucketize(series, cur, 1, partial, step)
	}
	return complete, rest
}

// addAll adds every bucket of each list to a, in order.
func addAll(tb testing.TB, a *BucketAccount, lists ...[]Bucket) {
	tb.Helper()
	for _, bs := range lists {
		if err := a.AddAll(bs); err != nil {
			tb.Fatal(err)
		}
	}
}

// mustClone is a.Clone(end).
func mustClone(tb testing.TB, a *BucketAccount, end time.Time) *BucketAccount {
	tb.Helper()
	c, err := a.Clone(end)
	if err != nil {
		tb.Fatalf("clone: %v", err)
	}
	return c
}

// report is a's report priced by the catalogue, without pod events or
// application metrics.
func report(tb testing.TB, a *BucketAccount) *Report {
	tb.Helper()
	r, err := a.Report(Pricing{Catalogue: gpu.Default()}, nil, nil, 0)
	if err != nil {
		tb.Fatalf("report: %v", err)
	}
	return r
}

// TestIncrementalMatchesFull checks that accounting the complete hours of a
// window once, cloning that account up to the window's end and adding the
// partial hour to the clone gives exactly the report that AccountBuckets
// gives over every bucket, as serve's refresh relies on; and that the
// complete hours' account, reused for a second refresh, gives it again.
func TestIncrementalMatchesFull(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 17))
		hours := 1 + rng.IntN(4)
		partial := time.Duration(rng.IntN(60)) * time.Minute // 0: no partial hour yet
		complete, rest := incrementalWorld(rng, hours, partial)
		cur := t0.Add(time.Duration(hours) * time.Hour)
		end := cur.Add(partial)

		want, err := AccountBuckets(BucketInput{Start: t0, End: end, Buckets: append(append([]Bucket(nil), complete...), rest...), Pricing: Pricing{Catalogue: gpu.Default()}})
		if err != nil {
			t.Fatalf("seed %d: full: %v", seed, err)
		}
		acc, err := NewBucketAccount(t0, cur)
		if err != nil {
			t.Fatal(err)
		}
		addAll(t, acc, complete)
		for refresh := range 2 {
			c := mustClone(t, acc, end)
			addAll(t, c, rest)
			if diff := cmp.Diff(want, report(t, c), cmpopts.EquateNaNs()); diff != "" {
				t.Fatalf("seed %d (%d hours, partial %s), refresh %d: incremental report differs from the full one (-full +incremental):\n%s", seed, hours, partial, refresh, diff)
			}
		}
	}
}

// TestCloneIndependent checks that a clone shares nothing with its
// original: adding buckets to the clone and reporting it leaves the
// original's report as it was, and the other way round.
func TestCloneIndependent(t *testing.T) {
	opts := cmpopts.EquateNaNs()
	// Report spends an account: peek reports a copy, to look at one that
	// takes more buckets after.
	peek := func(a *BucketAccount) *Report { return report(t, mustClone(t, a, a.end)) }
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 19))
		complete, rest := incrementalWorld(rng, 2, 30*time.Minute)
		end := t0.Add(2*time.Hour + 30*time.Minute)
		orig, err := NewBucketAccount(t0, end)
		if err != nil {
			t.Fatal(err)
		}
		addAll(t, orig, complete)
		before := peek(orig)
		clone := mustClone(t, orig, end)
		cloneBefore := peek(clone)
		// The clone takes the partial hour and the complete hours again:
		// every sum, list and map of it changes.
		addAll(t, clone, rest, complete)
		cloneAfter := peek(clone)
		if diff := cmp.Diff(before, peek(orig), opts); diff != "" {
			t.Fatalf("seed %d: the original's report changed with its clone (-before +after):\n%s", seed, diff)
		}
		// And the original taking buckets leaves the clones' reports as
		// they were.
		clone2 := mustClone(t, orig, end)
		addAll(t, orig, rest)
		if diff := cmp.Diff(cloneBefore, report(t, clone2), opts); diff != "" {
			t.Fatalf("seed %d: a clone's report changed with its original (-before +after):\n%s", seed, diff)
		}
		if diff := cmp.Diff(cloneAfter, report(t, clone), opts); diff != "" {
			t.Fatalf("seed %d: a clone's report changed with its original's later buckets (-before +after):\n%s", seed, diff)
		}
		// A reported account is spent.
		if _, err := clone.Report(Pricing{Catalogue: gpu.Default()}, nil, nil, 0); err == nil {
			t.Fatalf("seed %d: a second Report was accepted; want it refused", seed)
		}
		if len(rest) > 0 && clone.Add(&rest[0]) == nil {
			t.Fatalf("seed %d: Add after Report was accepted; want it refused", seed)
		}
	}
}

func TestCloneRefusesWindow(t *testing.T) {
	step := Bucket{Start: t0, Length: time.Hour, Step: 30 * time.Second, Device: Device{Node: "n", GPU: "0", UUID: "GPU-0"}, SampledSteps: 120}
	cases := map[string]struct {
		add     bool
		end     time.Time
		wantErr string
	}{
		"end before the account's":   {end: t0.Add(30 * time.Minute), wantErr: "before the buckets added"},
		"end not whole steps":        {add: true, end: t0.Add(time.Hour + 45*time.Second), wantErr: "not a whole number of steps of 30s"},
		"no step yet, any later end": {end: t0.Add(time.Hour + 45*time.Second)},
		"same end":                   {add: true, end: t0.Add(time.Hour)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a, err := NewBucketAccount(t0, t0.Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			if tc.add {
				b := step
				if err := a.Add(&b); err != nil {
					t.Fatal(err)
				}
			}
			_, err = a.Clone(tc.end)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Clone: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Clone: error %v, want one saying %q", err, tc.wantErr)
			}
		})
	}
}

// TestReportMemoryPolicy: a large report hands memory back (a forced
// collection before it and after) under a one-shot policy, kept by Clone,
// and under serve's policy does not (at 10,000 owners, fewer than
// reportCollectOwners, it asks for no collection at all); the reports are
// the same.
func TestReportMemoryPolicy(t *testing.T) {
	start, cur, _, complete, _ := refreshWorld(mempolicy.Large/2, 1) // two owners a GPU
	pricing := Pricing{Catalogue: gpu.Default()}
	var reports []*Report
	for _, c := range []struct {
		name     string
		p        mempolicy.Policy
		clone    bool
		minForce uint32
	}{
		{"long-running", mempolicy.LongRunning, false, 0},
		{"one-shot", mempolicy.OneShot, false, 2},
		{"one-shot, cloned", mempolicy.OneShot, true, 2},
	} {
		a, err := NewBucketAccount(start, cur)
		if err != nil {
			t.Fatal(err)
		}
		a.Memory = c.p
		addAll(t, a, complete)
		if c.clone {
			a = mustClone(t, a, cur)
		}
		if a.Owners() < mempolicy.Large {
			t.Fatalf("%s: %d owners, want a large report of %d or more", c.name, a.Owners(), mempolicy.Large)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r, err := a.Report(pricing, nil, nil, 0)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		forced := after.NumForcedGC - before.NumForcedGC
		if c.minForce == 0 && forced != 0 || forced < c.minForce {
			t.Errorf("%s: %d forced collections in Report, want %s", c.name, forced, map[bool]string{true: "none", false: fmt.Sprintf("%d or more", c.minForce)}[c.minForce == 0])
		}
		reports = append(reports, r)
	}
	for _, r := range reports[1:] {
		if diff := cmp.Diff(reports[0], r); diff != "" {
			t.Errorf("the report depends on the memory policy (-long-running +one-shot):\n%s", diff)
		}
	}
}
