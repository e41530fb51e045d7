// Package placement owns the one function that decides whether a pod fits a
// node, which GPUs, MIG slice or replicas it would take, and why not when it
// does not (structured reasons in the spirit of the kube-scheduler's
// InsufficientResource). The simulator, the diagnosis, the planner and the
// scheduler plugin all call Fit; only the edges format its reasons.
//
// The rules that read other nodes' pods (topology spread constraints,
// required pod affinity and anti-affinity, and the anti-affinity of the
// pods already bound) are computed once per pod by Demand.PreFilter over
// every node's state, as the kube-scheduler's PreFilter does, and Fit then
// checks each node against them; a demand that was not prefiltered is
// judged without them.
//
// It also holds the scoring policies (random, firstfit, bestfit, dotprod,
// gpupacking, gpuclustering, fgd and gpupack's own), each a small type
// behind the Policy interface.
//
// placement is a pure package: it must not import client-go, net/http or
// any CLI library.
package placement
