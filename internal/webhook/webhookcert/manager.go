package webhookcert

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Poll is how often the Manager rereads the Secret when no renewal is
// due, to pick up a rotation done by another replica.
const Poll = 30 * time.Second

// retrySoon is how soon the Manager tries again after a failure (the
// webhook configuration, say, may be created after the webhook).
const retrySoon = 5 * time.Second

// conflictRetries bounds the rereads after a conflicting update.
const conflictRetries = 5

// Config says which Secret and webhook configuration a Manager keeps.
type Config struct {
	Client kubernetes.Interface
	// Namespace and Name are the Secret's.
	Namespace, Name string
	// WebhookConfiguration is the MutatingWebhookConfiguration whose
	// webhooks get the CA bundle.
	WebhookConfiguration string
	Policy               Policy
	// Log receives one line per change and per failure; never key
	// material.
	Log io.Writer
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Manager keeps the certificate material of a Secret shared by the
// webhook's replicas, serves its certificate from memory and sets the
// webhook configuration's caBundle.
type Manager struct {
	c    Config
	cert atomic.Pointer[tls.Certificate]
	// bundle is the CA bundle of the last sync, that the webhook
	// configuration should hold.
	bundle []byte
}

// New returns a Manager; call Sync once, then Run.
func New(c Config) *Manager {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return &Manager{c: c}
}

func (m *Manager) secretName() string { return m.c.Namespace + "/" + m.c.Name }

// GetCertificate returns the serving certificate of the last sync, for
// tls.Config.GetCertificate.
func (m *Manager) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := m.cert.Load(); c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("no serving certificate read from Secret %s yet", m.secretName())
}

// Sync reads the Secret, renews what is missing or due (writing it back
// with its resourceVersion; on a conflict it rereads and uses what the
// other replica wrote), takes its serving certificate, and sets the
// caBundle of the webhook configuration. It returns when to sync next. It
// fails when the Secret cannot be read or written; a failure to set the
// caBundle is logged and retried soon, since the webhook may start before
// its configuration exists.
func (m *Manager) Sync(ctx context.Context) (time.Time, error) {
	secrets := m.c.Client.CoreV1().Secrets(m.c.Namespace)
	var r Result
	for attempt := 0; ; attempt++ {
		s, err := secrets.Get(ctx, m.c.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return time.Time{}, fmt.Errorf("Secret %s does not exist: create it (type kubernetes.io/tls; it may hold empty tls.crt and tls.key) or install with the Helm chart, which does", m.secretName())
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("read Secret %s: %w%s", m.secretName(), err, rbacHint(err))
		}
		now := m.c.Now()
		r, err = m.c.Policy.Reconcile(FromData(s.Data), now)
		if err != nil {
			return time.Time{}, fmt.Errorf("Secret %s: %w", m.secretName(), err)
		}
		if len(r.Changes) == 0 {
			break
		}
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		r.Material.SetData(s.Data)
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) && attempt < conflictRetries {
			fmt.Fprintf(m.c.Log, "gpupack webhook: Secret %s was updated meanwhile (another replica?): reading it again\n", m.secretName())
			continue
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("update Secret %s: %w%s", m.secretName(), err, rbacHint(err))
		}
		for _, c := range r.Changes {
			fmt.Fprintf(m.c.Log, "gpupack webhook: Secret %s: %s\n", m.secretName(), c)
		}
		break
	}
	if err := m.take(r.Material); err != nil {
		return time.Time{}, err
	}
	next := r.NextCheck
	if err := m.setCABundle(ctx, r.Material.CABundle); err != nil {
		fmt.Fprintf(m.c.Log, "gpupack webhook: %v; trying again in %s\n", err, retrySoon)
		next = m.c.Now().Add(retrySoon)
	}
	return next, nil
}

// take makes the Secret's serving certificate the one served, saying so
// when it changes.
func (m *Manager) take(mat Material) error {
	pair, err := tls.X509KeyPair(mat.Cert, mat.Key)
	if err != nil {
		// Reconcile vouched for this pair: this is a bug, not bad input.
		return fmt.Errorf("Secret %s: the serving certificate does not load: %w", m.secretName(), err)
	}
	if old := m.cert.Load(); old == nil || !bytes.Equal(old.Certificate[0], pair.Certificate[0]) {
		fmt.Fprintf(m.c.Log, "gpupack webhook: serving the certificate of Secret %s: serial %x, valid until %s\n",
			m.secretName(), pair.Leaf.SerialNumber, pair.Leaf.NotAfter.Format(time.RFC3339))
	}
	m.cert.Store(&pair)
	return nil
}

// jsonPatchOp is one operation of an RFC 6902 JSON patch.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// setCABundle sets clientConfig.caBundle of each webhook of the
// configuration that holds another one, with a JSON patch that tests each
// webhook's name at its index and changes nothing else; it reads again
// and retries when the configuration changed meanwhile.
func (m *Manager) setCABundle(ctx context.Context, bundle []byte) error {
	configs := m.c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	name := m.c.WebhookConfiguration
	var err error
	for attempt := 0; attempt <= conflictRetries; attempt++ {
		cfg, getErr := configs.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(getErr) {
			return fmt.Errorf("MutatingWebhookConfiguration %q does not exist (the chart creates it; --ca-bundle-of names it)", name)
		}
		if getErr != nil {
			return fmt.Errorf("read MutatingWebhookConfiguration %q: %w%s", name, getErr, rbacHint(getErr))
		}
		var ops []jsonPatchOp
		for i, w := range cfg.Webhooks {
			if bytes.Equal(w.ClientConfig.CABundle, bundle) {
				continue
			}
			ops = append(ops,
				jsonPatchOp{Op: "test", Path: fmt.Sprintf("/webhooks/%d/name", i), Value: w.Name},
				jsonPatchOp{Op: "add", Path: fmt.Sprintf("/webhooks/%d/clientConfig/caBundle", i), Value: bundle})
		}
		if len(ops) == 0 {
			m.bundle = bundle
			return nil
		}
		patch, merr := json.Marshal(ops)
		if merr != nil {
			return merr
		}
		_, err = configs.Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{})
		if err == nil {
			if !bytes.Equal(m.bundle, bundle) {
				fmt.Fprintf(m.c.Log, "gpupack webhook: set the caBundle of %d webhooks of MutatingWebhookConfiguration %q\n", len(ops)/2, name)
			}
			m.bundle = bundle
			return nil
		}
		if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
			break
		}
	}
	return fmt.Errorf("set the caBundle of MutatingWebhookConfiguration %q: %w%s", name, err, rbacHint(err))
}

// Run syncs when a renewal is due and at least every Poll until ctx
// ends, starting at next (what the first Sync returned). A failed sync
// is logged and the certificate in memory kept.
func (m *Manager) Run(ctx context.Context, next time.Time) {
	for {
		wait := min(next.Sub(m.c.Now()), Poll)
		wait = max(wait, time.Second)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		n, err := m.Sync(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			fmt.Fprintf(m.c.Log, "gpupack webhook: error: %v; keeping the certificate in memory and trying again in %s\n", err, retrySoon)
			next = m.c.Now().Add(retrySoon)
		default:
			next = n
		}
	}
}

// rbacHint says what to grant when err is a refusal.
func rbacHint(err error) string {
	if !apierrors.IsForbidden(err) {
		return ""
	}
	return " (the webhook needs get and update on its Secret, and get and patch on its MutatingWebhookConfiguration: see `gpupack webhook --help`)"
}
