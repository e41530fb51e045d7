package kube

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpupack/gpupack/gpu"
)

// Labels the managed clouds set on GPU nodes themselves, read when GPU
// feature discovery has not labelled a node.
const (
	// GKE: cloud.google.com/gke-accelerator from
	// https://docs.cloud.google.com/kubernetes-engine/docs/how-to/gpus
	// ("Consuming multiple GPU types"); the sharing and partition labels
	// from the time-sharing, NVIDIA MPS and multi-instance GPU how-to pages
	// (.../how-to/timesharing-gpus, .../nvidia-mps-gpus, .../gpus-multi).
	LabelGKEAccelerator = "cloud.google.com/gke-accelerator"
	// The GPUs of one node, which GKE sets beside gke-accelerator (and on
	// TPU nodes, the chips); workloads select on it in their nodeSelector.
	LabelGKEAcceleratorCount   = "cloud.google.com/gke-accelerator-count"
	LabelGKEGPUSharingStrategy = "cloud.google.com/gke-gpu-sharing-strategy" // time-sharing or mps
	LabelGKEMaxSharedClients   = "cloud.google.com/gke-max-shared-clients-per-gpu"
	LabelGKEGPUPartitionSize   = "cloud.google.com/gke-gpu-partition-size" // a MIG profile, e.g. 1g.5gb
	// Karpenter on AWS: github.com/aws/karpenter-provider-aws,
	// pkg/apis/v1/labels.go (LabelInstanceGPUName, ...Count, ...Memory).
	LabelKarpenterGPUName   = "karpenter.k8s.aws/instance-gpu-name" // e.g. a100
	LabelKarpenterGPUCount  = "karpenter.k8s.aws/instance-gpu-count"
	LabelKarpenterGPUMemory = "karpenter.k8s.aws/instance-gpu-memory" // MiB per GPU
	// EKS Auto Mode: https://docs.aws.amazon.com/eks/latest/userguide/create-node-pool.html
	// (its table of labels: name t4, count 1, memory 16384
	// MiB, the values Karpenter gives the same instance).
	LabelEKSAutoGPUName   = "eks.amazonaws.com/instance-gpu-name"
	LabelEKSAutoGPUCount  = "eks.amazonaws.com/instance-gpu-count"
	LabelEKSAutoGPUMemory = "eks.amazonaws.com/instance-gpu-memory"
	// The label cluster-autoscaler's AWS provider reads as a GPU node's type
	// (github.com/kubernetes/autoscaler, cluster-autoscaler/cloudprovider/aws/
	// aws_cloud_provider.go, GPULabel; values such as nvidia-tesla-v100,
	// nvidia-a10g, nvidia-l4, nvidia-l40s). EKS does not set it: node group
	// owners do, so it is read after the labels EKS and Karpenter set.
	LabelAWSAccelerator = "k8s.amazonaws.com/accelerator"
	// AKS nodes are read by their VM size, the value of the well-known
	// instance-type label (no AKS label naming the GPU model was found).
	LabelInstanceType = "node.kubernetes.io/instance-type"
)

// gkeAccelerators maps GKE's accelerator names (the value of
// cloud.google.com/gke-accelerator, which is the Compute Engine accelerator
// type) to catalogue models. Source: Compute Engine "GPU machine types"
// (https://docs.cloud.google.com/compute/docs/gpus, updated 2026-04-14) and
// GKE "Run GPUs in GKE Standard node pools" (.../kubernetes-engine/docs/
// how-to/gpus, updated 2026-04-08): nvidia-tesla-a100 is the A100 40GB of
// A2 Standard, nvidia-a100-80gb the A100 80GB of A2 Ultra, N1's V100 has
// 16 GB. Not mapped, as the catalogue has no such model: nvidia-gb300,
// nvidia-tesla-p4, nvidia-tesla-k80 (they become unlisted models).
var gkeAccelerators = map[string]string{
	"nvidia-tesla-t4":       "T4",
	"nvidia-tesla-p100":     "P100",
	"nvidia-tesla-v100":     "V100-16GB",
	"nvidia-l4":             "L4",
	"nvidia-tesla-a100":     "A100-40GB",
	"nvidia-a100-80gb":      "A100-80GB",
	"nvidia-h100-80gb":      "H100-80GB",
	"nvidia-h100-mega-80gb": "H100-80GB",
	"nvidia-h200-141gb":     "H200-141GB",
	"nvidia-b200":           "B200",
	"nvidia-gb200":          "GB200",
	"nvidia-rtx-pro-6000":   "RTX-PRO-6000",
}

