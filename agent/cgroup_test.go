package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	testUID   = "1d7c5e2a-3b4f-4c6d-8e9f-0a1b2c3d4e5f"
	testUIDus = "1d7c5e2a_3b4f_4c6d_8e9f_0a1b2c3d4e5f"
	testCID   = "4b6c1e0f2a3d5e7f9a8b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f"
)

func TestParseCgroup(t *testing.T) {
	cases := map[string]struct {
		data    string
		want    CgroupRef
		wantOK  bool
		wantErr bool
	}{
		"v2 systemd containerd": {
			data:   "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + testUIDus + ".slice/cri-containerd-" + testCID + ".scope\n",
			want:   CgroupRef{PodUID: testUID, ContainerID: testCID},
			wantOK: true,
		},
		"v2 systemd cri-o guaranteed": {
			data:   "0::/kubepods.slice/kubepods-pod" + testUIDus + ".slice/crio-" + testCID + ".scope\n",
			want:   CgroupRef{PodUID: testUID, ContainerID: testCID},
			wantOK: true,
		},
		"v2 cri-o conmon is the pod, not a container": {
			data:   "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + testUIDus + ".slice/crio-conmon-" + testCID + ".scope\n",
			want:   CgroupRef{PodUID: testUID},
			wantOK: true,
		},
		"v2 cgroupfs nested in kind": {
			data:   "0::/docker/0123456789ab/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod" + testUIDus + ".slice/cri-containerd-" + testCID + ".scope\n",
			want:   CgroupRef{PodUID: testUID, ContainerID: testCID},
			wantOK: true,
		},
		"v2 cgroupfs driver": {
			data:   "0::/kubepods/burstable/pod" + testUID + "/" + testCID + "\n",
			want:   CgroupRef{PodUID: testUID, ContainerID: testCID},
			wantOK: true,
		},
		"v1 cgroupfs driver, memory hierarchy": {
			data: "12:pids:/user.slice\n11:memory:/kubepods/besteffort/pod" + testUID + "/" + testCID + "\n" +
				"1:name=systemd:/kubepods/besteffort/pod" + testUID + "/" + testCID + "\n",
			want:   CgroupRef{PodUID: testUID, ContainerID: testCID},
			wantOK: true,
		},
		"v1 systemd with an empty v2 line (hybrid)": {
			data: "4:cpu,cpuacct:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + testUIDus + ".slice/cri-containerd-" + testCID + ".scope\n" +
				"0::/\n",
			want:   CgroupRef{PodUID: testUID, ContainerID: testCID},
			wantOK: true,
		},
		"host daemon": {
			data: "0::/system.slice/nvidia-persistenced.service\n",
		},
		"kubepods slice without a pod": {
			data: "0::/kubepods.slice/kubepods-burstable.slice\n",
		},
		"pod segment with a bad uid": {
			data: "0::/kubepods/burstable/podnot-a-uid/" + testCID + "\n",
		},
		"malformed line": {
			data:    "garbage\n",
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok, err := ParseCgroup([]byte(tc.data))
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseCgroup: error %v, want error %v", err, tc.wantErr)
			}
			if ok != tc.wantOK {
				t.Errorf("ParseCgroup: ok %v, want %v", ok, tc.wantOK)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseCgroup (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzParseCgroup: any input gives a pod UID of 32 hex digits with ok, or
// nothing; never a panic.
func FuzzParseCgroup(f *testing.F) {
	f.Add([]byte("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + testUIDus + ".slice/cri-containerd-" + testCID + ".scope\n"))
	f.Add([]byte("11:memory:/kubepods/besteffort/pod" + testUID + "/" + testCID + "\n"))
	f.Add([]byte("0::/\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ref, ok, err := ParseCgroup(data)
		if err != nil && ok {
			t.Fatalf("ok with error %v", err)
		}
		if ok && !isUID(ref.PodUID) {
			t.Fatalf("pod UID %q is not a UID", ref.PodUID)
		}
		if !ok && ref != (CgroupRef{}) {
			t.Fatalf("not ok but ref %+v", ref)
		}
	})
}
