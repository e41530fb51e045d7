package operator

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/gpupack/gpupack/api/gpuoperator"
	"github.com/gpupack/gpupack/gpu"
	"github.com/gpupack/gpupack/plan"
)

// Outcome is how a node's MIG changes end.
type Outcome int

const (
	// Succeed applies the configuration: success, or failed when it is
	// unknown, does not fit the node's GPUs, or a GPU pod runs there.
	Succeed Outcome = iota
	// Fail ends every change in failed after pending, as mig-manager does
	// when mig-parted cannot apply a configuration (a GPU that does not
	// reset, a driver client that holds it), with the agents restored.
	Fail
	// Wedge leaves every change in pending with the GPU agents'
	// deploy labels at paused-for-mig-change and no GPU advertised, as
	// mig-manager does when shutting the agents down fails: it returns
	// without a state and waits for a label change that never comes
	// (NVIDIA/gpu-operator issue 2833).
	Wedge
)

// Fault is how the stand-in misbehaves on one node's MIG changes. Its zero
// value behaves.
type Fault struct {
	Outcome Outcome
	// Delay is how long a change stays pending (and, with Reboot,
	// rebooting) before it ends, or until SetFault changes the node's
	// fault: the change then goes on with the new fault's Outcome. A test
	// holds a change pending for as long as it needs with a long Delay.
	Delay time.Duration
	// Reboot passes the change through rebooting and back to pending, as
	// mig-manager does when a GPU's MIG mode changes only with a reboot
	// (WITH_REBOOT).
	Reboot bool
}

// Options configures the stand-in. The zero value reads the ConfigMaps
// where the GPU operator and gpupack's plan put them.
type Options struct {
	// Namespace holds both ConfigMaps; "" means gpu-operator.
	Namespace string
	// MIGPartedConfigMap holds the mig-parted configuration file under
	// config.yaml; "" means default-mig-parted-config.
	MIGPartedConfigMap string
	// DevicePluginConfigMap holds one device plugin configuration per key,
	// the key being the name nvidia.com/device-plugin.config selects; ""
	// means the plan's (gpupack-device-plugin-configs).
	DevicePluginConfigMap string
	// Catalogue resolves a node's nvidia.com/gpu.product to its model and
	// MIG geometry; nil means gpu.Default().
	Catalogue *gpu.Catalogue
	// Faults are the nodes' faults by node name, until SetFault changes
	// them.
	Faults map[string]Fault
	// Logf, when set, gets a line for each change and each failure.
	Logf func(format string, args ...any)
}

// workers is how many nodes change at once: a slow node does not hold up
// the others, as each node has its own mig-manager.
const workers = 8

// Operator is the stand-in for mig-manager and the device plugin on every
// node that has nvidia.com/gpu.count. Create it with New and start it with
// Run.
type Operator struct {
	client  kubernetes.Interface
	opts    Options
	queue   workqueue.TypedRateLimitingInterface[string]
	started chan struct{}
	lister  corelisters.NodeLister

	mu       sync.Mutex
	nodes    map[string]*nodeState
	faults   map[string]Fault
	failures map[string]error
	// faultSet is closed, and replaced, when a node's fault is set, to
	// end the delay of its change.
	faultSet map[string]chan struct{}
	// delayed holds the nodes whose change waits out its fault's delay.
	delayed map[string]bool
}

// New returns a stand-in that acts on the cluster through client.
func New(client kubernetes.Interface, opts Options) *Operator {
	if opts.Namespace == "" {
		opts.Namespace = gpuoperator.OperatorNamespace
	}
	if opts.MIGPartedConfigMap == "" {
		opts.MIGPartedConfigMap = gpuoperator.MIGPartedConfigMapName
	}
	if opts.DevicePluginConfigMap == "" {
		opts.DevicePluginConfigMap = plan.ConfigMapName
	}
	if opts.Catalogue == nil {
		opts.Catalogue = gpu.Default()
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	faults := map[string]Fault{}
	for name, f := range opts.Faults {
		faults[name] = f
	}
	return &Operator{
		client:   client,
		opts:     opts,
		queue:    workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		started:  make(chan struct{}),
		nodes:    map[string]*nodeState{},
		faults:   faults,
		failures: map[string]error{},
		faultSet: map[string]chan struct{}{},
		delayed:  map[string]bool{},
	}
}

// Run watches the nodes and acts on their label changes until ctx ends.
// A node's labels as the stand-in first sees them, when Run starts or the
// node is created, are taken as applied, and its GPU resources as what
// they give: unlike the real agents, which apply the labels they find when
// they start, it acts only on changes. So a test starts it, or waits for
// Seen, before it changes a node's labels.
func (o *Operator) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactory(o.client, 0)
	nodes := factory.Core().V1().Nodes()
	o.lister = nodes.Lister()
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.observe(obj) },
		UpdateFunc: func(_, obj any) { o.observe(obj) },
		DeleteFunc: func(obj any) { o.forget(obj) },
	}); err != nil {
		return fmt.Errorf("gpu operator stand-in: watch nodes: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), nodes.Informer().HasSynced) {
		return fmt.Errorf("gpu operator stand-in: nodes not listed before the end: %w", ctx.Err())
	}
	close(o.started)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for o.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	o.queue.ShutDown()
	wg.Wait()
	return nil
}

