package procfs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/agent"
)

const (
	uid = "1d7c5e2a-3b4f-4c6d-8e9f-0a1b2c3d4e5f"
	cid = "4b6c1e0f2a3d5e7f9a8b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f"
)

// TestCgroup reads a fake /proc with a cgroup v2 process (systemd,
// containerd), a cgroup v1 process (cgroupfs), a host daemon, a broken
// file and a process that is gone.
func TestCgroup(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"100": "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1d7c5e2a_3b4f_4c6d_8e9f_0a1b2c3d4e5f.slice/cri-containerd-" + cid + ".scope\n",
		"200": "12:devices:/kubepods/besteffort/pod" + uid + "/" + cid + "\n11:memory:/kubepods/besteffort/pod" + uid + "/" + cid + "\n",
		"300": "0::/system.slice/nvidia-persistenced.service\n",
		"400": "not a cgroup file\n",
	}
	for pid, content := range files {
		if err := os.MkdirAll(filepath.Join(root, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, pid, "cgroup"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := Reader{Root: root}
	want := agent.CgroupRef{PodUID: uid, ContainerID: cid}
	for _, pid := range []uint32{100, 200} {
		got, ok, err := r.Cgroup(pid)
		if err != nil || !ok {
			t.Fatalf("Cgroup(%d): ok %v, error %v; want the pod", pid, ok, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Cgroup(%d) (-want +got):\n%s", pid, diff)
		}
	}
	if _, ok, err := r.Cgroup(300); ok || err != nil {
		t.Errorf("Cgroup(300), a host daemon: ok %v, error %v; want neither", ok, err)
	}
	if _, _, err := r.Cgroup(400); err == nil {
		t.Error("Cgroup(400), a malformed file: no error")
	}
	if _, _, err := r.Cgroup(500); !os.IsNotExist(err) {
		t.Errorf("Cgroup(500), gone: error %v, want not exist", err)
	}
}