// karpenterGPUs maps the GPU names Karpenter and EKS Auto Mode put in their
// instance-gpu-name labels to catalogue models, for the names the catalogue
// does not resolve by itself (a100 with 81920 MiB is A100-80GB, h100 is
// H100-80GB, and so on without help). Source: Karpenter's generated instance
// type reference (github.com/aws/karpenter-provider-aws,
// website/content/en/preview/reference/instance-types.md): g7e instances
// carry rtx-pro-server-6000 with 98304 MiB, the RTX PRO 6000 Blackwell
// Server Edition.
var karpenterGPUs = map[string]string{
	"rtx-pro-server-6000": "RTX-PRO-6000",
}

// instanceGPU is a cloud instance type's GPU model and GPUs per instance.
type instanceGPU struct {
	model string
	count int
}

// instanceGPUs maps a cloud instance type (node.kubernetes.io/instance-type)
// to its GPU model and GPUs per instance, for the instance types whose
// whole GPUs are of a model the catalogue lists. Instance types with a
// fraction of a GPU (AWS g6f, gr6f; Google Cloud g4-standard-6/12/24; Azure
// NCads A10 v4, NVads A10 v5) and GPUs the catalogue lacks (B300/GB300, RTX
// PRO 4500, T4G, AMD) are left out.
var instanceGPUs = map[string]instanceGPU{
	// AWS. Source: Karpenter's instance type reference, generated from the
	// EC2 API (github.com/aws/karpenter-provider-aws,
	// website/content/en/preview/reference/instance-types.md at commit
	// 692ccdd, labels karpenter.k8s.aws/instance-gpu-name/-count/-memory);
	// p3, which that reference does not list, from website/content/en/
	// v1.0/reference/instance-types.md of the same repository (v100,
	// 16384 MiB).
	// P3: V100 16 GB; P3dn: V100 32 GB.
	"p3.2xlarge": {"V100-16GB", 1}, "p3.8xlarge": {"V100-16GB", 4}, "p3.16xlarge": {"V100-16GB", 8},
	"p3dn.24xlarge": {"V100-32GB", 8},
	// P4d: A100 40960 MiB; P4de: A100 81920 MiB.
	"p4d.24xlarge": {"A100-40GB", 8}, "p4de.24xlarge": {"A100-80GB", 8},
	// P5: H100 81920 MiB; P5e, P5en: H200 144384 MiB; P6-B200: B200.
	"p5.4xlarge": {"H100-80GB", 1}, "p5.48xlarge": {"H100-80GB", 8},
	"p5e.48xlarge": {"H200-141GB", 8}, "p5en.48xlarge": {"H200-141GB", 8},
	"p6-b200.48xlarge": {"B200", 8},
	// G4dn: T4.
	"g4dn.xlarge": {"T4", 1}, "g4dn.2xlarge": {"T4", 1}, "g4dn.4xlarge": {"T4", 1}, "g4dn.8xlarge": {"T4", 1},
	"g4dn.16xlarge": {"T4", 1}, "g4dn.12xlarge": {"T4", 4}, "g4dn.metal": {"T4", 8},
	// G5: A10G.
	"g5.xlarge": {"A10G", 1}, "g5.2xlarge": {"A10G", 1}, "g5.4xlarge": {"A10G", 1}, "g5.8xlarge": {"A10G", 1},
	"g5.16xlarge": {"A10G", 1}, "g5.12xlarge": {"A10G", 4}, "g5.24xlarge": {"A10G", 4}, "g5.48xlarge": {"A10G", 8},
	// G6, Gr6: L4.
	"g6.xlarge": {"L4", 1}, "g6.2xlarge": {"L4", 1}, "g6.4xlarge": {"L4", 1}, "g6.8xlarge": {"L4", 1},
	"g6.16xlarge": {"L4", 1}, "g6.12xlarge": {"L4", 4}, "g6.24xlarge": {"L4", 4}, "g6.48xlarge": {"L4", 8},
	"gr6.4xlarge": {"L4", 1}, "gr6.8xlarge": {"L4", 1},
	// G6e: L40S.
	"g6e.xlarge": {"L40S", 1}, "g6e.2xlarge": {"L40S", 1}, "g6e.4xlarge": {"L40S", 1}, "g6e.8xlarge": {"L40S", 1},
	"g6e.16xlarge": {"L40S", 1}, "g6e.12xlarge": {"L40S", 4}, "g6e.24xlarge": {"L40S", 4}, "g6e.48xlarge": {"L40S", 8},
	// G7e: RTX PRO 6000 Blackwell Server Edition (rtx-pro-server-6000, 98304 MiB).
	"g7e.2xlarge": {"RTX-PRO-6000", 1}, "g7e.4xlarge": {"RTX-PRO-6000", 1}, "g7e.8xlarge": {"RTX-PRO-6000", 1},
	"g7e.12xlarge": {"RTX-PRO-6000", 2}, "g7e.24xlarge": {"RTX-PRO-6000", 4}, "g7e.48xlarge": {"RTX-PRO-6000", 8},

	// Google Cloud. Source: Compute Engine "Accelerator-optimized machine
	// family" (https://docs.cloud.google.com/compute/docs/accelerator-optimized-machines,
	// updated 2026-04-13), the GPU count column of each series' table.
	// A2 Standard: A100 40GB; A2 Ultra: A100 80GB.
	"a2-highgpu-1g": {"A100-40GB", 1}, "a2-highgpu-2g": {"A100-40GB", 2}, "a2-highgpu-4g": {"A100-40GB", 4},
	"a2-highgpu-8g": {"A100-40GB", 8}, "a2-megagpu-16g": {"A100-40GB", 16},
	"a2-ultragpu-1g": {"A100-80GB", 1}, "a2-ultragpu-2g": {"A100-80GB", 2}, "a2-ultragpu-4g": {"A100-80GB", 4},
	"a2-ultragpu-8g": {"A100-80GB", 8},
	// A3 High, Edge, Mega: H100 SXM 80 GB; A3 Ultra: H200 141 GB.
	"a3-highgpu-1g": {"H100-80GB", 1}, "a3-highgpu-2g": {"H100-80GB", 2}, "a3-highgpu-4g": {"H100-80GB", 4},
	"a3-highgpu-8g": {"H100-80GB", 8}, "a3-edgegpu-8g": {"H100-80GB", 8}, "a3-megagpu-8g": {"H100-80GB", 8},
	"a3-ultragpu-8g": {"H200-141GB", 8},
	// A4: B200; A4X: GB200 Superchips, four B200 GPUs per instance.
	"a4-highgpu-8g": {"B200", 8}, "a4x-highgpu-4g": {"GB200", 4},
	// G4: RTX PRO 6000 Blackwell Server Edition (whole-GPU types only).
	"g4-standard-48": {"RTX-PRO-6000", 1}, "g4-standard-96": {"RTX-PRO-6000", 2},
	"g4-standard-192": {"RTX-PRO-6000", 4}, "g4-standard-384": {"RTX-PRO-6000", 8},
	// G2: L4.
	"g2-standard-4": {"L4", 1}, "g2-standard-8": {"L4", 1}, "g2-standard-12": {"L4", 1}, "g2-standard-16": {"L4", 1},
	"g2-standard-32": {"L4", 1}, "g2-standard-24": {"L4", 2}, "g2-standard-48": {"L4", 4}, "g2-standard-96": {"L4", 8},

	// Azure. Source: the size series pages of Microsoft's docs
	// (github.com/MicrosoftDocs/azure-compute-docs,
	// articles/virtual-machines/sizes/gpu-accelerated/<series>.md and
	// includes/<series>-specs.md, "Accelerators" tables).
	// NCv3 (ncv3-series): V100 16GB.
	"Standard_NC6s_v3": {"V100-16GB", 1}, "Standard_NC12s_v3": {"V100-16GB", 2}, "Standard_NC24s_v3": {"V100-16GB", 4},
	"Standard_NC24rs_v3": {"V100-16GB", 4},
	// NDv2 (ndv2-series; the model from MicrosoftDocs/azure-docs,
	// articles/virtual-machines/ndv2-series.md): 8 V100 32 GB.
	"Standard_ND40rs_v2": {"V100-32GB", 8},
	// NCasT4_v3 (ncast4v3-series): T4.
	"Standard_NC4as_T4_v3": {"T4", 1}, "Standard_NC8as_T4_v3": {"T4", 1}, "Standard_NC16as_T4_v3": {"T4", 1},
	"Standard_NC64as_T4_v3": {"T4", 4},
	// NC_A100_v4 (nca100v4-series): PCIe A100 80GB.
	"Standard_NC24ads_A100_v4": {"A100-80GB", 1}, "Standard_NC48ads_A100_v4": {"A100-80GB", 2},
	"Standard_NC96ads_A100_v4": {"A100-80GB", 4},
	// NDasrA100_v4 (ndasra100v4-series): A100 40GB; NDm_A100_v4
	// (ndma100v4-series): A100 80GB.
	"Standard_ND96asr_v4": {"A100-40GB", 8}, "Standard_ND96amsr_A100_v4": {"A100-80GB", 8},
	// NCads_H100_v5 (ncadsh100v5-series) and the confidential NCCads_H100_v5
	// (nccadsh100v5-series): PCIe H100 with 94 GB, which is the H100 NVL.
	"Standard_NC40ads_H100_v5": {"H100-NVL", 1}, "Standard_NC80adis_H100_v5": {"H100-NVL", 2},
	"Standard_NCC40ads_H100_v5": {"H100-NVL", 1},
	// ND-H100-v5 (ndh100v5-series): H100 80GB; ND-H200-v5
	// (nd-h200-v5-series): H200 141GB.
	"Standard_ND96isr_H100_v5": {"H100-80GB", 8}, "Standard_ND96isr_H200_v5": {"H200-141GB", 8},
	// ND GB200-v6 (nd-gb200-v6-series): 4 Blackwell GPUs on Grace.
	"Standard_ND128isr_NDR_GB200_v6": {"GB200", 4},
	// NC RTX PRO 6000 BSE v6 (nc-rtxpro6000-bse-v6-series, preview): RTX
	// PRO 6000 Blackwell Server Edition.
	"Standard_NC128ds_xl_RTXPRO6000BSE_v6": {"RTX-PRO-6000", 1}, "Standard_NC256ds_xl_RTXPRO6000BSE_v6": {"RTX-PRO-6000", 2},
	"Standard_NC320ds_xl_RTXPRO6000BSE_v6": {"RTX-PRO-6000", 2}, "Standard_NC128lds_xl_RTXPRO6000BSE_v6": {"RTX-PRO-6000", 1},
	"Standard_NC256lds_xl_RTXPRO6000BSE_v6": {"RTX-PRO-6000", 2}, "Standard_NC320lds_xl_RTXPRO6000BSE_v6": {"RTX-PRO-6000", 2},
}