// Started is closed once Run has seen every node that existed when it
// started.
func (o *Operator) Started() <-chan struct{} { return o.started }

// Seen reports whether the stand-in has seen the GPU node name, so that a
// label change from now on is acted on.
func (o *Operator) Seen(name string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.nodes[name]
	return ok
}

// SetFault sets the fault of node name for its next MIG changes, and ends
// the delay of the change it is in, if any, which goes on with f's
// Outcome.
func (o *Operator) SetFault(name string, f Fault) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.faults[name] = f
	if ch, ok := o.faultSet[name]; ok {
		close(ch)
		delete(o.faultSet, name)
	}
}

// Delayed reports whether a change of node name is waiting out its
// fault's Delay, pending or rebooting: a test that holds a change with a
// long Delay waits for this before it looks, then ends the delay with
// SetFault.
func (o *Operator) Delayed(name string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.delayed[name]
}

// fault returns the fault of node name, and a channel closed when it is
// set again.
func (o *Operator) fault(name string) (Fault, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	ch, ok := o.faultSet[name]
	if !ok {
		ch = make(chan struct{})
		o.faultSet[name] = ch
	}
	return o.faults[name], ch
}

// LastFailure returns why the last change of node name failed, or nil if
// it did not: what mig-manager or the device plugin would have logged.
func (o *Operator) LastFailure(name string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.failures[name]
}

// observe records a GPU node the first time it is seen, and queues it when
// its labels ask for a change.
func (o *Operator) observe(obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	o.mu.Lock()
	st, known := o.nodes[node.Name]
	if !known {
		st, ok = seed(node, o.opts.Catalogue)
		if ok {
			o.nodes[node.Name] = st
		}
	}
	asked := st != nil && st.asked(node)
	o.mu.Unlock()
	if asked {
		o.queue.Add(node.Name)
	}
}

// forget drops a deleted node.
func (o *Operator) forget(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if node, ok := obj.(*corev1.Node); ok {
		o.mu.Lock()
		delete(o.nodes, node.Name)
		o.mu.Unlock()
	}
}

// next processes one queued node; it returns false once the queue is shut
// down.
func (o *Operator) next(ctx context.Context) bool {
	name, shutdown := o.queue.Get()
	if shutdown {
		return false
	}
	defer o.queue.Done(name)
	if err := o.reconcile(ctx, name); err != nil {
		if ctx.Err() == nil {
			o.opts.Logf("gpu operator stand-in: node %s: %v (retrying)", name, err)
			o.queue.AddRateLimited(name)
		}
		return true
	}
	o.queue.Forget(name)
	return true
}

// reconcile acts on the labels of node name that differ from those it last
// acted on: the MIG configuration first, then the device plugin's. It
// returns an error only when the apiserver failed it, to be retried.
func (o *Operator) reconcile(ctx context.Context, name string) error {
	node, err := o.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	o.mu.Lock()
	st, ok := o.nodes[name]
	var snapshot nodeState
	if ok {
		snapshot = *st
	}
	o.mu.Unlock()
	if !ok {
		return nil
	}
	if value := node.Labels[gpuoperator.MIGConfigLabel]; value != snapshot.migConfig {
		devices, err := o.changeMIG(ctx, node, &snapshot, value)
		if err != nil {
			return err
		}
		o.update(name, func(st *nodeState) { st.migConfig, st.devices = value, devices })
		snapshot.devices = devices
		if node, err = o.lister.Get(name); err != nil {
			return err
		}
	}
	if value := node.Labels[gpuoperator.DevicePluginConfigLabel]; value != snapshot.pluginConfig {
		sharing, err := o.changeDevicePlugin(ctx, node, &snapshot, value)
		if err != nil {
			return err
		}
		o.update(name, func(st *nodeState) { st.pluginConfig, st.sharing = value, sharing })
	}
	return nil
}

// update changes the recorded state of node name, if it is still known.
func (o *Operator) update(name string, change func(*nodeState)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if st, ok := o.nodes[name]; ok {
		change(st)
	}
}

// recordFailure keeps why a change of node name failed (nil: it did not),
// and logs it.
func (o *Operator) recordFailure(name string, err error) {
	o.mu.Lock()
	o.failures[name] = err
	o.mu.Unlock()
	if err != nil {
		o.opts.Logf("gpu operator stand-in: node %s: %v", name, err)
	}
}

// delay waits the delay of the fault of node name, or less if ctx ends or
// the fault is set again first, and returns the fault then in force.
func (o *Operator) delay(ctx context.Context, name string) (Fault, error) {
	fault, set := o.fault(name)
	if fault.Delay <= 0 {
		return fault, nil
	}
	t := time.NewTimer(fault.Delay)
	defer t.Stop()
	o.setDelayed(name, true)
	defer o.setDelayed(name, false)
	select {
	case <-ctx.Done():
		return fault, ctx.Err()
	case <-set:
	case <-t.C:
	}
	fault, _ = o.fault(name)
	return fault, nil
}

func (o *Operator) setDelayed(name string, on bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.delayed[name] = on
}
