// Package reclaimflag registers the flags that `gpupack reclaim`,
// `gpupack restore` and `serve --reclaim-controller` share: where the
// ledger lives, the notice webhook, and who acts; and makes the
// Kubernetes actuator from them.
package reclaimflag

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"

	actuator "github.com/gpupack/gpupack/internal/actuator/kube"
	"github.com/gpupack/gpupack/internal/actuator/notify"
	"github.com/gpupack/gpupack/internal/app"
	"github.com/gpupack/gpupack/internal/source/kube"
)

// DefaultLedger is where the ledger ConfigMap lives by default: the
// chart's namespace and name.
const DefaultLedger = "gpupack/gpupack-reclaim-ledger"

// Flags are the flags' values.
type Flags struct {
	Ledger  string
	Webhook string
	// WebhookFile holds the webhook's URL (a mounted Secret), read again
	// for every notice, so that its token never shows in the arguments.
	WebhookFile string
	By          string
}

// Add registers --ledger and --notify-webhook (and, with who, the flag
// named who for the person acting).
func Add(f *pflag.FlagSet, o *Flags, who string) {
	f.StringVar(&o.Ledger, "ledger", DefaultLedger, "NAMESPACE/NAME of the ConfigMap that holds the reclaim ledger (one record per action: what changed, what to put back, the saving predicted)")
	if who != "" {
		f.StringVar(&o.By, who, "", "who acts, for the ledger and Events (default: the local user)")
	}
}

// AddWebhook registers --notify-webhook and --notify-webhook-file.
func AddWebhook(f *pflag.FlagSet, o *Flags) {
	f.StringVar(&o.Webhook, "notify-webhook", "", "also POST each notice as JSON (the candidate, its evidence, the deadline, how to snooze or exempt) to this URL")
	f.StringVar(&o.WebhookFile, "notify-webhook-file", "", "as --notify-webhook, the URL read from this file (a mounted Secret: a URL's token stays out of the arguments), again for every notice")
}

// Who is --approved-by or --restored-by, else the local user.
func (o *Flags) Who() string {
	if o.By != "" {
		return o.By
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "unknown"
}

// Actuator makes the Kubernetes actuator for reclaim.
func (o *Flags) Actuator(client kubernetes.Interface, component string) (*actuator.Reclaimer, error) {
	ns, name, ok := strings.Cut(o.Ledger, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("--ledger %q: want NAMESPACE/NAME of a ConfigMap, such as %s", o.Ledger, DefaultLedger)
	}
	dyn, err := kube.Dynamic(client)
	if err != nil {
		return nil, err
	}
	return &actuator.Reclaimer{Client: client, Dynamic: dyn, LedgerNamespace: ns, LedgerName: name, Component: component}, nil
}

// Notifier is the webhook as app.ReclaimOptions wants it; nil without
// --notify-webhook or --notify-webhook-file. The file is read now, to
// refuse a bad URL at once, and again for every notice.
func (o *Flags) Notifier() (func(context.Context, app.Notification) error, error) {
	switch {
	case o.Webhook != "" && o.WebhookFile != "":
		return nil, fmt.Errorf("--notify-webhook and --notify-webhook-file exclude each other; give one")
	case o.WebhookFile != "":
		if _, err := o.fileWebhook(); err != nil {
			return nil, err
		}
		return func(ctx context.Context, n app.Notification) error {
			w, err := o.fileWebhook()
			if err != nil {
				return err
			}
			return w.Post(ctx, n)
		}, nil
	case o.Webhook == "":
		return nil, nil
	}
	w, err := notify.New(o.Webhook)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, n app.Notification) error { return w.Post(ctx, n) }, nil
}

// fileWebhook reads the URL of --notify-webhook-file; its content never
// shows in an error.
func (o *Flags) fileWebhook() (*notify.Webhook, error) {
	b, err := os.ReadFile(o.WebhookFile)
	if err != nil {
		return nil, fmt.Errorf("--notify-webhook-file: %w", err)
	}
	w, err := notify.New(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("--notify-webhook-file %s: want one http or https URL such as https://hooks.example.com/gpupack", o.WebhookFile)
	}
	return w, nil
}
