package testcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Ports. A server that can bind port 0 and say which port it got (gpupack's
// own servers, Prometheus) is started so, and the address is read from its
// log (waitLogAddress). etcd, kube-apiserver, kube-scheduler and kwok must
// be told their port, so Start picks one (candidatePort) and starts the
// component again on new ports when it says the address is in use: picking
// a port by closing a listener and reusing its number races with every
// other process of the machine, and no choice made before the bind can be
// sure to win.

// Candidate ports lie below Linux's default ephemeral range (32768-60999),
// from which the kernel hands out the ports of port-0 binds and outgoing
// connections, so a candidate collides only with another server of a fixed
// port; startOnPorts retries on that.
const (
	candidateLow  = 20000
	candidateHigh = 32768
	// portAttempts bounds the restarts on a taken port.
	portAttempts = 8
)

// addressInUse is what a Go server's log says when its port is taken.
var addressInUse = regexp.MustCompile(`bind: address already in use`)

func candidatePort() int { return candidateLow + rand.IntN(candidateHigh-candidateLow) }

// CandidatePort is a port for a server run with Cluster.Run that must be
// told its port (kube-scheduler's --secure-port, where 0 serves nothing):
// one below the ephemeral range, which only another fixed-port server can
// hold.
func CandidatePort() int { return candidatePort() }

// pickPorts chooses the ports of each attempt of startOnPorts; tests
// replace it to force a collision.
var pickPorts = candidatePorts

// candidatePorts returns n distinct candidate ports.
func candidatePorts(n int) []int {
	ports := make([]int, 0, n)
	for len(ports) < n {
		p := candidatePort()
		if !containsPort(ports, p) {
			ports = append(ports, p)
		}
	}
	return ports
}

func containsPort(ports []int, p int) bool {
	for _, q := range ports {
		if q == p {
			return true
		}
	}
	return false
}

// hostPort joins 127.0.0.1 and port.
func hostPort(port int) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// startOnPorts starts a component on n candidate ports (args(ports) gives
// its flags) and waits until probe(ports) succeeds and the component itself
// listens on ports[0], so that another process on that port is never taken
// for it. A component that cannot bind because another process holds a
// port is stopped and started again on new ports. start names each attempt
// (name, then name-2, ...) so their logs are kept apart.
func startOnPorts(ctx context.Context, timeout time.Duration, start func(name string, args ...string) *process, name string, n int,
	args func(ports []int) []string, probe func(ports []int) func(ctx context.Context) error) (*process, []int, error) {
	var lastErr error
	for attempt := 1; attempt <= portAttempts; attempt++ {
		ports := pickPorts(n)
		attemptName := name
		if attempt > 1 {
			attemptName = fmt.Sprintf("%s-%d", name, attempt)
		}
		p := start(attemptName, args(ports)...)
		ready := probe(ports)
		err := waitReady(ctx, p, timeout, func(ctx context.Context) error {
			if addressInUse.MatchString(p.logTail()) {
				return errPortTaken
			}
			if err := ready(ctx); err != nil {
				return err
			}
			if !listensOn(p.cmd.Process.Pid, ports[0]) {
				return fmt.Errorf("%s does not listen on port %d (another process answered)", p.name, ports[0])
			}
			return nil
		})
		if err == nil {
			return p, ports, nil
		}
		if !addressInUse.MatchString(p.logTail()) {
			return nil, nil, err
		}
		p.stop()
		lastErr = fmt.Errorf("%s: ports %v: another process holds one of them", attemptName, ports)
	}
	return nil, nil, fmt.Errorf("%s: gave up after %d attempts on taken ports: %w", name, portAttempts, lastErr)
}

// errPortTaken ends waitReady at once: the component will not bind.
var errPortTaken = errors.New("its address is in use")

// listensOn reports whether process pid holds a listening TCP socket on
// port (Linux: /proc/net/tcp{,6} and /proc/<pid>/fd).
func listensOn(pid, port int) bool {
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			if len(fields) < 10 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			_, hexPort, ok := strings.Cut(fields[1], ":")
			if p, err := strconv.ParseInt(hexPort, 16, 32); ok && err == nil && int(p) == port {
				inodes["socket:["+fields[9]+"]"] = true
			}
		}
		f.Close()
	}
	if len(inodes) == 0 {
		return false
	}
	fds, err := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && inodes[target] {
			return true
		}
	}
	return false
}

// waitLogAddress waits until the process's log has a line that re matches
// and returns its first submatch: the address a server bound to port 0
// says it got.
func waitLogAddress(ctx context.Context, p *process, timeout time.Duration, re *regexp.Regexp) (string, error) {
	var addr string
	err := waitReady(ctx, p, timeout, func(context.Context) error {
		m := re.FindStringSubmatch(p.logTail())
		if m == nil {
			return fmt.Errorf("no line of its log matches %s yet", re)
		}
		addr = m[1]
		return nil
	})
	return addr, err
}
