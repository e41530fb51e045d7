package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/usage"
)

// DefaultAddr is where Serve listens unless told otherwise: loopback only,
// so that nothing outside the machine sees the page by accident.
const DefaultAddr = "127.0.0.1:9400"

// filesPath is where the plan's files are served, by name.
const filesPath = app.PlanFilesPath

// Options configures Handler and Serve.
type Options struct {
	// Addr is the address to listen on; empty is DefaultAddr. Port 0
	// picks a free port, which Serve prints.
	Addr     string
	Provider Provider
	// Metrics serves /metrics; nil serves none (404).
	Metrics http.Handler
	// Guard, when set, wraps every route but /healthz and /readyz (which
	// the kubelet's probes ask without credentials, and which show no
	// cluster data): kubeauth.Guard lets only callers that the apiserver
	// authenticates and authorizes through. Nil serves every route to
	// anyone who reaches the address.
	Guard func(http.Handler) http.Handler
	// Changes returns the apply controller's status, shown on the page and
	// at /api/v1/changes; nil when no controller runs (404).
	Changes func() *app.ChangeStatus
	// Reclaims returns the reclaim controller's status (the demo's dry
	// run with the demo), shown on the page and at /api/v1/reclaims; nil
	// when no controller runs (404).
	Reclaims func() *app.ReclaimStatus
}

// securityHeaders go on every response: no script, style or image from
// anywhere but this server, no inline script, no framing, no sniffing.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
		"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options": "nosniff",
	"X-Frame-Options":        "DENY",
	"Referrer-Policy":        "no-referrer",
}

// Handler returns the routes of the dashboard, the API, the downloads,
// /healthz, /readyz and, when set, /metrics, behind o.Guard when set.
// Every route is read-only: other methods than GET and HEAD get 405.
func Handler(o Options) http.Handler {
	if o.Provider == nil {
		o.Provider = noProvider{}
	}
	return handler(o, newAPICache(encodeJSON))
}

// handler is Handler with the cache of the API's bodies given.
func handler(o Options, cache *apiCache) http.Handler {
	data := dataRoutes(o, cache)
	if o.Guard != nil {
		data = o.Guard(data)
	}
	health := healthRoutes(o.Provider)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range securityHeaders {
			w.Header().Set(k, v)
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, r.Method+" "+r.URL.Path+": gpupack serve is read-only; use GET")
			return
		}
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
			health.ServeHTTP(w, r)
			return
		}
		data.ServeHTTP(w, r)
	})
}

// healthRoutes serves /healthz (the process serves) and /readyz (the
// provider's data is current, or why not).
func healthRoutes(p Provider) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := p.Ready(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "not ready: "+err.Error()+"\n")
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	return mux
}

// dataRoutes serves what shows the cluster: the page, its static files,
// the API, the plan's files and /metrics when set.
func dataRoutes(o Options, cache *apiCache) http.Handler {
	page := newPage()
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) { page.serve(w, o) })
	mux.HandleFunc("/api/v1/changes", func(w http.ResponseWriter, r *http.Request) {
		serveStatus(w, "changes", o.Changes, "no apply controller runs in this server: start serve with --apply-controller")
	})
	mux.HandleFunc("/api/v1/reclaims", func(w http.ResponseWriter, r *http.Request) {
		serveStatus(w, "reclaims", o.Reclaims, "no reclaim controller runs in this server: start serve with --reclaim-controller")
	})
	mux.Handle("/static/", http.FileServerFS(staticFS))
	apiRoutes(mux, o.Provider, cache)
	mux.HandleFunc(filesPath+"{name}", func(w http.ResponseWriter, r *http.Request) { serveFile(w, r.PathValue("name"), o.Provider) })
	if o.Metrics != nil {
		mux.Handle("/metrics", o.Metrics)
	}
	return mux
}

