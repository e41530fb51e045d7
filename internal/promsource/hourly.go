package promsource

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/gpupack/gpupack/usage"
)

// hourlyPlan is how a window is read from the second level of rules: the
// ends of the hourly windows wholly inside it (1 h apart, in order), and
// the window's head and tail around them, each shorter than an hour,
// read from the 5-minute windows.
type hourlyPlan struct {
	ends []time.Time
}

// planHourly finds the hourly windows wholly inside w (those whose
// 5-minute windows all ended in [w.Start, w.End)) from the series
// hourlyDevices. It says no (a nil plan) unless they are 1 h apart and
// leave less than an hour at each end: the second level was not
// recorded over the whole window (installed later, or its group's
// evaluation offset changed), and the window is read as before.
func (s *Source) planHourly(ctx context.Context, w usage.Window) (*hourlyPlan, error) {
	// Evaluated at E, a window ends at E - hourLag; the ones inside w
	// were evaluated in [w.Start + 1h + hourLag - 1ms, w.End + hourLag - 1ms].
	at := w.End.Add(hourLag - time.Millisecond)
	q := fmt.Sprintf("%s{%s=%q}[%dms]", hourlyDevices, StepLabel, stepValue(w.Step), w.End.Sub(w.Start).Milliseconds())
	v, _, _, err := s.api.Query(ctx, q, at)
	if err != nil {
		return nil, fmt.Errorf("bucket figures, whether gpupack's hourly recording rules hold them: %w", s.fail(q, err))
	}
	m, ok := v.(model.Matrix)
	if !ok || len(m) != 1 || m[0].Metric[model.MetricNameLabel] != hourlyDevices {
		return nil, nil // none, or more than one group recording them
	}
	var ends []time.Time
	for _, p := range m[0].Values {
		end := p.Timestamp.Time().Add(-hourLag).UTC()
		if !end.Add(time.Millisecond-HourWindow).Before(w.Start) && end.Before(w.End) {
			ends = append(ends, end)
		}
	}
	if len(ends) == 0 || !ends[0].Before(w.Start.Add(2*HourWindow)) || ends[len(ends)-1].Before(w.End.Add(-HourWindow)) {
		return nil, nil
	}
	for i := 1; i < len(ends); i++ {
		if ends[i].Sub(ends[i-1]) != HourWindow {
			return nil, nil
		}
	}
	return &hourlyPlan{ends: ends}, nil
}

// hourStart is the start of w's hour (bucket) that holds t.
func hourStart(w usage.Window, t time.Time) time.Time {
	return w.Start.Add(t.Sub(w.Start).Truncate(HourWindow))
}

// pieceKey names one piece of a bucket: an hourly window, or the window's
// head or tail read from the 5-minute windows; a report hour may hold two.
type pieceKey struct {
	piece  int
	start  int64
	device string
	owner  usage.Owner
}

// pieceSet holds the pieces read for one chunk, in the order first read.
type pieceSet struct {
	mu      sync.Mutex
	step    time.Duration
	buckets map[pieceKey]*usage.Bucket
	order   []pieceKey
}

func newPieceSet(step time.Duration) *pieceSet {
	return &pieceSet{step: step, buckets: map[pieceKey]*usage.Bucket{}}
}

// file calls set for every finite point of m, on the bucket of the piece
// and the report hour that at says, under the set's lock.
func (p *pieceSet) file(m model.Matrix, at func(ss *model.SampleStream, t time.Time) (piece int, start time.Time, fig *bucketFigure)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var piece int
	var dev usage.Device
	var deviceKey string // dev's, once per series: get files every bucket on dev
	get := func(start time.Time, d usage.Device, o usage.Owner) *usage.Bucket {
		k := pieceKey{piece, start.UnixMilli(), deviceKey, o}
		b := p.buckets[k]
		if b == nil {
			b = &usage.Bucket{Start: start, Length: HourWindow, Step: p.step, Device: d, Owner: o}
			p.buckets[k] = b
			p.order = append(p.order, k)
		}
		if b.Device.Model == "" {
			b.Device.Model = d.Model
		}
		return b
	}
	for _, ss := range m {
		dev = device(ss.Metric)
		deviceKey = dev.Key()
		for _, pt := range ss.Values {
			v := float64(pt.Value)
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			var start time.Time
			var fig *bucketFigure
			piece, start, fig = at(ss, pt.Timestamp.Time())
			if fig == nil {
				continue
			}
			fig.set(ownersBucket(get, start, dev, fig.owner, ss.Metric), v, ss.Metric)
		}
	}
}

