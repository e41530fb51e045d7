// Package kube reads a live Kubernetes cluster into gpupack's view of it: a
// cluster.Snapshot of the GPU nodes and pods, plus what a snapshot has no room
// for (the kube-scheduler's last FailedScheduling message of each pending pod,
// and the loader's warnings). Load lists the objects once, for the CLI;
// Watcher keeps a current view from shared informers, for long-running edges
// such as the scheduler plugin. Build converts objects already in hand and is
// where every mapping rule lives:
//
//   - GPUs come from a node's allocatable nvidia.com/gpu and
//     nvidia.com/mig-<profile>, as the scheduler counts them, and their model,
//     memory and sharing from GPU feature discovery's labels
//     (nvidia.com/gpu.product, .memory, .count, .replicas, .sharing-strategy,
//     nvidia.com/mig.strategy, .config). A product the catalogue does not
//     list still counts, as an unlisted model (gpu.Catalogue.Unlisted) named
//     by the label, with the memory of nvidia.com/gpu.memory, and a warning
//     says that its price and MIG geometry are unknown.
//   - Without GPU feature discovery (cloud.go): the model, and where a label
//     says so the count, come from the labels the managed clouds set: GKE's
//     cloud.google.com/gke-accelerator (with gke-accelerator-count,
//     gke-gpu-sharing-strategy,
//     gke-max-shared-clients-per-gpu and gke-gpu-partition-size for
//     time-sharing, MPS and MIG partitions), EKS Auto Mode's and Karpenter's
//     instance-gpu-name/-count/-memory, k8s.amazonaws.com/accelerator, and
//     node.kubernetes.io/instance-type for the common GPU instance types of
//     AWS, Google Cloud and Azure; an instance type is preferred to the
//     hand-set k8s.amazonaws.com/accelerator, and GKE's
//     gke-accelerator-count gives the count. A warning names what was
//     inferred. A node that advertises GPUs no label names keeps them, as
//     the unlisted model UnknownNVIDIAModel with unknown memory, with a
//     warning.
//   - Time-slicing and MPS: allocatable nvidia.com/gpu is GPUs x replicas, so
//     the node has allocatable/replicas GPUs with Replicas each. Under the
//     device plugin's renameByDefault the replicas are nvidia.com/gpu.shared
//     instead: such GPUs (cluster.GPU.SharedResource) serve only pods that
//     ask for nvidia.com/gpu.shared, and pods asking for it get only them.
//   - MIG, mixed strategy: the per-profile counts of the whole node are laid
//     out on its MIG GPUs (nvidia.com/gpu.count less the whole GPUs still
//     advertised as nvidia.com/gpu) by first-fit decreasing, each GPU's set
//     checked with gpu.MIGGeometry.Fit. Instances that fit no GPU are left
//     out with a warning naming them, so the snapshot may offer fewer slices
//     than the node advertises, never more.
//   - MIG, single strategy: each nvidia.com/gpu is one MIG device, so each is
//     an exclusive GPU with the profile's memory, as the scheduler sees it.
//   - Pods: requests, with limits standing in for missing requests as the
//     apiserver defaults them; containers summed, init containers by their
//     maximum, sidecars and pod overhead added. nvidia.com/gpu: 0 is no GPU;
//     other extended resources are ignored. The annotation
//     gpupack.io/gpu-memory states the VRAM a pod needs on each GPU, which
//     counts against time-sliced GPUs (they do not partition VRAM). The
//     annotation gpupack.io/gpu-devices (wellknown.AnnotationGPUDevices),
//     which gpupack-scheduler writes, gives a bound pod's devices; the
//     snapshot keeps them as cluster.Pod.Devices, and placement.RebuildNode
//     takes them unless they conflict. Succeeded and Failed pods hold
//     nothing and are skipped.
//   - Dynamic Resource Allocation (dra.go, BuildDRA): the devices that
//     ResourceSlices of NVIDIA's DRA driver (gpu.nvidia.com) offer on a node
//     join its GPUs after the device plugin's, each with its DRA identity
//     (cluster.DRADevice) and the DeviceClasses whose CEL selectors select
//     it (the upstream evaluator, k8s.io/dynamic-resource-allocation/cel):
//     whole GPUs (type gpu), MIG devices (type mig) as the slices of their
//     parent GPU. Only the current generation of each pool counts. A pod's
//     claims (spec.resourceClaims, the names in status.resourceClaimStatuses,
//     status.extendedResourceClaimStatus) become cluster.Pod.Claims; their
//     allocation gives a bound pod its request and Devices, and a pending
//     pod whose claims' classes select GPUs asks for them. Device taints,
//     shared counters, consumable capacity and devices not local to one
//     node are named in warnings. Other drivers' devices (NICs) are not
//     GPUs: those a claim's request accepts are read
//     (cluster.ClaimRequest.Others) only for the claim's constraints
//     (matchAttribute resource.kubernetes.io/numaNode across a GPU and a
//     NIC).
//   - Start-up (startup.go, LoadStartup): for each bound GPU pod, its
//     creation, the PodScheduled, ContainersReady and Ready conditions'
//     transitions to True, the latest start of its app containers, the
//     kubelet's Pulled events (ParsePulled reads the pull's time, the wait
//     and the image size, or that the image was present) and where its
//     model weights come from (usage.ClassifyModelStorage of its volumes
//     and mounts, with the storage classes of its claims), as
//     usage.PodEvents.
//
// kube is an edge package: it imports client-go. The core packages (cluster,
// placement, diagnose, ...) must never import it.
package kube
