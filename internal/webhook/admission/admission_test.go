package admission

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpupack/gpupack/plan"
	"github.com/gpupack/gpupack/vram"
)

func pod(name string, labels map[string]string, containers ...map[string]string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: labels}}
	for i, res := range containers {
		list := corev1.ResourceList{}
		for k, v := range res {
			list[corev1.ResourceName(k)] = resource.MustParse(v)
		}
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: []string{"main", "side"}[i], Resources: corev1.ResourceRequirements{Limits: list, Requests: list.DeepCopy()}})
	}
	return p
}

// requests reads the plan command's golden workload-requests.yaml, so the
// webhook is tested against what the planner writes.
func requests(t *testing.T) map[string]plan.WorkloadRequest {
	t.Helper()
	data, err := os.ReadFile("../../cli/plan/testdata/out-workload-requests.yaml.golden")
	if err != nil {
		t.Fatal(err)
	}
	r, err := plan.ParseWorkloadRequests(data)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestMutate(t *testing.T) {
	ranker := map[string]string{"app": "ranker"}
	cases := map[string]struct {
		pod           *corev1.Pod
		wantResources map[string]string // of container main, limits
		wantScheduler string
		wantChanged   bool
		wantGPUMemory string // annotation gpupack.io/gpu-memory after Mutate
		wantSelector  map[string]string
		wantErr       string
	}{
		"planned workload onto its MIG slice": {
			pod:           pod("ranker-0", ranker, map[string]string{"nvidia.com/gpu": "1", "cpu": "2"}),
			wantResources: map[string]string{"nvidia.com/mig-2g.20gb": "1", "cpu": "2"},
			wantScheduler: SchedulerName, wantChanged: true,
			wantSelector: map[string]string{"nvidia.com/device-plugin.config": "h100-mig"},
		},
		// Time slices and MPS clients are both nvidia.com/gpu.shared: the
		// node selector keeps an MPS client on the MPS nodes.
		"planned MPS client onto the nodes of the MPS config": {
			pod: func() *corev1.Pod {
				p := pod("thumbs-0", map[string]string{"app": "thumbs"}, map[string]string{"nvidia.com/gpu": "1"})
				p.Namespace = "web"
				p.Spec.NodeSelector = map[string]string{"zone": "a"}
				return p
			}(),
			wantResources: map[string]string{"nvidia.com/gpu.shared": "1"},
			wantScheduler: SchedulerName, wantChanged: true, wantGPUMemory: "7678Mi",
			wantSelector: map[string]string{"zone": "a", "nvidia.com/device-plugin.config": "l4-mps"},
		},
		"pinned to another config by its own selector: request kept": {
			pod: func() *corev1.Pod {
				p := pod("thumbs-0", map[string]string{"app": "thumbs"}, map[string]string{"nvidia.com/gpu": "1"})
				p.Namespace = "web"
				p.Spec.NodeSelector = map[string]string{"nvidia.com/device-plugin.config": "l4-exclusive"}
				return p
			}(),
			wantResources: map[string]string{"nvidia.com/gpu": "1"},
			wantScheduler: SchedulerName, wantChanged: true,
			wantSelector: map[string]string{"nvidia.com/device-plugin.config": "l4-exclusive"},
		},
		"planned workload onto a shared GPU, with the VRAM it was sized for": {
			pod: func() *corev1.Pod {
				p := pod("notebook-ana-0", map[string]string{"app": "notebook-ana"}, map[string]string{"nvidia.com/gpu": "1"})
				p.Namespace = "ml"
				return p
			}(),
			wantResources: map[string]string{"nvidia.com/gpu.shared": "1"},
			wantScheduler: SchedulerName, wantChanged: true, wantGPUMemory: "7373Mi",
			wantSelector: map[string]string{"nvidia.com/device-plugin.config": "h100-time-slicing"},
		},
		"a VRAM annotation of the user's own is kept": {
			pod: func() *corev1.Pod {
				p := pod("notebook-ana-0", map[string]string{"app": "notebook-ana"}, map[string]string{"nvidia.com/gpu": "1"})
				p.Namespace = "ml"
				p.Annotations = map[string]string{"gpupack.io/gpu-memory": "12Gi"}
				return p
			}(),
			wantResources: map[string]string{"nvidia.com/gpu.shared": "1"},
			wantScheduler: SchedulerName, wantChanged: true, wantGPUMemory: "12Gi",
			wantSelector: map[string]string{"nvidia.com/device-plugin.config": "h100-time-slicing"},
		},
		"pod of a Deployment, named by generateName": {
			pod: func() *corev1.Pod {
				p := pod("", map[string]string{"pod-template-hash": "7d9f"}, map[string]string{"nvidia.com/gpu": "1"})
				p.GenerateName = "ranker-7d9f-"
				return p
			}(),
			wantResources: map[string]string{"nvidia.com/mig-2g.20gb": "1"},
			wantScheduler: SchedulerName, wantChanged: true,
			wantSelector: map[string]string{"nvidia.com/device-plugin.config": "h100-mig"},
		},
		"request other than the planned one is kept": {
			pod:           pod("ranker-0", ranker, map[string]string{"nvidia.com/gpu": "2"}),
			wantResources: map[string]string{"nvidia.com/gpu": "2"},
			wantScheduler: SchedulerName, wantChanged: true,
		},
		"unplanned workload keeps its request": {
			pod:           pod("other", nil, map[string]string{"nvidia.com/gpu": "1"}),
			wantResources: map[string]string{"nvidia.com/gpu": "1"},
			wantScheduler: SchedulerName, wantChanged: true,
		},
		"no GPU, untouched": {
			pod:           pod("web", ranker, map[string]string{"cpu": "1"}),
			wantResources: map[string]string{"cpu": "1"},
		},
		"whole GPU and MIG slice: rejected": {
			pod:     pod("confused", ranker, map[string]string{"nvidia.com/gpu": "1"}, map[string]string{"nvidia.com/mig-1g.10gb": "1"}),
			wantErr: "pod shop/confused asks for nvidia.com/gpu and nvidia.com/mig-1g.10gb together: a pod gets either whole GPUs (nvidia.com/gpu) or one MIG slice (nvidia.com/mig-<profile>), not both; remove all but one of them",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			original := c.pod.DeepCopy()
			ch, err := Mutate(c.pod, requests(t))
			if c.wantErr != "" {
				if err == nil || err.Error() != c.wantErr {
					t.Fatalf("error = %v, want %q", err, c.wantErr)
				}
				if diff := cmp.Diff(original, c.pod); diff != "" {
					t.Errorf("a rejected pod was altered (-before +after):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (ch != nil) != c.wantChanged {
				t.Fatalf("changes = %+v, want changed %v", ch, c.wantChanged)
			}
			got := map[string]string{}
			for k, q := range c.pod.Spec.Containers[0].Resources.Limits {
				got[string(k)] = q.String()
			}
			if diff := cmp.Diff(c.wantResources, got); diff != "" {
				t.Errorf("limits (-want +got):\n%s", diff)
			}
			if got := c.pod.Annotations["gpupack.io/gpu-memory"]; got != c.wantGPUMemory {
				t.Errorf("annotation gpupack.io/gpu-memory = %q, want %q", got, c.wantGPUMemory)
			}
			if diff := cmp.Diff(c.wantSelector, c.pod.Spec.NodeSelector, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("node selector (-want +got):\n%s", diff)
			}
			if c.pod.Spec.SchedulerName != c.wantScheduler {
				t.Errorf("schedulerName = %q, want %q", c.pod.Spec.SchedulerName, c.wantScheduler)
			}
			// What Mutate did, Revert undoes.
			if err := Revert(c.pod); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(original, c.pod, cmpopts.EquateEmpty(), cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("Revert(Mutate(pod)) != pod (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMutateEngines: a pod moved to a share gets the setting that keeps
// its preallocating engine within it, in its arguments or environment,
// recorded so that Revert restores them; a shell command line that does
// not give the flag keeps the pod's request.
func TestMutateEngines(t *testing.T) {
	chat := map[string]string{"app": "chat"}
	shared := func(engine vram.Setting) map[string]plan.WorkloadRequest {
		return map[string]plan.WorkloadRequest{"shop/chat": {Workload: "shop/chat", Action: plan.Share, Before: "1 GPU",
			After: plan.After{Resource: "nvidia.com/gpu.shared", Count: 1, GPUModel: "H100-80GB", VRAMLimit: 22118, Engine: &engine}}}
	}
	vllmSetting := vram.Setting{Engine: vram.VLLM, Name: "--gpu-memory-utilization", Value: "0.27"}
	with := func(edit func(c *corev1.Container)) *corev1.Pod {
		p := pod("chat-0", chat, map[string]string{"nvidia.com/gpu": "1"})
		edit(&p.Spec.Containers[0])
		return p
	}
	cases := map[string]struct {
		pod      *corev1.Pod
		requests map[string]plan.WorkloadRequest
		want     corev1.Container // the fields the engine reads
		wantKept string
	}{
		"vLLM's flag replaced in its arguments": {
			pod: with(func(c *corev1.Container) {
				c.Image, c.Args = "vllm/vllm-openai:v0.11.0", []string{"--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu-memory-utilization", "0.9"}
			}),
			requests: shared(vllmSetting),
			want:     corev1.Container{Image: "vllm/vllm-openai:v0.11.0", Args: []string{"--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu-memory-utilization", "0.27"}},
		},
		"vLLM's flag added to its arguments": {
			pod:      with(func(c *corev1.Container) { c.Image, c.Command = "vllm/vllm-openai", []string{"vllm", "serve", "m"} }),
			requests: shared(vllmSetting),
			want:     corev1.Container{Image: "vllm/vllm-openai", Command: []string{"vllm", "serve", "m"}, Args: []string{"--gpu-memory-utilization=0.27"}},
		},
		"JAX's variable replaced": {
			pod: with(func(c *corev1.Container) {
				c.Image, c.Env = "nvcr.io/nvidia/jax:25.04-py3", []corev1.EnvVar{{Name: "XLA_PYTHON_CLIENT_MEM_FRACTION", Value: ".75"}, {Name: "OTHER", Value: "x"}}
			}),
			requests: shared(vram.Setting{Engine: vram.JAX, Name: "XLA_PYTHON_CLIENT_MEM_FRACTION", Env: true, Value: "0.04"}),
			want: corev1.Container{Image: "nvcr.io/nvidia/jax:25.04-py3",
				Env: []corev1.EnvVar{{Name: "XLA_PYTHON_CLIENT_MEM_FRACTION", Value: "0.04"}, {Name: "OTHER", Value: "x"}}},
		},
		"TensorFlow told to grow": {
			pod:      with(func(c *corev1.Container) { c.Image = "tensorflow/tensorflow:2.20.0-gpu" }),
			requests: shared(vram.Setting{Engine: vram.TensorFlow, Name: "TF_FORCE_GPU_ALLOW_GROWTH", Env: true, Value: "true"}),
			want:     corev1.Container{Image: "tensorflow/tensorflow:2.20.0-gpu", Env: []corev1.EnvVar{{Name: "TF_FORCE_GPU_ALLOW_GROWTH", Value: "true"}}},
		},
		"a shell line without the flag: the request is kept": {
			pod:      with(func(c *corev1.Container) { c.Image, c.Command = "python:3.12", []string{"sh", "-c", "vllm serve m"} }),
			requests: shared(vllmSetting),
			want:     corev1.Container{Image: "python:3.12", Command: []string{"sh", "-c", "vllm serve m"}},
			wantKept: "container main: the container runs a shell command line that does not give --gpu-memory-utilization; add --gpu-memory-utilization=0.27 to it; the plan's request, which needs it, is kept",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			original := c.pod.DeepCopy()
			ch, err := Mutate(c.pod, c.requests)
			if err != nil {
				t.Fatal(err)
			}
			mc := c.pod.Spec.Containers[0]
			if diff := cmp.Diff(c.want, corev1.Container{Image: mc.Image, Command: mc.Command, Args: mc.Args, Env: mc.Env}, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("container (-want +got):\n%s", diff)
			}
			if ch.Kept != c.wantKept {
				t.Errorf("kept = %q, want %q", ch.Kept, c.wantKept)
			}
			wantResource := "nvidia.com/gpu.shared"
			if c.wantKept != "" {
				wantResource = "nvidia.com/gpu"
			}
			if _, ok := mc.Resources.Limits[corev1.ResourceName(wantResource)]; !ok {
				t.Errorf("limits %v, want %s", mc.Resources.Limits, wantResource)
			}
			if err := Revert(c.pod); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(original, c.pod, cmpopts.EquateEmpty(), cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("Revert(Mutate(pod)) != pod (-want +got):\n%s", diff)
			}
		})
	}
}