// emit hands add the pieces that hold a step, as StreamBuckets hands its
// buckets, in the order of their keys: queries answer in any order, and
// the report's sums, added in the order of the pieces, should not change
// in their last digits from one run to the next.
func (p *pieceSet) emit(add func(*usage.Bucket) error) error {
	slices.SortFunc(p.order, func(a, b pieceKey) int {
		return cmp.Or(cmp.Compare(a.piece, b.piece), cmp.Compare(a.start, b.start), strings.Compare(a.device, b.device),
			strings.Compare(a.owner.Namespace, b.owner.Namespace), strings.Compare(a.owner.Pod, b.owner.Pod), strings.Compare(a.owner.Container, b.owner.Container))
	})
	for _, k := range p.order {
		b := p.buckets[k]
		if (b.Owner.IsZero() && b.SampledSteps == 0) || (!b.Owner.IsZero() && b.HeldSteps == 0) {
			continue
		}
		if err := add(b); err != nil {
			return err
		}
	}
	return nil
}

// The pieces of a report hour.
const (
	pieceHead = iota
	pieceHourly
	pieceDaily
	pieceTail
)

// streamHourly reads w from the second level of rules where it holds w
// and the first level covers every hour of it (recordedCovers, a day at a
// time): each hourly window wholly inside w is read, for the per-hour
// figures as recorded (two range queries at a 1 h step per day, nothing
// computed) and counted in the report hour its window starts in, for the
// others combined over each day of windows (a query per figure at a
// one-day step for a group of days, dailyDays: one point per series and
// day, not 24) and counted in the hour the day's first window starts in;
// the head before the first and
// the tail after the last (each under an hour) are read from the 5-minute
// windows, as recordedQuery reads an hour, and counted in w's first and
// last hours. Totals are those of the 5-minute windows that ended in w,
// as the first level alone gives them; an hour's figures are shifted by
// up to an hour. It says false, having read nothing, where the rules do
// not hold w.
func (s *Source) streamHourly(ctx context.Context, w usage.Window, bucket time.Duration, add func(*usage.Bucket) error) (bool, error) {
	if s.ignoreRecorded || s.ignoreHourly || s.subqueriesOnly || bucket != HourWindow {
		return false, nil
	}
	plan, err := s.planHourly(ctx, w)
	if err != nil || plan == nil {
		return false, err
	}
	if ok, err := s.coversDays(ctx, w, bucket); err != nil || !ok {
		return false, err
	}
	s.countBuckets(true, int(w.End.Sub(w.Start)/bucket))
	s.countHourlyWindows(len(plan.ends))
	names := map[string]*bucketFigure{}
	for i := range bucketFigures {
		names[RecordedHourName(bucketFigures[i].name)] = &bucketFigures[i]
	}
	first, last := plan.ends[0], plan.ends[len(plan.ends)-1]
	perChunk := int(bucketChunk / HourWindow)
	nDays := (len(plan.ends) + perChunk - 1) / perChunk
	dayEnds := func(day int) []time.Time { return plan.ends[day*perChunk : min((day+1)*perChunk, len(plan.ends))] }
	group := cmp.Or(s.dailyGroup, dailyDays)
	// A day's queries share bucketParallel slots with the next day's,
	// which start as soon as the day's are under way: Prometheus answers
	// the next day while gpupack files and hands on this one, and no day
	// waits on the slowest query of the one before. Two days' pieces are
	// held at most, and the daily pieces of the days of a group (a few
	// thousand buckets a day for 1,000 GPUs).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slots := semaphore.NewWeighted(bucketParallel)
	slotted := func(g *errgroup.Group, gctx context.Context) func(func() error) {
		return func(f func() error) {
			g.Go(func() error {
				if err := slots.Acquire(gctx, 1); err != nil {
					return err
				}
				defer slots.Release(1)
				return f()
			})
		}
	}
	type dayRead struct {
		pieces *pieceSet
		g      *errgroup.Group
		daily  *errgroup.Group // its group's daily figures
	}
	days := make([]*pieceSet, nDays)
	var daily *errgroup.Group
	read := func(day int) dayRead {
		if day%group == 0 {
			// The figures that only add to totals, a group of days at a
			// time: each day's hourly windows combined into one piece,
			// counted in the hour the first starts in.
			hi := min(day+group, nDays)
			for k := day; k < hi; k++ {
				days[k] = newPieceSet(w.Step)
			}
			var gctx context.Context
			daily, gctx = errgroup.WithContext(ctx)
			s.goDaily(gctx, slotted(daily, gctx), w, days, dayEnds, day, hi)
		}
		chunk := dayEnds(day)
		pieces := days[day]
		g, gctx := errgroup.WithContext(ctx)
		goSlot := slotted(g, gctx)
		if day == 0 && !first.Add(-HourWindow).Before(w.Start) {
			// The head: the 5-minute windows that ended in [w.Start, first - 1h].
			edge := first.Add(-HourWindow)
			s.goCombined(gctx, goSlot, []*pieceSet{pieces}, w.Step, v1.Range{Start: edge, End: edge, Step: HourWindow}, edge.Sub(w.Start), allFigures(), RecordedName, pieceHead, func(int) time.Time { return w.Start })
		}
		if day == nDays-1 && last.Before(w.End.Add(-time.Millisecond)) {
			// The tail: those that ended in (last, w.End - 1ms].
			edge := w.End.Add(-time.Millisecond)
			s.goCombined(gctx, goSlot, []*pieceSet{pieces}, w.Step, v1.Range{Start: edge, End: edge, Step: HourWindow}, edge.Sub(last)-time.Millisecond, allFigures(), RecordedName, pieceTail, func(int) time.Time { return w.End.Add(-HourWindow) })
		}
		r := v1.Range{Start: chunk[0].Add(hourLag), End: chunk[len(chunk)-1].Add(hourLag), Step: HourWindow}
		for _, q := range hourlyQueries(w.Step) {
			goSlot(func() error {
				m, err := s.queryRange(gctx, q, r)
				if err != nil {
					return fmt.Errorf("bucket figures from gpupack's hourly recording rules: %w", err)
				}
				pieces.file(m, func(ss *model.SampleStream, t time.Time) (int, time.Time, *bucketFigure) {
					end := t.Add(-hourLag)
					return pieceHourly, hourStart(w, end.Add(time.Millisecond-HourWindow)), names[string(ss.Metric[model.MetricNameLabel])]
				})
				return nil
			})
		}
		return dayRead{pieces, g, daily}
	}
	next := read(0)
	for day := range nDays {
		cur := next
		if day+1 < nDays {
			next = read(day + 1)
		}
		err := cur.g.Wait()
		if err == nil {
			err = cur.daily.Wait()
		}
		if err == nil {
			err = cur.pieces.emit(add)
			days[day] = nil
		}
		if err != nil {
			cancel()
			next.g.Wait() // its queries stop with the context
			next.daily.Wait()
			return true, err
		}
	}
	return true, nil
}