// cloudGPU is what a node's cloud labels say of its GPUs.
type cloudGPU struct {
	model *gpu.Model
	count int // GPUs per node; 0 when no label says
	// memory is one GPU's memory when the model is unlisted and a label
	// gives it; 0 otherwise (a listed model's usable memory is the
	// catalogue's: the clouds' labels give nominal sizes).
	memory   gpu.MiB
	inferred []string // "model A100-80GB from label k=v"
}

// fromCloudLabels reads the GPU model and count from the labels GKE, EKS
// (Karpenter, Auto Mode) and AKS set, then from the instance type, and last
// from k8s.amazonaws.com/accelerator, in that order of preference: the
// accelerator label is set by hand by node group owners and names a family
// ("nvidia-tesla-a100") where the instance type names the variant
// (p4de.24xlarge: A100 80GB). It reports false when no label names the
// model. A name the catalogue does not list becomes an unlisted model
// (gpu.Catalogue.Unlisted).
func fromCloudLabels(labels map[string]string, c *gpu.Catalogue) (cloudGPU, bool) {
	var cg cloudGPU
	from := func(key string) string { return fmt.Sprintf("label %s=%s", key, labels[key]) }
	if v := labels[LabelGKEAccelerator]; v != "" {
		cg.model = resolveCloudName(c, gkeAccelerators[v], v, 0)
		cg.inferred = append(cg.inferred, fmt.Sprintf("model %s from %s", cg.model.Name, from(LabelGKEAccelerator)))
		if n, err := strconv.Atoi(labels[LabelGKEAcceleratorCount]); err == nil && n > 0 {
			cg.count = n
			cg.inferred = append(cg.inferred, fmt.Sprintf("%d GPUs from %s", n, from(LabelGKEAcceleratorCount)))
		}
	}
	for _, k := range [][3]string{{LabelEKSAutoGPUName, LabelEKSAutoGPUCount, LabelEKSAutoGPUMemory}, {LabelKarpenterGPUName, LabelKarpenterGPUCount, LabelKarpenterGPUMemory}} {
		name := labels[k[0]]
		if cg.model != nil || name == "" {
			continue
		}
		mem, _ := strconv.ParseInt(labels[k[2]], 10, 64)
		cg.model = resolveCloudName(c, karpenterGPUs[name], name, gpu.MiB(mem))
		cg.inferred = append(cg.inferred, fmt.Sprintf("model %s from %s", cg.model.Name, from(k[0])))
		if cg.model.Unlisted && mem > 0 {
			cg.memory = gpu.MiB(mem)
			cg.inferred = append(cg.inferred, fmt.Sprintf("memory from %s", from(k[2])))
		}
		if n, err := strconv.Atoi(labels[k[1]]); err == nil && n > 0 {
			cg.count = n
			cg.inferred = append(cg.inferred, fmt.Sprintf("%d GPUs from %s", n, from(k[1])))
		}
	}
	if it, ok := instanceGPUs[labels[LabelInstanceType]]; ok {
		if cg.model == nil {
			cg.model = c.MustLookup(it.model)
			cg.inferred = append(cg.inferred, fmt.Sprintf("model %s from %s", cg.model.Name, from(LabelInstanceType)))
		}
		if cg.count == 0 {
			cg.count = it.count
			cg.inferred = append(cg.inferred, fmt.Sprintf("%d GPUs from %s", it.count, from(LabelInstanceType)))
		}
	}
	if v := labels[LabelAWSAccelerator]; v != "" && cg.model == nil {
		cg.model = resolveCloudName(c, gkeAccelerators[v], strings.TrimPrefix(v, "nvidia-"), 0)
		cg.inferred = append(cg.inferred, fmt.Sprintf("model %s from %s", cg.model.Name, from(LabelAWSAccelerator)))
	}
	return cg, cg.model != nil
}

