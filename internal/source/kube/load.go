package kube

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/pager"

	"github.com/gpupack/gpupack/cluster"
	"github.com/gpupack/gpupack/gpu"
)

// pageSize is how many objects each list call asks for.
const pageSize = 500

// failedSchedulingSelector selects the scheduler's events about pods.
var failedSchedulingSelector = fields.Set{"reason": ReasonFailedScheduling, "involvedObject.kind": "Pod"}.AsSelector().String()

// Load lists the cluster's nodes, pods, FailedScheduling events, DRA
// objects (DeviceClasses, ResourceSlices, ResourceClaims and their
// templates), ResourceQuotas, FailedCreate events and Kueue's objects
// (when Kueue is installed) once, in parallel and in pages, and builds the State. It needs
// the verb list on each at cluster scope (deploy/rbac.yaml); an error says
// which permission is missing, or that the apiserver cannot be reached or
// rejects the credentials. A cluster that does not serve resource.k8s.io/v1
// is read without DRA, with a warning.
func Load(ctx context.Context, client kubernetes.Interface, c *gpu.Catalogue) (*State, error) {
	// Leases tell which schedulers run (servingSchedulers); a reader that
	// may not list them diagnoses without that, with a warning.
	leases := inBackground(func() (r leasesRead) {
		r.leases, r.err = listLeases(ctx, client)
		return r
	})
	// ResourceQuotas and the FailedCreate events tell which workloads a
	// GPU quota keeps from creating pods; a reader that may not list the
	// quotas diagnoses without them, with a warning.
	quotas := inBackground(func() (r quotasRead) {
		r.quotas, r.refusals, r.warnings, r.err = loadQuotas(ctx, client)
		return r
	})
	// Kueue's objects tell why Kueue's admission gate holds a pod; a
	// cluster without Kueue has none, quietly.
	kueue := inBackground(func() (r kueueRead) {
		r.kueue, r.warnings, r.err = loadKueue(ctx, client)
		return r
	})
	objs, all := listObjects(ctx, client)
	q, k := <-quotas, <-kueue
	if q.err != nil {
		all = append(all, q.err)
	}
	if k.err != nil {
		all = append(all, k.err)
	}
	if len(all) > 0 {
		return nil, explain(errors.Join(all...), server(client))
	}
	st, err := objs.build(c)
	if err == nil {
		st.Snapshot.Quotas, st.Snapshot.QuotaRefusals = q.quotas, q.refusals
		st.Warnings = append(st.Warnings, q.warnings...)
		st.Snapshot.Kueue = k.kueue
		st.Warnings = append(st.Warnings, k.warnings...)
	}
	if l := <-leases; err == nil {
		if l.err != nil {
			st.Warnings = append(st.Warnings, fmt.Sprintf("cannot list leases (coordination.k8s.io), so gpupack cannot tell which schedulers run and calls no pod no-scheduler: %v", l.err))
		} else {
			st.Snapshot.Schedulers = servingSchedulers(l.leases, objs.events, time.Now())
		}
	}
	return st, err
}

// inBackground runs read in a goroutine of its own; the channel gives its
// result once read returns.
func inBackground[T any](read func() T) <-chan T {
	out := make(chan T, 1)
	go func() { out <- read() }()
	return out
}

// leasesRead, quotasRead and kueueRead are what Load reads beside the
// objects of listObjects, each in a goroutine of its own.
type (
	leasesRead struct {
		leases []*coordinationv1.Lease
		err    error
	}
	quotasRead struct {
		quotas   []cluster.ResourceQuota
		refusals []cluster.QuotaRefusal
		warnings []string
		err      error
	}
	kueueRead struct {
		kueue    *cluster.Kueue
		warnings []string
		err      error
	}
)

// listLeases lists the Leases at cluster scope but for the kubelets'
// heartbeats (one Lease per node in kube-node-lease), which are left out at
// the apiserver: they name no scheduler, and a large cluster has thousands.
func listLeases(ctx context.Context, client kubernetes.Interface) ([]*coordinationv1.Lease, error) {
	return listAll[coordinationv1.Lease](ctx, "leases", func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return client.CoordinationV1().Leases(metav1.NamespaceAll).List(ctx, opts)
	}, metav1.ListOptions{FieldSelector: "metadata.namespace!=" + corev1.NamespaceNodeLease})
}

