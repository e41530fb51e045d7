package agent

import (
	"bytes"
	"fmt"
	"strings"
)

// CgroupRef is what a process's cgroup says of it: the pod's UID and the
// container's runtime ID. ContainerID is "" for a process of the pod's
// own cgroup outside any container.
type CgroupRef struct {
	PodUID      string
	ContainerID string
}

// ParseCgroup reads the contents of /proc/PID/cgroup (cgroup v1, one line
// per hierarchy "ID:controllers:path", or v2, the single line "0::path")
// and finds the kubelet's pod and container in the path. It understands
// the systemd cgroup driver (kubepods.slice/kubepods-burstable.slice/
// kubepods-burstable-pod<uid>.slice/cri-containerd-<id>.scope, or
// crio-<id>.scope for CRI-O) and the cgroupfs driver
// (kubepods/burstable/pod<uid>/<id>), also nested under another cgroup as
// in kind. The v2 line wins over v1 lines. ok is false for a process
// outside any pod (a host daemon); a line that is not "ID:controllers:path"
// is an error.
func ParseCgroup(data []byte) (ref CgroupRef, ok bool, err error) {
	var v1 []string
	for n, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		fields := strings.SplitN(string(line), ":", 3)
		if len(fields) != 3 {
			return CgroupRef{}, false, fmt.Errorf("cgroup line %d %q: want hierarchy-ID:controllers:path", n+1, line)
		}
		if fields[0] == "0" && fields[1] == "" {
			if ref, ok := podOfPath(fields[2]); ok {
				return ref, true, nil
			}
			continue
		}
		v1 = append(v1, fields[2])
	}
	for _, path := range v1 {
		if ref, ok := podOfPath(path); ok {
			return ref, true, nil
		}
	}
	return CgroupRef{}, false, nil
}

// podOfPath finds the pod segment of a cgroup path below a kubepods
// segment, and the container segment right after it.
func podOfPath(path string) (CgroupRef, bool) {
	segs := strings.Split(path, "/")
	kube := -1
	for i, s := range segs {
		if s == "kubepods" || strings.HasPrefix(s, "kubepods.") || strings.HasPrefix(s, "kubepods-") || strings.HasSuffix(s, "-kubepods.slice") {
			kube = i
			break
		}
	}
	if kube < 0 {
		return CgroupRef{}, false
	}
	for i := kube; i < len(segs); i++ {
		uid, ok := podUIDOf(segs[i])
		if !ok {
			continue
		}
		ref := CgroupRef{PodUID: uid}
		if i+1 < len(segs) {
			ref.ContainerID = containerIDOf(segs[i+1])
		}
		return ref, true
	}
	return CgroupRef{}, false
}

// podUIDOf reads a pod segment: "pod<uid>" (cgroupfs) or
// "kubepods[-qos]-pod<uid_with_underscores>.slice" (systemd).
func podUIDOf(seg string) (string, bool) {
	var uid string
	switch {
	case strings.HasSuffix(seg, ".slice"):
		i := strings.LastIndex(seg, "-pod")
		if i < 0 {
			return "", false
		}
		uid = strings.ReplaceAll(strings.TrimSuffix(seg[i+len("-pod"):], ".slice"), "_", "-")
	case strings.HasPrefix(seg, "pod"):
		uid = seg[len("pod"):]
	default:
		return "", false
	}
	if !isUID(uid) {
		return "", false
	}
	return uid, true
}

// containerIDOf reads a container segment: "<id>" (cgroupfs) or
// "<runtime>-<id>.scope" (systemd: cri-containerd-, crio-, docker-); ""
// for anything else, such as CRI-O's conmon scope.
func containerIDOf(seg string) string {
	id := seg
	if strings.HasSuffix(seg, ".scope") {
		id = strings.TrimSuffix(seg, ".scope")
		switch {
		case strings.HasPrefix(id, "cri-containerd-"):
			id = strings.TrimPrefix(id, "cri-containerd-")
		case strings.HasPrefix(id, "crio-") && !strings.HasPrefix(id, "crio-conmon-"):
			id = strings.TrimPrefix(id, "crio-")
		case strings.HasPrefix(id, "docker-"):
			id = strings.TrimPrefix(id, "docker-")
		default:
			return ""
		}
	}
	if len(id) < 12 || !isHex(id) {
		return ""
	}
	return id
}

// isUID says s looks like a pod UID: hex digits and dashes, 32 digits.
func isUID(s string) bool {
	digits := 0
	for _, c := range s {
		switch {
		case c == '-':
		case isHexRune(c):
			digits++
		default:
			return false
		}
	}
	return digits == 32
}

func isHex(s string) bool {
	for _, c := range s {
		if !isHexRune(c) {
			return false
		}
	}
	return true
}

func isHexRune(c rune) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
