package kube

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/gpupack/gpupack/usage"
)

// pulledCases are messages of the kubelet's Pulled events, of every kubelet
// version, and others that are not; FuzzParsePulled seeds from them.
var pulledCases = map[string]struct {
	message string
	want    usage.ImagePull
	ok      bool
}{
	"1.30 on: times and size": {
		message: `Successfully pulled image "nvcr.io/nvidia/tritonserver:24.05-py3" in 1m2.5s (1m10.25s including waiting). Image size: 14823474567 bytes.`,
		want:    usage.ImagePull{Image: "nvcr.io/nvidia/tritonserver:24.05-py3", PullSeconds: 62.5, WaitSeconds: 70.25, SizeBytes: 14823474567},
		ok:      true,
	},
	"hours and milliseconds": {
		message: `Successfully pulled image "vllm/vllm-openai:v0.6.0" in 850ms (1h0m0.5s including waiting). Image size: 0 bytes.`,
		want:    usage.ImagePull{Image: "vllm/vllm-openai:v0.6.0", PullSeconds: 0.85, WaitSeconds: 3600.5},
		ok:      true,
	},
	"1.28 and 1.29: no size": {
		message: `Successfully pulled image "busybox:1.36" in 1.2s (3.4s including waiting)`,
		want:    usage.ImagePull{Image: "busybox:1.36", PullSeconds: 1.2, WaitSeconds: 3.4},
		ok:      true,
	},
	"before 1.28: one duration counts as both": {
		message: `Successfully pulled image "busybox" in 2.5s`,
		want:    usage.ImagePull{Image: "busybox", PullSeconds: 2.5, WaitSeconds: 2.5},
		ok:      true,
	},
	"a quote in the image is Go-escaped": {
		message: `Successfully pulled image "odd\"name" in 1s (1s including waiting). Image size: 5 bytes.`,
		want:    usage.ImagePull{Image: `odd"name`, PullSeconds: 1, WaitSeconds: 1, SizeBytes: 5},
		ok:      true,
	},
	"already present": {
		message: `Container image "vllm/vllm-openai:v0.6.0" already present on machine`,
		want:    usage.ImagePull{Image: "vllm/vllm-openai:v0.6.0", Present: true},
		ok:      true,
	},
	"already present and accessible (1.33 on)": {
		message: `Container image "registry.example/private:1" already present on machine and can be accessed by the pod`,
		want:    usage.ImagePull{Image: "registry.example/private:1", Present: true},
		ok:      true,
	},
	"empty":                     {message: ""},
	"pulling, not pulled":       {message: `Pulling image "busybox"`},
	"unquoted image":            {message: `Successfully pulled image busybox in 1s (1s including waiting)`},
	"backquoted image":          {message: "Successfully pulled image `busybox` in 1s (1s including waiting)"},
	"unterminated quote":        {message: `Successfully pulled image "busybox in 1s`},
	"bad duration":              {message: `Successfully pulled image "busybox" in 1x (1s including waiting)`},
	"negative duration":         {message: `Successfully pulled image "busybox" in -1s (1s including waiting)`},
	"bad waiting duration":      {message: `Successfully pulled image "busybox" in 1s (soon including waiting)`},
	"waiting not closed":        {message: `Successfully pulled image "busybox" in 1s (1s`},
	"negative size":             {message: `Successfully pulled image "busybox" in 1s (1s including waiting). Image size: -5 bytes.`},
	"signed size":               {message: `Successfully pulled image "busybox" in 1s (1s including waiting). Image size: +5 bytes.`},
	"size beyond int64":         {message: `Successfully pulled image "busybox" in 1s (1s including waiting). Image size: 18446744073709551615 bytes.`},
	"size without bytes":        {message: `Successfully pulled image "busybox" in 1s (1s including waiting). Image size: 5`},
	"text after the size":       {message: `Successfully pulled image "busybox" in 1s (1s including waiting). Image size: 5 bytes. More.`},
	"text after waiting":        {message: `Successfully pulled image "busybox" in 1s (1s including waiting) and more`},
	"present, cut short":        {message: `Container image "busybox" already present`},
	"present, text after":       {message: `Container image "busybox" already present on machine!`},
	"failed pull":               {message: `Failed to pull image "busybox": rpc error`},
	"prefix only":               {message: `Successfully pulled image `},
	"present with no image":     {message: `Container image  already present on machine`},
	"duration of just the unit": {message: `Successfully pulled image "busybox" in s`},
}

