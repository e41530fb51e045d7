package webhook

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/gpupack/gpupack/plan"
)

// requestsFile is the plan's workload requests as the webhook last read
// them from path. The Deployment mounts them from an optional ConfigMap, so
// the file may be missing at start, appear later, change in place or
// vanish; each admission sees the rules of the last good read.
type requestsFile struct {
	path string
	log  io.Writer

	mu       sync.RWMutex
	requests map[string]plan.WorkloadRequest // the last good rules; nil while the file is missing
	sum      [sha256.Size]byte               // of the content last read, good or not
	read     bool                            // sum is set
	said     string                          // the last line logged, so that a poll repeats none
}

// current returns the rules in force (nil: rewrite no request). A nil
// receiver, the webhook without --requests, has none.
func (f *requestsFile) current() map[string]plan.WorkloadRequest {
	if f == nil {
		return nil
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.requests
}

// watch reads the file every interval until ctx ends. It compares content,
// not modification times: a ConfigMap update swaps the ..data symlink, and
// reading through it finds the new file whatever its times.
func (f *requestsFile) watch(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.load()
		}
	}
}

// load reads the file once and says on the log what changed: a missing
// file drops the rules (the ConfigMap was removed or not made yet); a file
// that cannot be read or parsed keeps the last good rules.
func (f *requestsFile) load() {
	data, err := os.ReadFile(f.path)
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		f.requests, f.read = nil, false
		f.say("gpupack webhook: --requests %s does not exist: no request is rewritten (only the scheduler name is set) until it appears", f.path)
		return
	case err != nil:
		f.say("gpupack webhook: error: --requests %s: %v; keeping the last good requests (%s)", f.path, err, f.describe())
		return
	}
	sum := sha256.Sum256(data)
	if f.read && sum == f.sum {
		return
	}
	f.sum, f.read = sum, true
	requests, err := plan.ParseWorkloadRequests(data)
	if err != nil {
		f.say("gpupack webhook: error: --requests %s: %v; keeping the last good requests (%s)", f.path, err, f.describe())
		return
	}
	if requests == nil {
		requests = map[string]plan.WorkloadRequest{}
	}
	f.requests = requests
	f.say("gpupack webhook: --requests %s: rewriting the requests of %d planned workloads", f.path, len(requests))
}

// describe says what the rules in force are; f.mu is held.
func (f *requestsFile) describe() string {
	if f.requests == nil {
		return "none: no request is rewritten"
	}
	return fmt.Sprintf("%d planned workloads", len(f.requests))
}

// say logs a line unless it is the one logged last; f.mu is held.
func (f *requestsFile) say(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if line == f.said {
		return
	}
	f.said = line
	fmt.Fprintln(f.log, line)
}
