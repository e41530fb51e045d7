// Package notify posts gpupack's notices to a webhook as JSON, for
// reclaim's notice to a workload's owners (a chat or paging bridge).
// It is an adapter: it imports net/http, never the application layer.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// Timeout bounds one POST; MaxAnswer is the most of the answer read.
const (
	Timeout   = 10 * time.Second
	MaxAnswer = 64 << 10
)

// Webhook posts JSON to one URL.
type Webhook struct {
	URL    string
	Client *http.Client
}

// New checks the URL (http or https with a host) and returns the webhook.
func New(raw string) (*Webhook, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--notify-webhook %q: want an http or https URL such as https://hooks.example.com/gpupack", redact(raw))
	}
	return &Webhook{URL: raw, Client: &http.Client{Timeout: Timeout}}, nil
}

// Post sends v as a JSON POST and fails on a status other than 2xx,
// naming the URL without its query or credentials.
func (w *Webhook) Post(ctx context.Context, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.Client.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %v", redact(w.URL), redactErr(err, w.URL))
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s: %.200s", redact(w.URL), resp.Status, answer)
	}
	return nil
}

// redact keeps a URL's scheme, host and path: a webhook URL's query often
// carries its token.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Scheme + "://" + u.Host + u.Path
}

func redactErr(err error, raw string) string {
	return string(bytes.ReplaceAll([]byte(err.Error()), []byte(raw), []byte(redact(raw))))
}
