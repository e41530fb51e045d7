package usage

import (
	"slices"
	"strings"
	"time"
)

// Where a pod's model weights come from, for ModelStorage.Kind.
const (
	// StorageImage: no volume holds the weights; they are baked into the
	// container image, so the image pull is their download.
	StorageImage = "image"
	// StorageDownload: an emptyDir that an init container fills, or that
	// the server fills at start: the weights are downloaded at every start.
	StorageDownload = "emptydir-download"
	// StoragePVC: a PersistentVolumeClaim (Detail: its storage class, ""
	// when not known).
	StoragePVC = "pvc"
	// StorageHostPath: a directory of the node, a local NVMe cache
	// (Detail: the path).
	StorageHostPath = "hostpath"
	// StorageImageVolume: an OCI image mounted as a volume (Detail: the
	// image reference).
	StorageImageVolume = "image-volume"
	// StorageCSI: an inline CSI volume, typically an object-store mount
	// (Detail: the driver, e.g. s3.csi.aws.com).
	StorageCSI = "csi"
	// StorageUnknown: the pod's spec was not seen (history without a live
	// cluster).
	StorageUnknown = "unknown"
)

// VolumeSource kinds of PodVolume.Source that can hold model weights; any
// other source (configMap, secret, projected, downwardAPI...) is
// configuration and never counts.
const (
	VolumeEmptyDir = "emptyDir"
	VolumePVC      = "persistentVolumeClaim"
	// VolumeEphemeral is a generic ephemeral volume: a PVC made per pod
	// from a claim template; Detail is the template's storage class.
	VolumeEphemeral = "ephemeral"
	VolumeHostPath  = "hostPath"
	VolumeImage     = "image"
	VolumeCSI       = "csi"
	// VolumeOther is any other source.
	VolumeOther = "other"
)

// PodStorageSpec is what ClassifyModelStorage reads of a pod's spec: its
// volumes and which containers mount them where. Edges fill it from the
// live pod (or a demo script).
type PodStorageSpec struct {
	Volumes    []PodVolume       `json:"volumes"`
	Containers []ContainerMounts `json:"containers"`
}

// PodVolume is one volume of a pod.
type PodVolume struct {
	Name string `json:"name"`
	// Source is one of the Volume* kinds.
	Source string `json:"source"`
	// Detail: the storage class of a claim, the CSI driver, the host path
	// or the image reference; "" when not known.
	Detail string `json:"detail,omitempty"`
	// Memory marks an emptyDir of medium Memory.
	Memory bool `json:"memory,omitempty"`
}

// ContainerMounts is one container and its volume mounts.
type ContainerMounts struct {
	Name string `json:"name"`
	// Init marks an init container (sidecars included).
	Init bool `json:"init,omitempty"`
	// GPU marks a container that asks for a GPU.
	GPU    bool    `json:"gpu,omitempty"`
	Mounts []Mount `json:"mounts,omitempty"`
}