// dailyDays is how many days of the hourly rules' daily figures one query
// reads (a range query at a one-day step). Prometheus finds a query's
// series in every block that overlaps its range, and reads the index
// entry of each series there, in the range or not: on blocks that span
// weeks (a long retention merges up to 31 days into one), a query per
// day would read a month of pods' entries for one day's. A week at a time
// reads them a few times a month, and holds a week's daily pieces (a few
// thousand buckets a day for 1,000 GPUs).
const dailyDays = 7

// goDaily reads, with goSlot, the daily figures of days [lo, hi): a range
// query at a one-day step per figure for the days of a whole day of
// hourly windows, another for a last day of fewer, each day's points
// filed into its own pieces.
func (s *Source) goDaily(ctx context.Context, goSlot func(func() error), w usage.Window, days []*pieceSet, dayEnds func(int) []time.Time, lo, hi int) {
	read := func(from, to int) { // days [from, to), their windows equally long
		first, last := dayEnds(from), dayEnds(to-1)
		r := v1.Range{Start: first[len(first)-1].Add(hourLag), End: last[len(last)-1].Add(hourLag), Step: bucketChunk}
		s.goCombined(ctx, goSlot, days[from:to], w.Step, r, first[len(first)-1].Sub(first[0]), dailyFigures(), RecordedHourName, pieceDaily, func(k int) time.Time {
			return hourStart(w, dayEnds(from + k)[0].Add(time.Millisecond-HourWindow))
		})
	}
	whole := int(bucketChunk / HourWindow)
	full := lo
	for full < hi && len(dayEnds(full)) == whole {
		full++
	}
	if full > lo {
		read(lo, full)
	}
	for k := full; k < hi; k++ {
		read(k, k+1)
	}
}

