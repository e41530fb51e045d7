package promql

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

// hourlyPlan is how a window is read from the second level of rules: one
// shard per Prometheus that evaluated them (one alone, or each behind a
// federating query engine such as Thanos Query, told apart by its
// external labels), each read on its own hourly windows.
type hourlyPlan struct {
	shards []hourlyShard
}

// hourlyShard is the second level of one Prometheus: the selector of its
// recorded series (the report's, and its external labels), the ends of
// its hourly windows wholly inside the window (1 h apart, in order, at
// its own evaluation offset), and the window's head and tail around them,
// each shorter than an hour, read from its 5-minute windows.
type hourlyShard struct {
	sel  Selector
	ends []time.Time
	// devices is the most devices one of its hourly windows held.
	devices int
}

// devices is the most devices the shards' hourly windows held, added up.
func (p *hourlyPlan) devices() int {
	n := 0
	for _, sh := range p.shards {
		n += sh.devices
	}
	return n
}

// planHourly finds the hourly windows wholly inside w (those whose
// 5-minute windows all ended in [w.Start, w.End)) from the series
// hourlyDevices: one series per Prometheus that evaluated the rules,
// their external labels apart, each at its own evaluation offset. It
// says no (a nil plan) unless each one's windows are 1 h apart and leave
// less than an hour at each end: the second level was not recorded over
// the whole window (installed later, or its group's evaluation offset
// changed), and the window is read from the 5-minute rules or the
// series instead.
func (s *Source) planHourly(ctx context.Context, w usage.Window) (*hourlyPlan, error) {
	// Evaluated at E, a window ends at E - hourLag; the ones inside w
	// were evaluated in [w.Start + 1h + hourLag - 1ms, w.End + hourLag - 1ms].
	at := w.End.Add(hourLag - time.Millisecond)
	q := fmt.Sprintf("%s{%s}[%dms]", hourlyDevices, s.Selector.recorded(stepValue(w.Step)), w.End.Sub(w.Start).Milliseconds())
	v, warnings, _, err := s.api.Query(ctx, q, at)
	if err == nil && len(warnings) > 0 {
		err = &PartialAnswerError{Warnings: warnings}
	}
	if err != nil {
		return nil, fmt.Errorf("bucket figures, whether gpupack's hourly recording rules hold them: %w", s.fail(q, instantWhen(at), err))
	}
	m, ok := v.(model.Matrix)
	if !ok || len(m) == 0 {
		return nil, nil
	}
	plan := &hourlyPlan{}
	for _, ss := range m {
		sh := s.shardOf(ss.Metric, m)
		if ss.Metric[model.MetricNameLabel] != hourlyDevices || !sh.plan(w, ss.Values) {
			return nil, nil
		}
		plan.shards = append(plan.shards, sh)
	}
	slices.SortFunc(plan.shards, func(a, b hourlyShard) int { return strings.Compare(a.sel.shard, b.sel.shard) })
	return plan, nil
}

// shardOf is the shard whose hourly devices' series has labels l, among
// those of all in m: the report's selector, l's labels that the rules do
// not set (a Prometheus' external labels) matched as they are, and the
// other series' such labels that l lacks matched as empty, so that no two
// shards select the same series.
func (s *Source) shardOf(l model.Metric, m model.Matrix) hourlyShard {
	names := map[model.LabelName]bool{}
	for _, ss := range m {
		for name := range ss.Metric {
			names[name] = true
		}
	}
	delete(names, model.MetricNameLabel)
	delete(names, StepLabel)
	delete(names, SelectorLabel)
	var parts []string
	for name := range names {
		parts = append(parts, fmt.Sprintf("%s=%q", name, string(l[name])))
	}
	slices.Sort(parts)
	sel := s.Selector
	sel.shard = strings.Join(parts, ", ")
	return hourlyShard{sel: sel}
}

