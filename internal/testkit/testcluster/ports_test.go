package testcluster

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestListenHelper is the component that TestStartOnPortsRetriesTakenPort
// starts: the test binary run again with listen=ADDR, serving /health on
// ADDR like etcd, or exiting with Go's bind error when ADDR is taken.
func TestListenHelper(t *testing.T) {
	var addr string
	for _, a := range flag.Args() {
		if v, ok := strings.CutPrefix(a, "listen="); ok {
			addr = v
		}
	}
	if addr == "" {
		t.Skip("only run by TestStartOnPortsRetriesTakenPort")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "listening on", ln.Addr())
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") }))
}

// TestStartOnPortsRetriesTakenPort gives the component a port that another
// server holds, one that answers the readiness probe too: the component
// must not be taken as ready there, and must be started again on a new
// port, where it is.
func TestStartOnPortsRetriesTakenPort(t *testing.T) {
	foreign := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") }), ReadHeaderTimeout: time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = foreign.Serve(ln) }()
	t.Cleanup(func() { _ = foreign.Close() })
	taken := ln.Addr().(*net.TCPAddr).Port

	attempts := 0
	pickPorts = func(n int) []int {
		attempts++
		if attempts == 1 {
			return []int{taken}
		}
		return candidatePorts(n)
	}
	t.Cleanup(func() { pickPorts = candidatePorts })

	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var started []*process
	start := func(name string, args ...string) *process {
		p := startProcess(t, name, dir, dir, self, args...)
		started = append(started, p)
		return p
	}
	p, ports, err := startOnPorts(t.Context(), time.Minute, start, "helper", 1, func(ports []int) []string {
		return []string{"-test.run=^TestListenHelper$", "listen=" + hostPort(ports[0])}
	}, func(ports []int) func(context.Context) error {
		return httpProbe(http.DefaultClient, "http://"+hostPort(ports[0])+"/health")
	})
	if err != nil {
		for _, sp := range started {
			t.Logf("%s log:\n%s", sp.name, sp.logTail())
		}
		t.Fatal(err)
	}
	if ports[0] == taken || attempts != 2 {
		t.Errorf("started on port %d after %d attempts; want a port other than the taken %d, on the second attempt", ports[0], attempts, taken)
	}
	if !listensOn(p.cmd.Process.Pid, ports[0]) || listensOn(p.cmd.Process.Pid, taken) {
		t.Errorf("the component does not hold its port %d alone", ports[0])
	}
	if first := started[0].logTail(); !addressInUse.MatchString(first) {
		t.Errorf("first attempt's log does not say the address is in use:\n%s", first)
	}
	if got := strconv.Itoa(ports[0]); !strings.Contains(p.logTail(), got) {
		t.Errorf("component log %q does not name its port %s", p.logTail(), got)
	}
}