func TestParsePulled(t *testing.T) {
	for name, tc := range pulledCases {
		t.Run(name, func(t *testing.T) {
			got, ok := ParsePulled(tc.message)
			if ok != tc.ok {
				t.Fatalf("ParsePulled(%q) ok = %v, want %v (got %+v)", tc.message, ok, tc.ok, got)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParsePulled(%q) (-want +got):\n%s", tc.message, diff)
			}
		})
	}
}

func FuzzParsePulled(f *testing.F) {
	for _, tc := range pulledCases {
		f.Add(tc.message)
	}
	f.Fuzz(func(t *testing.T, message string) {
		got, ok := ParsePulled(message)
		if !ok {
			if diff := cmp.Diff(usage.ImagePull{}, got); diff != "" {
				t.Fatalf("ParsePulled(%q) refused the message but returned (-zero +got):\n%s", message, diff)
			}
			return
		}
		if got.PullSeconds < 0 || got.WaitSeconds < 0 || got.SizeBytes < 0 {
			t.Fatalf("ParsePulled(%q) = %+v: a negative time or size", message, got)
		}
		if got.Present && (got.PullSeconds != 0 || got.WaitSeconds != 0 || got.SizeBytes != 0) {
			t.Fatalf("ParsePulled(%q) = %+v: a present image with pull times or size", message, got)
		}
		if got.Container != "" || !got.At.IsZero() {
			t.Fatalf("ParsePulled(%q) = %+v: Container and At are the event's, not the message's", message, got)
		}
	})
}

// withVolume adds a volume to the pod.
func (b podBuilder) withVolume(name string, src corev1.VolumeSource) podBuilder {
	b.p.Spec.Volumes = append(b.p.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: src})
	return b
}

// mount mounts a volume in the pod's first container.
func (b podBuilder) mount(volume, path string) podBuilder {
	c := &b.p.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: volume, MountPath: path})
	return b
}

// initFills adds an init container that mounts the volume writable.
func (b podBuilder) initFills(name, volume, path string) podBuilder {
	b.p.Spec.InitContainers = append(b.p.Spec.InitContainers, corev1.Container{Name: name,
		VolumeMounts: []corev1.VolumeMount{{Name: volume, MountPath: path}}})
	return b
}