// listed is what listObjects lists, for the State that build builds.
type listed struct {
	nodes  []*corev1.Node
	pods   []*corev1.Pod
	events []*corev1.Event
	dra    DRAObjects
	// draUnserved: the apiserver does not serve a resource of
	// resource.k8s.io/v1, so the cluster is read without DRA.
	draUnserved bool
}

// listObjects lists the nodes, the pods, the scheduler's FailedScheduling
// events and the DRA objects, each in a goroutine of its own, and returns
// the errors of the lists that failed. A DRA resource that the apiserver
// does not serve is no error but draUnserved; DeviceTaintRules that it does
// not serve are TaintRulesUnserved.
func listObjects(ctx context.Context, client kubernetes.Interface) (*listed, []error) {
	core, res := client.CoreV1(), client.ResourceV1()
	objs := &listed{}
	lists := []func() error{
		func() (err error) {
			objs.dra.Classes, err = listAll[resourcev1.DeviceClass](ctx, "deviceclasses", func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				return res.DeviceClasses().List(ctx, opts)
			}, metav1.ListOptions{})
			return err
		},
		func() (err error) {
			objs.dra.Slices, err = listAll[resourcev1.ResourceSlice](ctx, "resourceslices", func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				return res.ResourceSlices().List(ctx, opts)
			}, metav1.ListOptions{})
			return err
		},
		func() (err error) {
			objs.dra.Claims, err = listAll[resourcev1.ResourceClaim](ctx, "resourceclaims", func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				return res.ResourceClaims(metav1.NamespaceAll).List(ctx, opts)
			}, metav1.ListOptions{})
			return err
		},
		func() (err error) {
			objs.dra.Templates, err = listAll[resourcev1.ResourceClaimTemplate](ctx, "resourceclaimtemplates", func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				return res.ResourceClaimTemplates(metav1.NamespaceAll).List(ctx, opts)
			}, metav1.ListOptions{})
			return err
		},
		func() (err error) {
			objs.dra.TaintRules, err = listAll[resourcev1.DeviceTaintRule](ctx, "devicetaintrules", func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				return res.DeviceTaintRules().List(ctx, opts)
			}, metav1.ListOptions{})
			if notServed(err) {
				// Served since Kubernetes 1.37; the other DRA objects
				// still read without them.
				objs.dra.TaintRulesUnserved = true
				return nil
			}
			return err
		},
		func() (err error) {
			objs.nodes, err = listAll[corev1.Node](ctx, "nodes", func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				return core.Nodes().List(ctx, opts)
			}, metav1.ListOptions{})
			return err
		},
		func() (err error) {
			objs.pods, err = listAll[corev1.Pod](ctx, "pods", func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				return core.Pods(metav1.NamespaceAll).List(ctx, opts)
			}, metav1.ListOptions{})
			return err
		},
		func() (err error) {
			objs.events, err = listAll[corev1.Event](ctx, "events", func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				return core.Events(metav1.NamespaceAll).List(ctx, opts)
			}, metav1.ListOptions{FieldSelector: failedSchedulingSelector})
			return err
		},
	}
	errs := make(chan error, len(lists))
	for _, list := range lists {
		go func() { errs <- list() }()
	}
	var all []error
	for range lists {
		if err := <-errs; err != nil {
			if notServed(err) {
				objs.draUnserved = true
				continue
			}
			all = append(all, err)
		}
	}
	return objs, all
}

// build builds the State of the listed objects: with their DRA objects,
// or, where the apiserver does not serve resource.k8s.io/v1, without them
// and with a warning that says so.
func (objs *listed) build(c *gpu.Catalogue) (*State, error) {
	if objs.draUnserved {
		st, err := Build(c, objs.nodes, objs.pods, objs.events)
		if err == nil {
			st.Warnings = append(st.Warnings, draNotServed)
		}
		return st, err
	}
	return BuildDRA(c, objs.nodes, objs.pods, objs.events, &objs.dra)
}

// draNotServed is the warning for a cluster without resource.k8s.io/v1.
const draNotServed = "the cluster does not serve resource.k8s.io/v1 (Kubernetes before 1.34, or DRA turned off): no DRA devices or claims are read"

