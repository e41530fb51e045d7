// Package kubeauth lets a request to gpupack serve through only when the
// Kubernetes apiserver says so, as kube-rbac-proxy does in front of
// kube-state-metrics: the caller's bearer token must pass a TokenReview,
// and a SubjectAccessReview must allow its user what the route shows.
//
// It builds on k8s.io/apiserver's delegating authenticator and authorizer
// (what kube-rbac-proxy and controller-runtime's metrics filter use; they
// cache answers: a token for a minute, an allowed request for five, a
// denied one for thirty seconds), not on controller-runtime's
// filters.WithAuthenticationAndAuthorization, for two reasons. That
// filter authorizes every route by its path as a nonResourceURL, and
// Kubernetes' default RBAC lets every authenticated user get /api/* (the
// system:discovery role), which would open serve's JSON API to any token;
// and it answers an unknown token with 500 instead of 401. Here the page,
// the static files, the API and the plan's files ask for get on the
// services/proxy subresource of serve's own Service (what reaching it
// through the apiserver's proxy needs: a namespaced right, given by a
// Role), and /metrics for get on the nonResourceURL /metrics (what
// Prometheus' scrape role holds). It is an edge: serve's wiring calls it.
package kubeauth

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// MetricsPath is the route authorized as a nonResourceURL.
const MetricsPath = "/metrics"

// Service names the Service whose services/proxy subresource a caller
// must be allowed to get to read the page, the API and the plan's files.
type Service struct {
	Namespace, Name string
}

// backoff retries a review that failed to reach the apiserver, as
// k8s.io/apiserver's options.DefaultAuthWebhookRetryBackoff does.
var backoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// Guard returns the wrapper that lets a request through to the handler
// only for a bearer token that the apiserver of cfg accepts and whose
// user may read the route (see the package doc). It answers 401 without
// a valid token, 403 without the right, and 503 when the apiserver
// cannot be asked. The identity of cfg needs create on
// authentication.k8s.io tokenreviews and authorization.k8s.io
// subjectaccessreviews (the system:auth-delegator ClusterRole). log
// receives the reviews that failed and the refusals.
func Guard(cfg *rest.Config, svc Service, log *slog.Logger) (func(http.Handler) http.Handler, error) {
	if svc.Namespace == "" || svc.Name == "" {
		return nil, fmt.Errorf("the Service whose services/proxy a caller must be allowed to get: want NAMESPACE/NAME, have %q/%q", svc.Namespace, svc.Name)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("the apiserver's client for TokenReviews and SubjectAccessReviews: %w", err)
	}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                &apiserver.AnonymousAuthConfig{Enabled: false},
		TokenAccessReviewClient:  client.AuthenticationV1(),
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      &backoff,
		CacheTTL:                 time.Minute,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("the TokenReview authenticator: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: client.AuthorizationV1(),
		AllowCacheTTL:             5 * time.Minute,
		DenyCacheTTL:              30 * time.Second,
		WebhookRetryBackoff:       &backoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("the SubjectAccessReview authorizer: %w", err)
	}
	g := &guard{authn: authn, authz: authz, svc: svc, log: log}
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { g.serve(w, r, h) })
	}, nil
}

type guard struct {
	authn authenticator.Request
	authz authorizer.Authorizer
	svc   Service
	log   *slog.Logger
}

// serve answers r with h when the caller may read it, else with why not.
func (g *guard) serve(w http.ResponseWriter, r *http.Request, h http.Handler) {
	res, ok, err := g.authn.AuthenticateRequest(r)
	if !ok {
		// An unknown or expired token comes back as an error too; both
		// are the caller's to fix, and the log says which.
		if err != nil {
			g.log.Info("refused a caller", "path", r.URL.Path, "reason", err.Error())
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="gpupack"`)
		http.Error(w, "Unauthorized: send a Kubernetes bearer token (Authorization: Bearer ...) that the apiserver accepts", http.StatusUnauthorized)
		return
	}
	attrs := g.attributes(res.User, r)
	decision, reason, err := g.authz.Authorize(r.Context(), attrs)
	switch {
	case err != nil && decision != authorizer.DecisionAllow:
		g.log.Error("could not ask the apiserver whether a caller may read", "user", res.User.GetName(), "path", r.URL.Path, "err", err)
		http.Error(w, "the apiserver could not be asked whether you may read this: "+err.Error(), http.StatusServiceUnavailable)
	case decision != authorizer.DecisionAllow:
		g.log.Info("forbade a caller", "user", res.User.GetName(), "path", r.URL.Path, "reason", reason)
		http.Error(w, fmt.Sprintf("Forbidden: %s may not %s", res.User.GetName(), describe(attrs)), http.StatusForbidden)
	default:
		h.ServeHTTP(w, r)
	}
}

// attributes is what the caller must be allowed for r: get on the
// nonResourceURL /metrics for /metrics, else get on services/proxy of
// the Service.
func (g *guard) attributes(u user.Info, r *http.Request) authorizer.AttributesRecord {
	if r.URL.Path == MetricsPath {
		return authorizer.AttributesRecord{User: u, Verb: "get", Path: MetricsPath}
	}
	return authorizer.AttributesRecord{User: u, Verb: "get", Namespace: g.svc.Namespace, APIVersion: "v1",
		Resource: "services", Subresource: "proxy", Name: g.svc.Name, ResourceRequest: true}
}

// describe says what attrs asks for, as a Forbidden answer names it.
func describe(a authorizer.AttributesRecord) string {
	if !a.ResourceRequest {
		return a.Verb + " the nonResourceURL " + a.Path
	}
	return fmt.Sprintf("%s %s/%s %s in namespace %s", a.Verb, a.Resource, a.Subresource, a.Name, a.Namespace)
}