// apiRoutes serves the view's parts as JSON under /api/v1/: 503 before the
// first view, 404 where the view lacks the part asked for. Each part of a
// view is encoded once, by the first request for it (see apiCache).
func apiRoutes(mux *http.ServeMux, p Provider, cache *apiCache) {
	api := func(name string, pick func(*app.View) (any, string)) {
		mux.HandleFunc("/api/v1/"+name, func(w http.ResponseWriter, r *http.Request) {
			v := p.View()
			if v == nil {
				writeError(w, http.StatusServiceUnavailable, "no data yet: "+notReady(p))
				return
			}
			body, missing := pick(v)
			if missing != "" {
				writeError(w, http.StatusNotFound, missing)
				return
			}
			b, err := cache.body(v, name, body)
			if err != nil {
				writeError(w, http.StatusInternalServerError, "encoding /api/v1/"+name+": "+err.Error())
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(b)
		})
	}
	api("view", func(v *app.View) (any, string) { return v, "" })
	api("report", func(v *app.View) (any, string) {
		if v.Report == nil {
			return nil, "no usage report in this view: " + v.Source + " has no accounting"
		}
		return v.Report, ""
	})
	api("hours", func(v *app.View) (any, string) { return orEmpty(v.Hours), "" })
	api("pending", func(v *app.View) (any, string) { return orEmpty(v.Pending), "" })
	api("queuewait", func(v *app.View) (any, string) {
		if v.QueueWait == nil {
			return nil, "no queue wait in this view: " + v.Source + " has no diagnosis yet"
		}
		return v.QueueWait, ""
	})
	api("health", func(v *app.View) (any, string) {
		if v.Health == nil {
			return nil, "no GPU health in this view: " + v.Source + " has not read dcgm-exporter's XID gauge (" + usage.XIDErrors + ") yet"
		}
		return v.Health, ""
	})
	api("plan", func(v *app.View) (any, string) {
		if v.Plan == nil {
			return nil, "no plan in this view: " + v.Source + " has no plan"
		}
		return v.Plan, ""
	})
}

// serveFile sends the plan's file of that name as a download.
func serveFile(w http.ResponseWriter, name string, p Provider) {
	v := p.View()
	if v == nil {
		writeError(w, http.StatusServiceUnavailable, "no data yet: "+notReady(p))
		return
	}
	for _, f := range v.PlanFiles {
		if f.Name == name {
			ctype := mime.TypeByExtension(path.Ext(name))
			if ctype == "" || strings.HasPrefix(ctype, "text/") || strings.Contains(ctype, "yaml") {
				ctype = "text/plain; charset=utf-8"
			}
			w.Header().Set("Content-Type", ctype)
			w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
			_, _ = w.Write(f.Data)
			return
		}
	}
	names := make([]string, len(v.PlanFiles))
	for i, f := range v.PlanFiles {
		names[i] = f.Name
	}
	writeError(w, http.StatusNotFound, fmt.Sprintf("no plan file %q; the plan has: %s", name, strings.Join(names, ", ")))
}

// noProvider stands in for a missing Provider: never ready, no view.
type noProvider struct{}

func (noProvider) View() *app.View { return nil }
func (noProvider) Ready() error {
	return errors.New("no data provider is configured (serve.Options.Provider is nil)")
}

// notReady is the provider's reason for not being ready, or why there is
// no view although it says it is.
func notReady(p Provider) string {
	if err := p.Ready(); err != nil {
		return err.Error()
	}
	return "the first refresh has not finished"
}

// orEmpty makes a nil list encode as [] rather than null.
func orEmpty[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}

// apiCache keeps the encoded parts of the latest view it was asked for: a
// view never changes once published (Provider.View), so each part is
// encoded once per refresh, however many requests ask for it. It holds one
// view's bodies at a time.
type apiCache struct {
	encode func(any) ([]byte, error)

	mu     sync.Mutex
	view   *app.View
	bodies map[string]*encoded
}

// encoded is one part of a view, encoded once.
type encoded struct {
	once sync.Once
	b    []byte
	err  error
}

func newAPICache(encode func(any) ([]byte, error)) *apiCache {
	return &apiCache{encode: encode}
}

// body returns part name of view v, value x, encoded, encoding it if no
// request for it has yet.
func (c *apiCache) body(v *app.View, name string, x any) ([]byte, error) {
	c.mu.Lock()
	if c.view != v {
		c.view, c.bodies = v, map[string]*encoded{}
	}
	e := c.bodies[name]
	if e == nil {
		e = &encoded{}
		c.bodies[name] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.b, e.err = c.encode(x) })
	return e.b, e.err
}

// streamer is a value that writes its own indented JSON, the bytes
// json.Encoder with a two-space indent would (usage.Report).
type streamer interface{ WriteJSON(io.Writer) error }

// encodeJSON encodes v as the CLI's --format json does: indented by two
// spaces, one trailing newline.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	if sw, ok := v.(streamer); ok {
		err := sw.WriteJSON(&buf)
		return buf.Bytes(), err
	}
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	err := enc.Encode(v)
	return buf.Bytes(), err
}

// serveStatus writes a controller's status as JSON, or 404 with absent
// when none runs; a status is bounded (app.ChangeController keeps the last
// steps and results, app.ReclaimController one round and the ledger), so
// it is encoded per request.
func serveStatus[T any](w http.ResponseWriter, name string, status func() *T, absent string) {
	if status == nil {
		writeError(w, http.StatusNotFound, absent)
		return
	}
	b, err := encodeJSON(status())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encoding /api/v1/"+name+": "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b, _ := json.Marshal(map[string]string{"error": msg})
	_, _ = w.Write(append(b, '\n'))
}

// newServer is the server of Handler(o), with bounds on what a client may
// hold: ten seconds to send its headers, which may not pass 64 KiB; a
// minute to be sent the response (the largest, a week's report of a big
// fleet, is a few MiB, encoded once per refresh); two minutes for an idle
// keep-alive connection.
func newServer(o Options) *http.Server {
	return &http.Server{
		Handler:           Handler(o),
		ReadHeaderTimeout: 10 * time.Second,
		WriteTimeout:      time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

// Serve listens on o.Addr, prints "serving gpupack on http://ADDR/" to
// stderr with the address it got, and serves Handler(o) until ctx ends,
// then stops gracefully, letting requests in flight finish for up to five
// seconds.
func Serve(ctx context.Context, o Options, stderr io.Writer) error {
	addr := o.Addr
	if addr == "" {
		addr = DefaultAddr
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--listen %s: %v; pick a free address such as %s", addr, err, DefaultAddr)
	}
	fmt.Fprintf(stderr, "serving gpupack on http://%s/\n", ln.Addr())
	srv := newServer(o)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-ctx.Done():
		case <-stop:
			return
		}
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	})
	err = srv.Serve(ln)
	close(stop)
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