func TestStorageSpec(t *testing.T) {
	pod := makePod("serve").limit(ResourceGPU, "1").
		withVolume("shm", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}).
		withVolume("scratch", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}).
		withVolume("claim", corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "weights"}}).
		withVolume("templated", corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("fast-nvme")}}}}).
		withVolume("defaulted", corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{}}}).
		withVolume("host", corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/mnt/nvme/models"}}).
		withVolume("oci", corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "registry.example/llama:8b"}}).
		withVolume("s3", corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "s3.csi.aws.com"}}).
		withVolume("config", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}).
		mount("shm", "/dev/shm").mount("claim", "/models").
		initFills("fetch", "scratch", "/scratch").
		container(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}).
		obj()
	pod.Spec.Containers[1].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	classes := map[string]string{"weights": "standard-rwo", "serve-defaulted": "premium"}

	got := StorageSpec(pod, func(claim string) string { return classes[claim] })
	want := usage.PodStorageSpec{
		Volumes: []usage.PodVolume{
			{Name: "shm", Source: usage.VolumeEmptyDir, Memory: true},
			{Name: "scratch", Source: usage.VolumeEmptyDir},
			{Name: "claim", Source: usage.VolumePVC, Detail: "standard-rwo"},
			{Name: "templated", Source: usage.VolumeEphemeral, Detail: "fast-nvme"},
			{Name: "defaulted", Source: usage.VolumeEphemeral, Detail: "premium"},
			{Name: "host", Source: usage.VolumeHostPath, Detail: "/mnt/nvme/models"},
			{Name: "oci", Source: usage.VolumeImage, Detail: "registry.example/llama:8b"},
			{Name: "s3", Source: usage.VolumeCSI, Detail: "s3.csi.aws.com"},
			{Name: "config", Source: usage.VolumeOther},
		},
		Containers: []usage.ContainerMounts{
			{Name: "fetch", Init: true, Mounts: []usage.Mount{{Volume: "scratch", Path: "/scratch"}}},
			{Name: "main", GPU: true, Mounts: []usage.Mount{{Volume: "shm", Path: "/dev/shm"}, {Volume: "claim", Path: "/models"}}},
			// A resource claim counts as a GPU.
			{Name: "c", GPU: true},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("StorageSpec (-want +got):\n%s", diff)
	}
	if got := StorageSpec(pod, nil).Volumes[2].Detail; got != "" {
		t.Errorf("claim class without a lookup = %q, want \"\"", got)
	}
}

func TestWantsGPU(t *testing.T) {
	cases := map[string]struct {
		resources corev1.ResourceRequirements
		want      bool
	}{
		"none":        {},
		"CPU only":    {resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}},
		"whole GPU":   {resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{ResourceGPU: resource.MustParse("1")}}, want: true},
		"zero GPUs":   {resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{ResourceGPU: resource.MustParse("0")}}},
		"shared GPU":  {resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{ResourceGPUShared: resource.MustParse("1")}}, want: true},
		"MIG slice":   {resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{ResourceMIGPrefix + "1g.10gb": resource.MustParse("1")}}, want: true},
		"other":       {resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"example.com/fpga": resource.MustParse("1")}}},
		"DRA claim":   {resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}, want: true},
		"GPU request": {resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{ResourceGPU: resource.MustParse("2")}}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := wantsGPU(&corev1.Container{Resources: tc.resources}); got != tc.want {
				t.Errorf("wantsGPU = %v, want %v", got, tc.want)
			}
		})
	}
}

// pulledEvent is a kubelet's Pulled event about the pod's container (a
// fieldPath such as spec.containers{main}).
func pulledEvent(pod *corev1.Pod, fieldPath, message string, last time.Time) corev1.Event {
	return corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name + "." + strings.ReplaceAll(fieldPath, "}", "")},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, FieldPath: fieldPath},
		Reason:         ReasonPulled,
		Message:        message,
		Source:         corev1.EventSource{Component: "kubelet"},
		LastTimestamp:  metav1.NewTime(last),
		FirstTimestamp: metav1.NewTime(last),
		Count:          1,
		Type:           corev1.EventTypeNormal,
	}
}