// plan finds the shard's hourly windows wholly inside w from the points
// of its hourly devices' series, and says whether they are 1 h apart and
// leave less than an hour at each end.
func (sh *hourlyShard) plan(w usage.Window, points []model.SamplePair) bool {
	for _, p := range points {
		if v := float64(p.Value); v > float64(sh.devices) && v < math.MaxInt32 {
			sh.devices = int(v)
		}
		end := p.Timestamp.Time().Add(-hourLag).UTC()
		if !end.Add(time.Millisecond-HourWindow).Before(w.Start) && end.Before(w.End) {
			sh.ends = append(sh.ends, end)
		}
	}
	ends := sh.ends
	if len(ends) == 0 || !ends[0].Before(w.Start.Add(2*HourWindow)) || ends[len(ends)-1].Before(w.End.Add(-HourWindow)) {
		return false
	}
	for i := 1; i < len(ends); i++ {
		if ends[i].Sub(ends[i-1]) != HourWindow {
			return false
		}
	}
	return true
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

// pieceSet holds the buckets read for one chunk (of StreamBuckets' day,
// or of a day of the hourly path, in pieces), in the order first read.
// They are found by device and owner first, then by piece and start: an
// answered series' labels are read and hashed once, not once a point.
type pieceSet struct {
	mu           sync.Mutex
	step, length time.Duration
	series       map[seriesKey]*seriesPieces
	order        []pieceEntry
}

// seriesKey names a device (Key), or an owner on it.
type seriesKey struct {
	device string
	owner  usage.Owner
}

// seriesPieces are the buckets of one device, or one owner on it, by
// piece and start (Unix milliseconds).
type seriesPieces struct {
	key     seriesKey
	buckets map[[2]int64]*usage.Bucket
}

// pieceEntry is a bucket and its key, as emit orders them.
type pieceEntry struct {
	key pieceKey
	b   *usage.Bucket
}

func newPieceSet(step, length time.Duration) *pieceSet {
	return &pieceSet{step: step, length: length, series: map[seriesKey]*seriesPieces{}}
}

// of is the buckets of the device whose Key is deviceKey and o, made on
// first use; the caller holds p.mu.
func (p *pieceSet) of(deviceKey string, o usage.Owner) *seriesPieces {
	k := seriesKey{deviceKey, o}
	s := p.series[k]
	if s == nil {
		s = &seriesPieces{key: k, buckets: map[[2]int64]*usage.Bucket{}}
		p.series[k] = s
	}
	return s
}

// bucket is the bucket of piece that starts at start, of d (whose Key is
// deviceKey) and o, made on first use; the caller holds p.mu.
func (p *pieceSet) bucket(piece int, start time.Time, d usage.Device, deviceKey string, o usage.Owner) *usage.Bucket {
	return p.of(deviceKey, o).bucket(p, piece, start, d)
}

// bucket is s's bucket of piece that starts at start, made on first use
// (of device d); the caller holds p.mu.
func (s *seriesPieces) bucket(p *pieceSet, piece int, start time.Time, d usage.Device) *usage.Bucket {
	k := [2]int64{int64(piece), start.UnixMilli()}
	b := s.buckets[k]
	if b == nil {
		b = &usage.Bucket{Start: start, Length: p.length, Step: p.step, Device: d, Owner: s.key.owner}
		s.buckets[k] = b
		p.order = append(p.order, pieceEntry{pieceKey{piece, k[1], s.key.device, s.key.owner}, b})
	}
	if b.Device.Model == "" {
		b.Device.Model = d.Model
	}
	return b
}

// file calls set for every finite point of m, on the bucket of the piece
// and the report hour that at says, under the set's lock. A series' device
// and owner are read from its labels once, at its first point filed.
func (p *pieceSet) file(m model.Matrix, at func(ss *model.SampleStream, t time.Time) (piece int, start time.Time, fig *bucketFigure)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ss := range m {
		var (
			read   bool
			dev    usage.Device
			devKey string
			pieces [2]*seriesPieces // the device's, the owner's
			dra    usage.DRAHold
		)
		for _, pt := range ss.Values {
			v := float64(pt.Value)
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			piece, start, fig := at(ss, pt.Timestamp.Time())
			if fig == nil {
				continue
			}
			if !read {
				dev, read = device(ss.Metric), true
				devKey = dev.Key()
			}
			i := 0
			if fig.owner {
				i = 1
			}
			if pieces[i] == nil {
				o := usage.Owner{}
				if fig.owner {
					o, dra = owner(ss.Metric), draHold(ss.Metric)
				}
				pieces[i] = p.of(devKey, o)
			}
			b := pieces[i].bucket(p, piece, start, dev)
			if fig.owner && b.DRA.IsZero() {
				b.DRA = dra
			}
			fig.set(b, v, ss.Metric)
		}
	}
}

// emit hands add the buckets that hold a step, in the order of their
// keys: queries answer in any order, and the report's sums, added in the
// order of the pieces, should not change in their last digits from one
// run to the next.
func (p *pieceSet) emit(add func(*usage.Bucket) error) error {
	slices.SortFunc(p.order, func(x, y pieceEntry) int {
		a, b := x.key, y.key
		return cmp.Or(cmp.Compare(a.piece, b.piece), cmp.Compare(a.start, b.start), strings.Compare(a.device, b.device),
			strings.Compare(a.owner.Namespace, b.owner.Namespace), strings.Compare(a.owner.Pod, b.owner.Pod), strings.Compare(a.owner.Container, b.owner.Container))
	})
	for _, e := range p.order {
		b := e.b
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

// streamHourly reads w from the second level of rules where it holds w and
// the first level covers every hour of it (recordedCovers, a group of days
// at a time): each hourly window wholly inside w is read, for the per-hour
// figures as recorded (two range queries at a 1 h step, nothing computed)
// and counted in the report hour its window starts in, for the others
// combined over each day of windows (a query per figure at a one-day step:
// one point per series and day, not 24) and counted in the hour the day's
// first window starts in, the queries a group of days at a time
// (groupDays: a week, fewer for a large fleet); the head before the first
// and the tail after the last (each under an hour) are read from the
// 5-minute windows, as recordedQuery reads an hour, and counted in w's
// first and last hours. Totals are those of the 5-minute windows that
// ended in w, as the first level alone gives them; an hour's figures are
// shifted by up to an hour. Each Prometheus that evaluated the rules
// (planHourly's shards) is read on its own windows, one after the other.
// It says false, having read nothing, where the rules do not hold w.
func (s *Source) streamHourly(ctx context.Context, w usage.Window, bucket time.Duration, add func(*usage.Bucket) error) (bool, error) {
	if s.paths().fastest > pathHourlyRules || bucket != HourWindow {
		return false, nil
	}
	plan, err := s.planHourly(ctx, w)
	if err != nil || plan == nil {
		return false, err
	}
	if ok, err := s.coversDays(ctx, w, bucket, s.groupDays(plan.devices())); err != nil || !ok {
		return false, err
	}
	s.countBuckets(true, int(w.End.Sub(w.Start)/bucket))
	for _, sh := range plan.shards {
		s.countHourlyWindows(len(sh.ends))
		if err := s.streamShard(ctx, w, sh, add); err != nil {
			return true, err
		}
	}
	return true, nil
}

// streamShard reads, as streamHourly says, w from the second level of the
// rules of one shard: its own hourly windows, its head and tail from its
// own 5-minute windows.
func (s *Source) streamShard(ctx context.Context, w usage.Window, sh hourlyShard, add func(*usage.Bucket) error) error {
	groupDays := s.groupDays(sh.devices)
	names := map[string]*bucketFigure{}
	for i := range bucketFigures {
		names[RecordedHourName(bucketFigures[i].name)] = &bucketFigures[i]
	}
	first, last := sh.ends[0], sh.ends[len(sh.ends)-1]
	perChunk := int(bucketChunk / HourWindow)
	nDays := (len(sh.ends) + perChunk - 1) / perChunk
	dayEnds := func(day int) []time.Time { return sh.ends[day*perChunk : min((day+1)*perChunk, len(sh.ends))] }
	// A group's queries share bucketParallel slots with the next group's,
	// which start as soon as the group's days are being handed on:
	// Prometheus answers the next group while gpupack files and hands on
	// this one. Two groups' answers are held at most.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slots := semaphore.NewWeighted(bucketParallel)
	read := func(lo int) *groupRead {
		hi := min(lo+groupDays, nDays)
		g, gctx := errgroup.WithContext(ctx)
		group := &groupRead{lo: lo, sel: sh.sel, g: g, days: make([]*pieceSet, hi-lo), hourly: make([][]figurePoints, hi-lo), labels: newLabelSets(), hourlySets: map[model.Fingerprint]model.Metric{}}
		for k := range group.days {
			group.days[k] = newPieceSet(w.Step, HourWindow)
		}
		goSlot := func(f func() error) {
			g.Go(func() error {
				if err := slots.Acquire(gctx, 1); err != nil {
					return err
				}
				defer slots.Release(1)
				return f()
			})
		}
		if lo == 0 && !first.Add(-HourWindow).Before(w.Start) {
			// The head: the 5-minute windows that ended in [w.Start, first - 1h],
			// over a range 1 ms longer, which keeps a window ending at
			// w.Start in Prometheus 3's ranges (open at the start, as
			// Thanos Query's engine reads them) as in Prometheus 2's.
			edge := first.Add(-HourWindow)
			s.goCombined(gctx, goSlot, group.sel, group.labels, group.days[:1], w.Step, v1.Range{Start: edge, End: edge, Step: HourWindow}, edge.Sub(w.Start)+time.Millisecond, allFigures(), RecordedName, pieceHead, func(int) time.Time { return w.Start })
		}
		if hi == nDays && last.Before(w.End.Add(-time.Millisecond)) {
			// The tail: those that ended in (last, w.End - 1ms].
			edge := w.End.Add(-time.Millisecond)
			s.goCombined(gctx, goSlot, group.sel, group.labels, group.days[hi-lo-1:], w.Step, v1.Range{Start: edge, End: edge, Step: HourWindow}, edge.Sub(last)-time.Millisecond, allFigures(), RecordedName, pieceTail, func(int) time.Time { return w.End.Add(-HourWindow) })
		}
		// The figures that only add to totals, each day's hourly windows
		// combined into one piece, counted in the hour the first starts
		// in, filed into the days' pieces as they come; the per-hour
		// figures, kept as Prometheus sent them until their day is handed
		// on.
		s.goDaily(gctx, goSlot, w, group, dayEnds, hi)
		s.goHourly(gctx, goSlot, group, names, w.Step, dayEnds, hi)
		return group
	}
	next := read(0)
	for lo := 0; lo < nDays; lo += groupDays {
		cur := next
		if lo+groupDays < nDays {
			next = read(lo + groupDays)
		}
		err := cur.g.Wait()
		for k := 0; err == nil && k < len(cur.days); k++ {
			day := cur.days[k]
			day.fileHours(cur.hourly[k], func(t time.Time) time.Time {
				return hourStart(w, t.Add(-hourLag).Add(time.Millisecond-HourWindow))
			})
			day.settleDay(hourStart(w, dayEnds(cur.lo + k)[0].Add(time.Millisecond-HourWindow)))
			err = day.emit(add)
			cur.days[k], cur.hourly[k] = nil, nil
		}
		if err != nil {
			cancel()
			next.g.Wait() // its queries stop with the context
			return err
		}
	}
	return nil
}

// fileHours files a day's per-hour figures, as recorded, into its hourly
// pieces, each point in the report hour that start gives for its
// evaluation time: first the figures that are others' defaults, then
// every owner's hourly figures that have one set to it (hourDefaults),
// then the other figures, whose recorded values replace the defaults.
func (p *pieceSet) fileHours(figs []figurePoints, start func(time.Time) time.Time) {
	slices.SortStableFunc(figs, func(a, b figurePoints) int {
		_, da := hourDefaultValue[a.fig.name]
		_, db := hourDefaultValue[b.fig.name]
		switch {
		case da && !db:
			return -1
		case db && !da:
			return 1
		}
		return 0
	})
	defaulted := false
	for _, fp := range figs {
		if _, ok := hourDefaultValue[fp.fig.name]; !ok && !defaulted {
			p.setDefaults()
			defaulted = true
		}
		p.file(fp.m, func(_ *model.SampleStream, t time.Time) (int, time.Time, *bucketFigure) {
			return pieceHourly, start(t), fp.fig
		})
	}
	if !defaulted {
		p.setDefaults()
	}
}

// setDefaults sets each figure of every owner's hourly piece that has a
// default (hourDefaults) to its default's value.
func (p *pieceSet) setDefaults() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.order {
		if e.key.piece != pieceHourly || e.key.owner.IsZero() {
			continue
		}
		for i := range bucketFigures {
			if from := hourDefaults[bucketFigures[i].name]; from != "" {
				if v, ok := hourDefaultValue[from](e.b); ok {
					bucketFigures[i].set(e.b, v, nil)
				}
			}
		}
	}
}

// settleDay gives each owner of the day a daily piece (in the report hour
// start) that holds what its hourly pieces say of the whole day: its held
// steps and activity samples added up, the weights of the day's activity
// and VRAM percentiles, and its VRAM percentiles combined as Prometheus
// combines the others over the day (the same quantile of the hours'
// quantiles, the largest maximum). The activity samples and VRAM leave
// the hourly pieces, so that they are counted once.
func (p *pieceSet) settleDay(start time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	type day struct {
		held, samples float64
		p50, p95, max []float64
		dev           usage.Device
	}
	days := map[*seriesPieces]*day{}
	for _, e := range p.order {
		if e.key.piece != pieceHourly || e.key.owner.IsZero() {
			continue
		}
		s := p.series[seriesKey{e.key.device, e.key.owner}]
		d := days[s]
		if d == nil {
			d = &day{dev: e.b.Device}
			days[s] = d
		}
		d.held += e.b.HeldSteps
		d.samples += e.b.Activity.Samples
		e.b.Activity.Samples = 0
		v := e.b.VRAMUsedMiB
		if v.P50.Known() {
			d.p50 = append(d.p50, v.P50.Value())
		}
		if v.P95.Known() {
			d.p95 = append(d.p95, v.P95.Value())
		}
		if v.Max.Known() {
			d.max = append(d.max, v.Max.Value())
		}
		e.b.VRAMUsedMiB = usage.Percentiles{}
	}
	for s, d := range days { // emit orders the pieces
		b := s.bucket(p, pieceDaily, start, d.dev)
		b.HeldSteps, b.Activity.Samples = d.held, d.samples
		if len(d.p50) > 0 {
			b.VRAMUsedMiB.P50 = usage.Known(quantileOverTime(0.5, d.p50))
		}
		if len(d.p95) > 0 {
			b.VRAMUsedMiB.P95 = usage.Known(quantileOverTime(0.95, d.p95))
		}
		if len(d.max) > 0 {
			b.VRAMUsedMiB.Max = usage.Known(slices.Max(d.max))
		}
	}
}

// quantileOverTime is PromQL's quantile_over_time(q) of values (sorted
// here): the values' q-quantile, interpolated between the two nearest.
func quantileOverTime(q float64, values []float64) float64 {
	slices.Sort(values)
	rank := q * float64(len(values)-1)
	lo := math.Max(0, math.Floor(rank))
	hi := math.Min(float64(len(values)-1), lo+1)
	w := rank - math.Floor(rank)
	return values[int(lo)]*(1-w) + values[int(hi)]*w
}

// groupRead is the queries of a group of days (daysPerQuery) in flight:
// the pieces of each day of the group, and the per-hour figures read for
// it, kept until the day is handed on.
type groupRead struct {
	lo     int      // the group's first day
	sel    Selector // the shard's
	g      *errgroup.Group
	days   []*pieceSet
	labels *labelSets // the label sets of the group's combined figures
	mu     sync.Mutex
	hourly [][]figurePoints
	// hourlySets are the label sets of the per-hour figures' series, less
	// their figure's name, by fast fingerprint: an owner's are one set for
	// all its figures, not one each.
	hourlySets map[model.Fingerprint]model.Metric
}

// figurePoints are the points of one per-hour figure in one day.
type figurePoints struct {
	fig *bucketFigure
	m   model.Matrix
}

// goHourly reads, with goSlot, the per-hour figures of the days
// [group.lo, hi) as recorded, in range queries at a 1 h step over the
// days (hourlyQueries), and keeps each day's points in group.hourly by
// figure, the figure found by its recorded name in names. A series
// whose name is none of them is left out.
func (s *Source) goHourly(ctx context.Context, goSlot func(func() error), group *groupRead, names map[string]*bucketFigure, step time.Duration, dayEnds func(int) []time.Time, hi int) {
	first, last := dayEnds(group.lo), dayEnds(hi-1)
	r := v1.Range{Start: first[0].Add(hourLag), End: last[len(last)-1].Add(hourLag), Step: HourWindow}
	for _, q := range hourlyQueries(step, group.sel) {
		goSlot(func() error {
			m, err := s.queryRange(ctx, q, r)
			if err != nil {
				return fmt.Errorf("bucket figures from gpupack's hourly recording rules: %w", err)
			}
			group.mu.Lock()
			defer group.mu.Unlock()
			// A day's windows are 24 consecutive hours from the group's first.
			byDay := make([]map[*bucketFigure]model.Matrix, len(group.hourly))
			for _, ss := range m {
				fig := names[string(ss.Metric[model.MetricNameLabel])]
				if fig == nil {
					continue
				}
				// Each series carries its figure's name, so its label
				// set is in no other series; without the name it is the
				// set of the owner's (or device's) other figures, and
				// the group holds it once, not once a figure.
				delete(ss.Metric, model.MetricNameLabel)
				metric := group.hourlySet(ss.Metric)
				vals := ss.Values
				for len(vals) > 0 {
					k := int(vals[0].Timestamp.Time().Sub(r.Start) / bucketChunk)
					n := 1
					for n < len(vals) && int(vals[n].Timestamp.Time().Sub(r.Start)/bucketChunk) == k {
						n++
					}
					if k >= 0 && k < len(byDay) {
						if byDay[k] == nil {
							byDay[k] = map[*bucketFigure]model.Matrix{}
						}
						byDay[k][fig] = append(byDay[k][fig], &model.SampleStream{Metric: metric, Values: vals[:n]})
					}
					vals = vals[n:]
				}
			}
			for k := range byDay {
				for fig, m := range byDay[k] {
					group.hourly[k] = append(group.hourly[k], figurePoints{fig, m})
				}
			}
			return nil
		})
	}
}

// hourlySet is the group's label set equal to m, m itself the first
// time; the caller holds g.mu.
func (g *groupRead) hourlySet(m model.Metric) model.Metric {
	fp := m.FastFingerprint() // no sorting, no allocation: a collision is checked below
	if seen, ok := g.hourlySets[fp]; ok {
		if seen.Equal(m) {
			return seen
		}
		return m // another set with the same fingerprint: kept apart
	}
	g.hourlySets[fp] = m
	return m
}

// daysPerQuery is the most days of hourly windows one query of the
// hourly path reads. Prometheus finds a query's series in every block
// that overlaps its range, and reads the index entry of each series
// there, in the range or not: on blocks that span weeks (a long retention
// merges up to 31 days into one), a query per day would read a month of
// pods' entries for one day's. A week at a time reads them a few times a
// month. gpupack holds up to two groups' answers (the daily figures filed
// as they come, the per-hour ones as Prometheus sent them, filed a day at
// a time as the days are handed on), so a group is shortened to hold no
// more than groupDeviceDays.
const daysPerQuery = 7

// groupDeviceDays bounds a group's days times its devices: two groups
// then hold about as much as two days of 1,000 GPUs.
const groupDeviceDays = 1000

// groupDays is how many days of hourly windows a query of the hourly path
// reads for a fleet of devices (the most an hourly window held).
func (s *Source) groupDays(devices int) int {
	if n := s.paths().daysPerGroup; n > 0 {
		return n
	}
	return min(max(groupDeviceDays/max(devices, 1), 1), daysPerQuery)
}

// goDaily reads, with goSlot, the daily figures of the days [group.lo,
// hi): a range query at a one-day step per figure for the days of a whole
// day of hourly windows, another for a last day of fewer, each day's
// points filed into its own pieces.
func (s *Source) goDaily(ctx context.Context, goSlot func(func() error), w usage.Window, group *groupRead, dayEnds func(int) []time.Time, hi int) {
	read := func(from, to int) { // days [from, to), their windows equally long
		first, last := dayEnds(from), dayEnds(to-1)
		r := v1.Range{Start: first[len(first)-1].Add(hourLag), End: last[len(last)-1].Add(hourLag), Step: bucketChunk}
		s.goCombined(ctx, goSlot, group.sel, group.labels, group.days[from-group.lo:to-group.lo], w.Step, r, daySpan(first), dailyFigures(), RecordedHourName, pieceDaily, func(k int) time.Time {
			return hourStart(w, dayEnds(from + k)[0].Add(time.Millisecond-HourWindow))
		})
	}
	whole := int(bucketChunk / HourWindow)
	full := group.lo
	for full < hi && len(dayEnds(full)) == whole {
		full++
	}
	if full > group.lo {
		read(group.lo, full)
	}
	for k := full; k < hi; k++ {
		read(k, k+1)
	}
}

// daySpan is the range that selects a day's hourly windows, ends, at the
// evaluation of its last: from its last back to its first, and up to 1 ms
// short of the window before, so that Prometheus 2's ranges (closed at
// both ends) and Prometheus 3's (open at the start, as Thanos Query's
// engine reads them) select the same windows.
func daySpan(ends []time.Time) time.Duration {
	return ends[len(ends)-1].Sub(ends[0]) + HourWindow - time.Millisecond
}

// coversDays says whether the first level of the rules covers every hour
// of w (recordedCoverage), days days to a query, the queries sent at once.
func (s *Source) coversDays(ctx context.Context, w usage.Window, bucket time.Duration, days int) (bool, error) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(bucketParallel)
	var mu sync.Mutex
	covered := true
	span := time.Duration(days) * bucketChunk
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
// as piece, in the report hour start(k). The recorded series are those of
// sel; the answers share their label sets through labels.
func (s *Source) goCombined(ctx context.Context, goSlot func(func() error), sel Selector, labels *labelSets, sets []*pieceSet, step time.Duration, r v1.Range, span time.Duration, figs []int, name func(string) string, piece int, start func(k int) time.Time) {
	queries, err := combinedQueries(step, sel, span, figs, name)
	if err != nil {
		goSlot(func() error { return err })
		return
	}
	for k, q := range queries {
		fig := &bucketFigures[figs[k]]
		goSlot(func() error {
			m, err := s.queryRangeSharing(ctx, q, r, labels)
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
// figure, not several joined by "or" (each series labelled with its
// figure), which would cost Prometheus more for the same series: each
// "or" hashes every series of both sides, and each label added is one
// more to encode.
func combinedQueries(step time.Duration, sel Selector, span time.Duration, figs []int, name func(string) string) ([]string, error) {
	rng := fmt.Sprintf("[%dms]", max(span, time.Millisecond).Milliseconds())
	var out []string
	for _, i := range figs {
		q, err := combineSeries(bucketFigures[i], name(bucketFigures[i].name), step, sel, rng)
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, nil
}

// perHourFigures are the figures that the hourly path reads per hourly
// window, as recorded; it reads the others once per day of windows,
// combined by Prometheus. They are those whose hour matters to a report
// (an owner's held, activity-known and active shares: the hourly levels
// and its first hour; its shared steps: who shared a GPU in the same
// hour; its held steps: for its bucket to count), and those that the
// second level records only where they differ from another figure of the
// owner's hour (hourDefaults), which a day's combination could not tell
// apart from their default, with their defaults: the owner's activity
// sum, activity samples, DRAM and power steps, VRAM percentiles, first
// held and first use.
var perHourFigures = map[string]bool{
	"held steps": true, "held share": true, "activity-known share": true, "active share": true, "shared steps": true,
	"activity sum": true, "activity samples": true, "owner DRAM steps": true, "owner power steps": true,
	"owner VRAM p50": true, "owner VRAM p95": true, "owner VRAM max": true, "first held": true, "first use": true,
}

// hourDefaults are the owner figures that the second level of rules
// records in an hourly window only where they differ from another figure
// of the same owner and window, their default (and as 0 where they have
// no value and the default has one; a first use of 0 is none): on a GPU
// that one pod holds, whose activity, DRAM and power are known at every
// step, an owner's shares equal its held steps and its activity sum, its
// activity, DRAM and power samples its held steps; where its VRAM did not
// change in the hour, its VRAM percentiles equal its maximum; where it
// used the GPU from its first step, its first use is its first held.
// Then nothing of them is recorded, and a report reads four series per
// owner and day for those thirteen figures, not thirteen. Prometheus'
// query cost follows the series it reads (their index entries and
// labels), not their samples. A reader takes a figure's recorded value
// where there is one and its default's elsewhere; a window recorded by
// rules that recorded every figure reads the same.
var hourDefaults = map[string]string{
	"held share":           "held steps",
	"activity-known share": "held steps",
	"activity samples":     "held steps",
	"owner DRAM steps":     "held steps",
	"owner power steps":    "held steps",
	"active share":         "activity sum",
	"owner VRAM p50":       "owner VRAM max",
	"owner VRAM p95":       "owner VRAM max",
	"first use":            "first held",
}

// hourDefaultValue reads, from an owner's hourly bucket, the value of
// each figure that is another's default, as its rule records it, and
// whether it has one.
var hourDefaultValue = map[string]func(*usage.Bucket) (float64, bool){
	"held steps":   func(b *usage.Bucket) (float64, bool) { return b.HeldSteps, true },
	"activity sum": func(b *usage.Bucket) (float64, bool) { return b.Activity.Sum, true },
	"owner VRAM max": func(b *usage.Bucket) (float64, bool) {
		return b.VRAMUsedMiB.Max.Value(), b.VRAMUsedMiB.Max.Known()
	},
	"first held": func(b *usage.Bucket) (float64, bool) {
		return float64(b.FirstHeld.UnixMilli()) / 1000, !b.FirstHeld.IsZero()
	},
}

// hourRule is the second level's rule expression of figure fig, whose
// windows combined is combined: where the figure has a default
// (hourDefaults), the figure only where it differs from its default (or
// has a value where the default has none), and 0 where it has no value
// and its default has one; its combination elsewhere.
func hourRule(fig bucketFigure, combined func(bucketFigure) (string, error)) (string, error) {
	x, err := combined(fig)
	if err != nil || hourDefaults[fig.name] == "" {
		return x, err
	}
	i := slices.IndexFunc(bucketFigures, func(f bucketFigure) bool { return f.name == hourDefaults[fig.name] })
	if i < 0 {
		return "", fmt.Errorf("bucket figure %q: its default %q is no figure", fig.name, hourDefaults[fig.name])
	}
	d, err := combined(bucketFigures[i])
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("(%[1]s unless %[2]s) or (%[1]s != %[2]s) or ((%[2]s * 0) unless %[1]s)", x, d), nil
}

func allFigures() []int {
	var out []int
	for i := range bucketFigures {
		out = append(out, i)
	}
	return out
}

// dailyFigures are the figures read once per day of hourly windows: all
// but the per-hour ones. An owner's day also holds its held steps and
// activity samples, which weigh its day's VRAM and activity percentiles:
// settleDay adds them up from its hours.
func dailyFigures() []int {
	var out []int
	for i, f := range bucketFigures {
		if !perHourFigures[f.name] {
			out = append(out, i)
		}
	}
	return out
}

// hourlyQueries select the second level's series of the step and
// selector of the per-hour figures, in two queries that Prometheus
// answers at once; nothing is computed, the recorded points are read as
// they are.
func hourlyQueries(step time.Duration, sel Selector) []string {
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
		out = append(out, fmt.Sprintf("{__name__=~%q, %s}", strings.Join(names[lo:min(lo+per, len(names))], "|"), sel.recorded(stepValue(step))))
	}
	return out
}
