package rulegen

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"
)

// Build writes the shard's days into a new TSDB directory dir: each day
// is written to an OpenMetrics file beside dir and loaded with promtool
// tsdb create-blocks-from openmetrics (--max-block-duration=24h, which
// promtool rounds down to 18 h: one or two blocks a day, so that each file
// is read two or three times, not twelve), then removed, so that disk
// holds a day's text per worker. workers days are built at once.
func Build(ctx context.Context, f Fleet, sh Shard, promtool, dir string, workers int) error {
	if err := f.Check(); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(max(workers, 1))
	for d := range f.Days {
		g.Go(func() error { return f.buildDay(ctx, sh, promtool, dir, d) })
	}
	return g.Wait()
}

func (f Fleet) buildDay(ctx context.Context, sh Shard, promtool, dir string, d int) error {
	file := fmt.Sprintf("%s.day%03d.om", dir, d)
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	defer os.Remove(file)
	err = f.WriteDay(out, sh, d)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("rulegen: writing day %d: %w", d, err)
	}
	args := []string{"tsdb", "create-blocks-from", "openmetrics", "--quiet", "--max-block-duration=" + day.String(), file, dir}
	if b, err := exec.CommandContext(ctx, promtool, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("rulegen: promtool %v: %w\n%s", args, err, b)
	}
	return nil
}

// CacheKey names a build of the shard of f by everything its blocks
// depend on, the generator's Version included.
func CacheKey(f Fleet, sh Shard) string {
	return fmt.Sprintf("rulegen-v%d_%dgpus-%d-%d_%ddays-from-%s_offsets-%dms-%dms", Version, f.GPUs, sh.From, sh.To, f.Days,
		f.Start.Format("20060102"), f.Offset5m.Milliseconds(), f.Offset1h.Milliseconds())
}

// Cached is the directory of the shard of f under root (CacheKey), its
// TSDB in data/ (as testcluster.PrometheusOptions.Dir wants it), built first unless it is there and rebuild is false. A build goes to a
// temporary directory renamed into place once complete, so an interrupted
// build is never taken for a cached one. It says how long the build took
// (0 when cached).
func Cached(ctx context.Context, f Fleet, sh Shard, promtool, root string, rebuild bool, workers int) (string, time.Duration, error) {
	dir := filepath.Join(root, CacheKey(f, sh))
	if _, err := os.Stat(dir); err == nil && !rebuild {
		return dir, 0, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", 0, err
	}
	tmp, err := os.MkdirTemp(root, CacheKey(f, sh)+".building-")
	if err != nil {
		return "", 0, err
	}
	defer os.RemoveAll(tmp) // after a failure; renamed otherwise
	began := time.Now()
	if err := Build(ctx, f, sh, promtool, filepath.Join(tmp, "data"), workers); err != nil {
		return "", 0, err
	}
	took := time.Since(began)
	if err := os.RemoveAll(dir); err != nil {
		return "", 0, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", 0, err
	}
	return dir, took, nil
}