func TestPodStartup(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	condition := func(typ corev1.PodConditionType, status corev1.ConditionStatus, s int) corev1.PodCondition {
		return corev1.PodCondition{Type: typ, Status: status, LastTransitionTime: metav1.NewTime(at(s))}
	}
	running := func(name string, s int) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at(s))}}}
	}
	base := func() podBuilder {
		b := makePod("llm-7d9f8b6c5-x2x4z").limit(ResourceGPU, "1").node("h100-0").
			withVolume("models", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}).
			mount("models", "/models").initFills("fetch", "models", "/models").
			container(nil)
		p := b.obj()
		p.CreationTimestamp = metav1.NewTime(at(0))
		p.Labels = map[string]string{"pod-template-hash": "7d9f8b6c5"}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{
			condition(corev1.PodScheduled, corev1.ConditionTrue, 2),
			condition(corev1.PodInitialized, corev1.ConditionTrue, 40),
			condition(corev1.ContainersReady, corev1.ConditionTrue, 95),
			condition(corev1.PodReady, corev1.ConditionTrue, 96),
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{running("main", 45),
			{Name: "c", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{StartedAt: metav1.NewTime(at(47)), FinishedAt: metav1.NewTime(at(50))}}}}
		return b
	}
	storage := usage.ModelStorage{Kind: usage.StorageDownload, Volume: "models", MountPath: "/models",
		Evidence: "volume models at /models is named for models, filled by init container fetch"}

	cases := map[string]struct {
		pod    *corev1.Pod
		events func(p *corev1.Pod) []corev1.Event
		want   usage.PodEvents
	}{
		"running, pulls of the init and app containers, one present": {
			pod: base().obj(),
			events: func(p *corev1.Pod) []corev1.Event {
				eventTimeOnly := pulledEvent(p, "spec.containers{c}", `Container image "busybox" already present on machine`, time.Time{})
				eventTimeOnly.FirstTimestamp = metav1.Time{}
				eventTimeOnly.EventTime = metav1.NewMicroTime(at(44))
				return []corev1.Event{
					pulledEvent(p, "spec.containers{main}", `Successfully pulled image "vllm/vllm-openai:v0.6.0" in 30.5s (31s including waiting). Image size: 9000000000 bytes.`, at(43)),
					pulledEvent(p, "spec.initContainers{fetch}", `Successfully pulled image "amazon/aws-cli" in 4.25s (4.25s including waiting). Image size: 150000000 bytes.`, at(8)),
					eventTimeOnly,
					// Not a Pulled message: skipped.
					pulledEvent(p, "spec.containers{main}", `Pulling image "vllm/vllm-openai:v0.6.0"`, at(12)),
				}
			},
			want: usage.PodEvents{
				Namespace: "ml", Pod: "llm-7d9f8b6c5-x2x4z", Workload: "llm",
				Created: at(0), Scheduled: at(2), ContainersStarted: at(47), ContainersReady: at(95), Ready: at(96),
				ImagePulls: []usage.ImagePull{
					{Container: "fetch", Image: "amazon/aws-cli", At: at(8), PullSeconds: 4.25, WaitSeconds: 4.25, SizeBytes: 150000000},
					{Container: "main", Image: "vllm/vllm-openai:v0.6.0", At: at(43), PullSeconds: 30.5, WaitSeconds: 31, SizeBytes: 9000000000},
					{Container: "c", Image: "busybox", At: at(44), Present: true},
				},
				Storage: storage,
			},
		},
		"a container not started yet; not ready; named by its app label": {
			pod: func() *corev1.Pod {
				p := base().obj()
				p.Labels["app"] = "chat"
				p.Status.Conditions = []corev1.PodCondition{
					condition(corev1.PodScheduled, corev1.ConditionTrue, 2),
					condition(corev1.ContainersReady, corev1.ConditionFalse, 3),
					condition(corev1.PodReady, corev1.ConditionFalse, 3),
				}
				p.Status.ContainerStatuses = []corev1.ContainerStatus{running("main", 45),
					{Name: "c", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
				return p
			}(),
			want: usage.PodEvents{Namespace: "ml", Pod: "llm-7d9f8b6c5-x2x4z", Workload: "chat", Created: at(0), Scheduled: at(2), Storage: storage},
		},
		"a container restarted: its first start is not stated": {
			pod: func() *corev1.Pod {
				p := base().obj()
				p.Status.ContainerStatuses[0].RestartCount = 1
				return p
			}(),
			want: usage.PodEvents{Namespace: "ml", Pod: "llm-7d9f8b6c5-x2x4z", Workload: "llm", Created: at(0), Scheduled: at(2), ContainersReady: at(95), Ready: at(96), Storage: storage},
		},
		"pending: not scheduled; a pod of its own": {
			pod: func() *corev1.Pod {
				p := makePod("solo").limit(ResourceGPU, "1").unschedulable("0/3 nodes are available", at(1)).obj()
				p.CreationTimestamp = metav1.NewTime(at(0))
				return p
			}(),
			want: usage.PodEvents{Namespace: "ml", Pod: "solo", Workload: "solo", Created: at(0),
				Storage: usage.ModelStorage{Kind: usage.StorageImage, Evidence: "no GPU container mounts a volume that holds models: the weights are in the image"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var events []corev1.Event
			if tc.events != nil {
				events = tc.events(tc.pod)
			}
			got := PodStartup(tc.pod, events, nil)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("PodStartup (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadStartup(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	gpuPod := makePod("train").limit(ResourceGPU, "8").node("h100-0").
		withVolume("ckpt", corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "checkpoints"}}).
		mount("ckpt", "/checkpoints").obj()
	gpuPod.CreationTimestamp = metav1.NewTime(t0)
	pending := makePod("waiting").limit(ResourceGPU, "1").obj()
	cpuPod := makePod("web").node("cpu-0").obj()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "checkpoints"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("fast-nvme")}}
	pulled := pulledEvent(gpuPod, "spec.containers{main}", `Successfully pulled image "pytorch" in 10s (12s including waiting). Image size: 7 bytes.`, t0.Add(time.Minute))
	// The Pulled event of an earlier pod of the same name.
	stale := pulledEvent(gpuPod, "spec.containers{main}", `Container image "pytorch" already present on machine`, t0.Add(-time.Hour))
	stale.Name, stale.InvolvedObject.UID = "stale", "uid-earlier"
	ofCPUPod := pulledEvent(cpuPod, "spec.containers{main}", `Container image "nginx" already present on machine`, t0)
	objects := []runtime.Object{gpuPod, pending, cpuPod, pvc, &pulled, &stale, &ofCPUPod}

	want := []usage.PodEvents{{
		Namespace: "ml", Pod: "train", Workload: "train", Created: t0,
		ImagePulls: []usage.ImagePull{{Container: "main", Image: "pytorch", At: t0.Add(time.Minute), PullSeconds: 10, WaitSeconds: 12, SizeBytes: 7}},
		Storage:    usage.ModelStorage{Kind: usage.StoragePVC, Detail: "fast-nvme", Volume: "ckpt", MountPath: "/checkpoints", Evidence: "volume ckpt at /checkpoints is named for models"},
	}}
	forbid := func(resource string) k8stesting.ReactionFunc {
		return func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", nil)
		}
	}
	cases := map[string]struct {
		forbidden    []string
		want         []usage.PodEvents
		wantWarnings []string // substrings, one per warning
		wantErr      string
	}{
		"all readable": {want: want},
		"events forbidden": {
			forbidden:    []string{"events"},
			want:         []usage.PodEvents{{Namespace: "ml", Pod: "train", Workload: "train", Created: t0, Storage: want[0].Storage}},
			wantWarnings: []string{`cannot list events, so image pulls are left out of the start-up phases: grant verb "list" on resource "events"`},
		},
		"claims forbidden": {
			forbidden: []string{"persistentvolumeclaims"},
			want: func() []usage.PodEvents {
				w := want[0]
				w.Storage.Detail = ""
				w.Storage.Evidence += " (its storage class is not known)"
				return []usage.PodEvents{w}
			}(),
			wantWarnings: []string{`cannot list persistentvolumeclaims, so the storage classes of claims that hold model weights are not known: grant verb "list" on resource "persistentvolumeclaims"`},
		},
		"pods forbidden": {forbidden: []string{"pods"}, wantErr: `verb "list" on resource "pods"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset(objects...)
			for _, r := range tc.forbidden {
				client.PrependReactor("list", r, forbid(r))
			}
			got, warnings, err := LoadStartup(context.Background(), client)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("LoadStartup error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("LoadStartup (-want +got):\n%s", diff)
			}
			checkWarnings(t, tc.wantWarnings, warnings)
		})
	}
}
