// Package operator is a stand-in for the node agents of NVIDIA's GPU
// operator that gpupack drives through node labels: mig-manager, which
// re-partitions MIG when nvidia.com/mig.config changes, and the device
// plugin with GPU feature discovery, which re-advertise GPUs when
// nvidia.com/device-plugin.config changes. It exists for tests and demos,
// because no GPU runs where they do: it watches the nodes of a real
// apiserver with client-go informers, reads the same ConfigMaps in the same
// formats, walks mig-manager's states in nvidia.com/mig.config.state, and
// rewrites each node's capacity and allocatable as the kubelet would once
// the device plugin re-registers. kwok, which runs the test cluster's
// nodes, leaves the GPU resources it finds in a node's status alone.
//
// Faults set per node make it misbehave as the real agents are known to:
// fail a change, wedge in pending with the GPU agents paused and no GPU
// advertised (NVIDIA/gpu-operator issue 2833), take long, or reboot. A
// GPU pod still running on the node fails a MIG change, as mig-parted
// fails on GPUs in use (NVIDIA/mig-parted issue 119).
//
// operator is an edge: it imports client-go. Only tests and demos use it.
package operator