// Mount is one volume mount of a container.
type Mount struct {
	Volume   string `json:"volume"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// ModelStorage is where a pod's model weights were judged to come from,
// and why.
type ModelStorage struct {
	// Kind is one of the Storage* kinds.
	Kind string `json:"kind"`
	// Detail is the storage class, CSI driver, host path or image of the
	// volume; "" when the kind has none.
	Detail string `json:"detail,omitempty"`
	// Volume and MountPath name the volume judged to hold the weights.
	Volume    string `json:"volume,omitempty"`
	MountPath string `json:"mountPath,omitempty"`
	// Evidence says in words why.
	Evidence string `json:"evidence"`
}

// Path is the storage path as reports group it: the kind, then the detail
// ("pvc/fast-nvme", "csi/s3.csi.aws.com", "image").
func (m ModelStorage) Path() string {
	if m.Kind == "" {
		return StorageUnknown
	}
	if m.Detail == "" || m.Kind == StorageHostPath || m.Kind == StorageImageVolume {
		// Host paths and image references differ per workload; the kind
		// alone groups them.
		return m.Kind
	}
	return m.Kind + "/" + m.Detail
}

// modelWords are the words that mark a volume, or its mount path, as a
// home for model weights.
var modelWords = []string{"model", "weight", "checkpoint", "ckpt", "huggingface", "hf-cache", "hf_home", "/hf", "llm", "safetensors", "gguf", "cache"}

// ClassifyModelStorage judges where the pod's model weights come from. The
// candidates are the volumes that its GPU containers mount (every app
// container's when none asks for a GPU), less configuration volumes and
// shared-memory emptyDirs (medium Memory at /dev/shm). A candidate scores 2
// when its name or mount path has a model word (model, weights,
// checkpoint, huggingface, cache...), and 1 when an init container mounts
// it writable (it fills it). The highest score wins; ties go to the
// volume's kind in the order image volume, CSI, claim, host path, emptyDir,
// then to its name. No candidate, or only emptyDirs that nothing marks as
// holding models, means the weights are baked into the image.
func ClassifyModelStorage(spec PodStorageSpec) ModelStorage {
	volumes := map[string]PodVolume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	anyGPU := slices.ContainsFunc(spec.Containers, func(c ContainerMounts) bool { return c.GPU && !c.Init })
	filled := map[string]string{} // volume -> init container that writes it
	type candidate struct {
		v     PodVolume
		path  string
		score int
	}
	byName := map[string]*candidate{}
	for _, c := range spec.Containers {
		for _, m := range c.Mounts {
			v, ok := volumes[m.Volume]
			if !ok || !weightSource(v.Source) || v.Source == VolumeEmptyDir && (v.Memory || m.Path == "/dev/shm") {
				continue
			}
			if c.Init {
				if !m.ReadOnly && filled[m.Volume] == "" {
					filled[m.Volume] = c.Name
				}
				continue
			}
			if anyGPU && !c.GPU {
				continue
			}
			if byName[v.Name] == nil {
				byName[v.Name] = &candidate{v: v, path: m.Path}
			}
		}
	}
	var cands []*candidate
	for _, c := range byName {
		if hasModelWord(c.v.Name) || hasModelWord(c.path) {
			c.score += 2
		}
		if filled[c.v.Name] != "" {
			c.score++
		}
		cands = append(cands, c)
	}
	slices.SortFunc(cands, func(a, b *candidate) int {
		if a.score != b.score {
			return b.score - a.score
		}
		if ra, rb := kindRank(a.v.Source), kindRank(b.v.Source); ra != rb {
			return ra - rb
		}
		return strings.Compare(a.v.Name, b.v.Name)
	})
	if len(cands) == 0 || cands[0].v.Source == VolumeEmptyDir && cands[0].score == 0 {
		return ModelStorage{Kind: StorageImage, Evidence: "no GPU container mounts a volume that holds models: the weights are in the image"}
	}
	c := cands[0]
	ms := ModelStorage{Volume: c.v.Name, MountPath: c.path, Detail: c.v.Detail}
	why := "volume " + c.v.Name + " at " + c.path
	switch {
	case c.score >= 2:
		why += " is named for models"
	case c.score == 0:
		why += " is the only data volume"
	}
	if by := filled[c.v.Name]; by != "" {
		why += ", filled by init container " + by
	}
	switch c.v.Source {
	case VolumeEmptyDir:
		ms.Kind = StorageDownload
	case VolumePVC, VolumeEphemeral:
		// A claim's class is set at its creation (the default class where
		// it names none), so an empty one is not known: "pvc" alone.
		ms.Kind = StoragePVC
		if ms.Detail == "" {
			why += " (its storage class is not known)"
		}
	case VolumeHostPath:
		ms.Kind = StorageHostPath
	case VolumeImage:
		ms.Kind = StorageImageVolume
	case VolumeCSI:
		ms.Kind = StorageCSI
	}
	ms.Evidence = why
	return ms
}

func weightSource(source string) bool {
	return kindRank(source) < len(weightKinds)
}

var weightKinds = []string{VolumeImage, VolumeCSI, VolumePVC, VolumeEphemeral, VolumeHostPath, VolumeEmptyDir}

func kindRank(source string) int {
	if i := slices.Index(weightKinds, source); i >= 0 {
		return i
	}
	return len(weightKinds)
}

func hasModelWord(s string) bool {
	s = strings.ToLower(s)
	return slices.ContainsFunc(modelWords, func(w string) bool { return strings.Contains(s, w) })
}

// MergePodEvents joins two sources of the same pods' life-cycle times,
// history (kube-state-metrics) and live (the apiserver's pods and events):
// for each pod, a time or a fact that one source lacks is taken from the
// other, and where both know it the live one wins (it is read from the
// object itself). Pods in either source are kept; the result is sorted by
// namespace and pod.
func MergePodEvents(history, live []PodEvents) []PodEvents {
	byKey := map[string]*PodEvents{}
	var keys []string
	for _, src := range [][]PodEvents{history, live} {
		for _, e := range src {
			key := e.Namespace + "/" + e.Pod
			m := byKey[key]
			if m == nil {
				c := e
				c.ImagePulls = slices.Clone(e.ImagePulls)
				byKey[key] = &c
				keys = append(keys, key)
				continue
			}
			if e.Workload != "" {
				m.Workload = e.Workload
			}
			for _, t := range []struct{ dst, src *time.Time }{
				{&m.Created, &e.Created}, {&m.Scheduled, &e.Scheduled}, {&m.ContainersStarted, &e.ContainersStarted},
				{&m.ContainersReady, &e.ContainersReady}, {&m.Ready, &e.Ready},
			} {
				if !t.src.IsZero() {
					*t.dst = *t.src
				}
			}
			if len(e.ImagePulls) > 0 {
				m.ImagePulls = slices.Clone(e.ImagePulls)
			}
			if e.Storage.Kind != "" {
				m.Storage = e.Storage
			}
		}
	}
	slices.Sort(keys)
	out := make([]PodEvents, 0, len(keys))
	for _, k := range keys {
		out = append(out, *byKey[k])
	}
	return out
}
