package testcluster

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// stopGrace is how long a component gets to exit after SIGTERM before its
// process group is killed.
const stopGrace = 10 * time.Second

// logTailBytes is how much of each component's log is printed when a test fails.
const logTailBytes = 64 << 10

// process is one running component, in its own process group, with its
// standard output and error in a log file.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{} // closed once the process has been waited for
	waitErr error         // set before exited is closed
}

// startProcess starts binary with args in a new process group, its output in
// logDir/<name>.log and HOME set to home so that no user configuration leaks
// in. It registers a cleanup that stops the whole process group.
func startProcess(t testing.TB, name, logDir, home, binary string, args ...string) *process {
	t.Helper()
	return startProcessEnv(t, name, logDir, home, binary, nil, args...)
}

// startProcessEnv is startProcess with env (NAME=VALUE) added to the
// process's environment, for a component that reads settings only from its
// environment (Karpenter's KUBECONFIG, KEDA's namespaces).
func startProcessEnv(t testing.TB, name, logDir, home, binary string, env []string, args ...string) *process {
	t.Helper()
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("testcluster: create log file for %s: %v", name, err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TMPDIR=" + home}, env...)
	// Pdeathsig kills the component if the test binary dies without running
	// its cleanups (a panic in another goroutine, a kill from go test -timeout).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		t.Fatalf("testcluster: start %s (%s): %v", name, binary, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		_ = logFile.Close()
		close(p.exited)
	}()
	t.Cleanup(p.stop)
	return p
}

// stop sends SIGTERM to the process group, then SIGKILL after stopGrace, and
// always kills the group at the end so that no child outlives the test.
// It is idempotent.
func (p *process) stop() {
	pgid := p.cmd.Process.Pid
	select {
	case <-p.exited:
	default:
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(stopGrace):
		}
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-p.exited
}

// exitedEarly returns an error naming the component if it is no longer running.
func (p *process) exitedEarly() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited early (%v); its log is printed below", p.name, p.waitErr)
	default:
		return nil
	}
}

// logTail returns the last logTailBytes of the component's log.
func (p *process) logTail() string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.logPath, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(cannot stat %s: %v)", p.logPath, err)
	}
	var prefix string
	if info.Size() > logTailBytes {
		if _, err := f.Seek(-logTailBytes, io.SeekEnd); err != nil {
			return fmt.Sprintf("(cannot seek %s: %v)", p.logPath, err)
		}
		prefix = fmt.Sprintf("(last %d of %d bytes)\n", logTailBytes, info.Size())
	}
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, f); err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.logPath, err)
	}
	return prefix + buf.String()
}