// notServed reports whether err is a list of a DRA resource that the
// apiserver does not serve (404): one of Kubernetes before 1.34, or with
// DRA turned off.
func notServed(err error) bool {
	var le *listError
	return errors.As(err, &le) && le.group() == resourcev1.GroupName && apierrors.IsNotFound(le.err)
}

// listAll lists every object of a resource at cluster scope, page by page.
func listAll[T any](ctx context.Context, resource string, list pager.ListPageFunc, opts metav1.ListOptions) ([]*T, error) {
	var out []*T
	err := listEach(ctx, resource, list, opts, func(item *T) {
		out = append(out, item)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// listEach lists every object of a resource at cluster scope, page by page,
// and hands each to use. The item points into its page: to keep one
// without keeping the whole page, use keeps a copy.
func listEach[T any](ctx context.Context, resource string, list pager.ListPageFunc, opts metav1.ListOptions, use func(*T)) error {
	p := pager.New(list)
	p.PageSize = pageSize
	err := p.EachListItem(ctx, opts, func(obj runtime.Object) error {
		item, ok := obj.(any).(*T)
		if !ok {
			return fmt.Errorf("listing %s returned a %T", resource, obj)
		}
		use(item)
		return nil
	})
	if err != nil {
		return &listError{verb: "list", resource: resource, err: err}
	}
	return nil
}

// listError is a failed call, with the verb and resource it needed.
type listError struct {
	verb, resource string
	err            error
}

func (e *listError) Error() string { return fmt.Sprintf("%s %s: %v", e.verb, e.resource, e.err) }

// group is the API group of the resource.
func (e *listError) group() string {
	switch e.resource {
	case "deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates", "devicetaintrules":
		return resourcev1.GroupName
	}
	return ""
}
func (e *listError) Unwrap() error { return e.err }

// explain turns the errors of API calls into one that says what to do:
// which permission to grant, which credentials to renew, which server could
// not be reached.
func explain(err error, server string) error {
	var missing []string
	var lerrs []*listError
	collect(err, &lerrs)
	for _, le := range lerrs {
		switch {
		case apierrors.IsForbidden(le.err):
			missing = append(missing, fmt.Sprintf("verb %q on resource %q (API group %q, cluster scope)", le.verb, le.resource, le.group()))
		case apierrors.IsUnauthorized(le.err):
			return fmt.Errorf("the apiserver at %s rejected gpupack's credentials (401 Unauthorized): the token or client certificate is invalid or expired; renew the credentials of the kubeconfig's user: %w", server, le.err)
		case unreachable(le.err):
			return fmt.Errorf("cannot reach the apiserver at %s: check the kubeconfig's server address and context, that the cluster is up and that this machine can connect to it: %w", server, le.err)
		}
	}
	if len(missing) > 0 {
		msg := "gpupack is not allowed to read the cluster; grant its user or ServiceAccount"
		for _, m := range missing {
			msg += "\n  " + m
		}
		return fmt.Errorf("%s\n(deploy/rbac.yaml is a read-only ClusterRole with exactly these): %w", msg, err)
	}
	return err
}

// collect gathers the listErrors in err, a listError or several joined.
func collect(err error, out *[]*listError) {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			collect(e, out)
		}
		return
	}
	var le *listError
	if errors.As(err, &le) {
		*out = append(*out, le)
	}
}

// unreachable reports whether err is a failure to connect rather than an
// answer from the apiserver.
func unreachable(err error) bool {
	var urlErr *url.Error
	var netErr net.Error
	var opErr *net.OpError
	return errors.As(err, &opErr) || (errors.As(err, &urlErr) && errors.As(err, &netErr)) || errors.Is(err, context.DeadlineExceeded)
}

// server is the apiserver's address, for messages; "(unknown)" for a client
// without one, such as client-go's fake, whose RESTClient is a nil pointer.
func server(client kubernetes.Interface) string {
	if rc, ok := client.CoreV1().RESTClient().(*rest.RESTClient); ok && rc != nil {
		if u := rc.Get().URL(); u != nil {
			return u.Scheme + "://" + u.Host
		}
	}
	return "(unknown)"
}