// coversDays says whether the first level of the rules covers every hour
// of w (recordedCoverage), a group of days (dailyDays) to a query, the
// groups checked at once.
func (s *Source) coversDays(ctx context.Context, w usage.Window, bucket time.Duration) (bool, error) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(bucketParallel)
	var mu sync.Mutex
	covered := true
	span := time.Duration(cmp.Or(s.dailyGroup, dailyDays)) * bucketChunk
	for from := w.Start; from.Before(w.End); from = from.Add(span) {
		to := from.Add(span)
		if to.After(w.End) {
			to = w.End
		}
		r := v1.Range{Start: from.Add(bucket - time.Millisecond), End: to.Add(-time.Millisecond), Step: bucket}
		g.Go(func() error {
			ok, err := s.recordedCoverage(gctx, r, w.Step, bucket, true)
			mu.Lock()
			defer mu.Unlock()
			covered = covered && ok
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return false, err
	}
	return covered, nil
}

// goCombined reads, with goSlot, the figures figs (indexes into
// bucketFigures) combined over the recorded series that name gives them:
// at each time of r, those recorded in the span before it (at least the
// one at that time). The points of r's k-th time are filed into sets[k],
// as piece, in the report hour start(k).
func (s *Source) goCombined(ctx context.Context, goSlot func(func() error), sets []*pieceSet, step time.Duration, r v1.Range, span time.Duration, figs []int, name func(string) string, piece int, start func(k int) time.Time) {
	queries, err := combinedQueries(step, span, figs, name)
	if err != nil {
		goSlot(func() error { return err })
		return
	}
	for k, q := range queries {
		fig := &bucketFigures[figs[k]]
		goSlot(func() error {
			m, err := s.queryRange(ctx, q, r)
			if err != nil {
				return fmt.Errorf("bucket figure %q from gpupack's recording rules at %s: %w", fig.name, r.End.Format(time.RFC3339), err)
			}
			for i, set := range sets {
				at := r.Start.Add(time.Duration(i) * r.Step).UnixMilli()
				set.file(m, func(_ *model.SampleStream, t time.Time) (int, time.Time, *bucketFigure) {
					if t.UnixMilli() != at {
						return 0, time.Time{}, nil
					}
					return piece, start(i), fig
				})
			}
			return nil
		})
	}
}

// combinedQueries combine, for goCombined, each of the figures figs over
// the recorded series that name gives it in the last span: a query per
// figure. Joining several in one query (each series labelled with its
// figure, joined by "or") cost Prometheus a third more for the same
// series: each "or" hashes every series of both sides, and each label
// added is one more to encode.
func combinedQueries(step, span time.Duration, figs []int, name func(string) string) ([]string, error) {
	rng := fmt.Sprintf("[%dms]", max(span, time.Millisecond).Milliseconds())
	var out []string
	for _, i := range figs {
		q, err := combineSeries(bucketFigures[i], name(bucketFigures[i].name), step, rng)
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, nil
}

// perHourFigures are the figures whose hour matters to a report: an
// owner's held, activity-known and active shares (the hourly levels and
// its first hour), its shared steps (who shared a GPU in the same hour)
// and its held steps (for its bucket to count); the hourly path reads them
// per hourly window, the others once per day of them.
var perHourFigures = map[string]bool{"held steps": true, "held share": true, "activity-known share": true, "active share": true, "shared steps": true}

func allFigures() []int {
	var out []int
	for i := range bucketFigures {
		out = append(out, i)
	}
	return out
}

// dailyFigures are the figures read once per day of hourly windows: all
// but the per-hour ones, and an owner's held steps again, which weigh its
// day's VRAM percentiles (an owner's held steps add up nowhere else).
func dailyFigures() []int {
	var out []int
	for i, f := range bucketFigures {
		if !perHourFigures[f.name] || f.name == "held steps" {
			out = append(out, i)
		}
	}
	return out
}

// hourlyQueries select the second level's series of the step of the
// per-hour figures, in two queries that Prometheus answers at once;
// nothing is computed, the recorded points are read as they are.
func hourlyQueries(step time.Duration) []string {
	var names []string
	for _, f := range bucketFigures {
		if perHourFigures[f.name] {
			names = append(names, regexp.QuoteMeta(RecordedHourName(f.name)))
		}
	}
	slices.Sort(names)
	var out []string
	per := (len(names) + 1) / 2
	for lo := 0; lo < len(names); lo += per {
		out = append(out, fmt.Sprintf("{__name__=~%q, %s=%q}", strings.Join(names[lo:min(lo+per, len(names))], "|"), StepLabel, stepValue(step)))
	}
	return out
}