// resolveCloudName finds a cloud's GPU name in the catalogue: first the
// mapped name (when known), then the name with its memory ("a100" with
// 81920 MiB: A100-80GB), then the name itself; a name found nowhere becomes
// an unlisted model with the memory given.
func resolveCloudName(c *gpu.Catalogue, mapped, name string, memory gpu.MiB) *gpu.Model {
	if mapped != "" {
		if m, ok := c.Lookup(mapped); ok {
			return m
		}
	}
	if memory > 0 {
		if m, ok := c.Lookup(fmt.Sprintf("%s-%dGB", name, memory/1024)); ok {
			return m
		}
	}
	if m, ok := c.Lookup(name); ok {
		return m
	}
	return c.Unlisted(name, memory)
}

// sharingLabels returns the node's GPU sharing strategy ("time-slicing",
// "mps" or "") and its replicas label, from GPU feature discovery's labels
// or, without them, GKE's.
func sharingLabels(labels map[string]string) (strategy, replicas string) {
	strategy, ok := labels[LabelGPUSharingStrategy]
	if !ok {
		switch labels[LabelGKEGPUSharingStrategy] {
		case "time-sharing":
			strategy = "time-slicing"
		case "mps":
			strategy = "mps"
		}
	}
	replicas, ok = labels[LabelGPUReplicas]
	if !ok {
		replicas = labels[LabelGKEMaxSharedClients]
	}
	return strategy, replicas
}
