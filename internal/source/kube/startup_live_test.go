package kube_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpupack/gpupack/internal/source/kube"
	"github.com/gpupack/gpupack/internal/testkit/testcluster"
	"github.com/gpupack/gpupack/usage"
)

// TestLiveStartup runs GPU pods whose model weights come from each storage
// path (baked into the image, an emptyDir an init container fills, a
// PersistentVolumeClaim of class fast-nvme, an inline CSI volume of the S3
// driver, a host path) on a kwok GPU node, writes the Pulled events a
// kubelet would, and checks that LoadStartup reads each pod's storage, its
// pulls, its phases in order and its workload, and leaves out a CPU pod.
//
// The claim is bound by hand to a PersistentVolume made for it, as the
// PersistentVolume controller would bind it (spec.volumeName and the
// pv.kubernetes.io/bind-completed annotation): testcluster runs no volume
// controller, and the scheduler's VolumeBinding plugin holds back a pod
// whose claim is unbound. A generic ephemeral volume would need the
// ephemeral-volume controller to make its claim, and the same binding.
func TestLiveStartup(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	c := testcluster.Start(t, testcluster.Options{})
	ctx := t.Context()
	client := c.Client()
	core := client.CoreV1()
	const node = "h100-0"
	c.AddGPUNode(node, testcluster.GPUNode{Product: "NVIDIA-H100-80GB-HBM3", MemoryMiB: 81559, GPUs: 8})
	const ns = "ml"
	c.CreateNamespace(ns)

	if _, err := core.PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "weights-pv"},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:       "fast-nvme",
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("500Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/mnt/pv/weights"}},
			ClaimRef:               &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: "weights"},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := core.PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "weights", Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To("fast-nvme"),
			VolumeName:       "weights-pv",
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("500Gi")}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	gpuPod := func(name string, labels map[string]string, volume *corev1.Volume) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "vllm/vllm-openai:v0.6.0",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kube.ResourceGPU: resource.MustParse("1")}}}}},
		}
		if volume != nil {
			p.Spec.Volumes = []corev1.Volume{*volume}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: volume.Name, MountPath: "/models"}}
		}
		return p
	}
	baked := gpuPod("baked", map[string]string{"app.kubernetes.io/name": "chat"}, nil)
	baked.Spec.Containers[0].Image = "registry.example/llm-baked:v1"
	download := gpuPod("download-5f6d7c8b9-abcde", map[string]string{"pod-template-hash": "5f6d7c8b9"},
		&corev1.Volume{Name: "models", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	download.Spec.InitContainers = []corev1.Container{{Name: "fetch", Image: "amazon/aws-cli:2.17",
		VolumeMounts: []corev1.VolumeMount{{Name: "models", MountPath: "/models"}}}}
	claimed := gpuPod("claimed", map[string]string{"app": "pvc-serve"},
		&corev1.Volume{Name: "weights", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "weights"}}})
	s3 := gpuPod("s3-mount", nil,
		&corev1.Volume{Name: "s3", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "s3.csi.aws.com", VolumeAttributes: map[string]string{"bucketName": "models"}}}})
	nvme := gpuPod("nvme", map[string]string{"app": "nvme-cache"},
		&corev1.Volume{Name: "nvme", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/mnt/nvme/models"}}})
	web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "nginx"}}}}

	created := map[string]*corev1.Pod{}
	for _, p := range []*corev1.Pod{baked, download, claimed, s3, nvme, web} {
		got, err := core.Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created[p.Name] = got
	}
	waitPods(t, core.Pods(ns), func(ps map[string]*corev1.Pod) string {
		for name := range created {
			p := ps[name]
			if p == nil || p.Status.Phase != corev1.PodRunning || !ready(p) {
				return name + " is not running and ready"
			}
		}
		return ""
	})

	// The kubelet's Pulled events, as its recorder writes them: named
	// <pod>.<nanoseconds in hex>, about the container's fieldPath, from
	// the kubelet of the node.
	at := time.Now().UTC().Truncate(time.Second)
	type pulled struct {
		pod, fieldPath, message string
	}
	for i, e := range []pulled{
		{"baked", "spec.containers{main}", `Successfully pulled image "registry.example/llm-baked:v1" in 1m2.5s (1m10.25s including waiting). Image size: 14823474567 bytes.`},
		{"download-5f6d7c8b9-abcde", "spec.initContainers{fetch}", `Successfully pulled image "amazon/aws-cli:2.17" in 4.25s (4.25s including waiting). Image size: 150000000 bytes.`},
		{"download-5f6d7c8b9-abcde", "spec.containers{main}", `Container image "vllm/vllm-openai:v0.6.0" already present on machine`},
		// A kubelet before 1.30: no size.
		{"claimed", "spec.containers{main}", `Successfully pulled image "vllm/vllm-openai:v0.6.0" in 20s (25s including waiting)`},
		{"nvme", "spec.containers{main}", `Container image "vllm/vllm-openai:v0.6.0" already present on machine and can be accessed by the pod`},
		{"web", "spec.containers{main}", `Container image "nginx" already present on machine`},
	} {
		c.RecordPulled(created[e.pod], e.fieldPath, e.message, at.Add(time.Duration(i)*time.Second))
	}

	got, warnings, err := kube.LoadStartup(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) > 0 {
		t.Errorf("warnings: %q", warnings)
	}

	type storage struct{ Kind, Detail, Volume, MountPath string }
	type startup struct {
		Workload string
		Storage  storage
		Pulls    []usage.ImagePull
	}
	pull := func(i int, container, image string, pullSeconds, waitSeconds float64, size int64) usage.ImagePull {
		return usage.ImagePull{Container: container, Image: image, At: at.Add(time.Duration(i) * time.Second),
			PullSeconds: pullSeconds, WaitSeconds: waitSeconds, SizeBytes: size}
	}
	present := func(i int, container, image string) usage.ImagePull {
		return usage.ImagePull{Container: container, Image: image, At: at.Add(time.Duration(i) * time.Second), Present: true}
	}
	want := map[string]startup{
		"baked": {Workload: "chat", Storage: storage{Kind: usage.StorageImage},
			Pulls: []usage.ImagePull{pull(0, "main", "registry.example/llm-baked:v1", 62.5, 70.25, 14823474567)}},
		"download-5f6d7c8b9-abcde": {Workload: "download", Storage: storage{usage.StorageDownload, "", "models", "/models"},
			Pulls: []usage.ImagePull{pull(1, "fetch", "amazon/aws-cli:2.17", 4.25, 4.25, 150000000), present(2, "main", "vllm/vllm-openai:v0.6.0")}},
		"claimed": {Workload: "pvc-serve", Storage: storage{usage.StoragePVC, "fast-nvme", "weights", "/models"},
			Pulls: []usage.ImagePull{pull(3, "main", "vllm/vllm-openai:v0.6.0", 20, 25, 0)}},
		"s3-mount": {Workload: "s3-mount", Storage: storage{usage.StorageCSI, "s3.csi.aws.com", "s3", "/models"}},
		"nvme": {Workload: "nvme-cache", Storage: storage{usage.StorageHostPath, "/mnt/nvme/models", "nvme", "/models"},
			Pulls: []usage.ImagePull{present(4, "main", "vllm/vllm-openai:v0.6.0")}},
	}
	gotStartups := map[string]startup{}
	for _, e := range got {
		if e.Namespace != ns {
			continue
		}
		gotStartups[e.Pod] = startup{Workload: e.Workload, Storage: storage{e.Storage.Kind, e.Storage.Detail, e.Storage.Volume, e.Storage.MountPath}, Pulls: e.ImagePulls}
		t.Logf("%s: created %s, scheduled +%s, containers started +%s, ready +%s; storage %s (%s)", e.Pod, e.Created.Format(time.RFC3339),
			e.Scheduled.Sub(e.Created), e.ContainersStarted.Sub(e.Created), e.Ready.Sub(e.Created), e.Storage.Path(), e.Storage.Evidence)
		phases := []time.Time{e.Created, e.Scheduled, e.ContainersStarted}
		for i, t1 := range phases {
			if t1.IsZero() {
				t.Errorf("%s: phase %d of created, scheduled, containers started is unknown", e.Pod, i)
			}
			if i > 0 && t1.Before(phases[i-1]) {
				t.Errorf("%s: created, scheduled, containers started = %v, out of order", e.Pod, phases)
			}
		}
		if e.ContainersReady.IsZero() || e.Ready.IsZero() {
			t.Errorf("%s: containers ready %v, ready %v; want both known for a running pod kwok made ready", e.Pod, e.ContainersReady, e.Ready)
		}
	}
	if diff := cmp.Diff(want, gotStartups); diff != "" {
		t.Errorf("LoadStartup by pod (-want +got):\n%s", diff)
	}
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
