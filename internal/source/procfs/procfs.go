// Package procfs is the agent's /proc adapter: it reads a process's
// cgroup file under a configurable root (the host's /proc where the agent
// shares the host's PID namespace; a fake tree in tests) and leaves its
// parsing to agent.ParseCgroup.
package procfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/gpupack/gpupack/agent"
)

// Reader reads processes under Root.
type Reader struct {
	Root string
}

// Cgroup reads the cgroup of process pid: ok false for a process in no
// pod; an error for one that is gone or unreadable, or a file that does
// not parse (naming the file).
func (r Reader) Cgroup(pid uint32) (agent.CgroupRef, bool, error) {
	path := filepath.Join(r.Root, strconv.FormatUint(uint64(pid), 10), "cgroup")
	data, err := os.ReadFile(path)
	if err != nil {
		return agent.CgroupRef{}, false, err
	}
	ref, ok, err := agent.ParseCgroup(data)
	if err != nil {
		return agent.CgroupRef{}, false, fmt.Errorf("%s: %w", path, err)
	}
	return ref, ok, nil
}
