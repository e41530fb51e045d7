package testcluster

import (
	"io"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// Proxy forwards TCP connections to a server so that a test can cut them:
// every open connection closes and new ones are refused at once, as when
// the server or the network between goes away, and then come back. Fault
// tests put one in front of the apiserver to drop the watches of a
// long-running client.
type Proxy struct {
	t      testing.TB
	target string
	ln     net.Listener

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]bool
}

// NewProxy listens on a loopback port and forwards to target (host:port).
// It closes at cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testcluster: proxy: %v", err)
	}
	p := &Proxy{t: t, target: target, ln: ln, conns: map[net.Conn]bool{}}
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.Cut()
	})
	return p
}

// Addr is where the proxy listens.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every forwarded connection and refuses new ones until Resume.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// Resume forwards new connections again.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

func (p *Proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = in.Close()
			continue
		}
		p.mu.Unlock()
		go p.forward(in)
	}
}

func (p *Proxy) forward(in net.Conn) {
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = in.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		_ = in.Close()
		_ = out.Close()
		return
	}
	p.conns[in], p.conns[out] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	<-done
	_ = in.Close()
	_ = out.Close()
	p.mu.Lock()
	delete(p.conns, in)
	delete(p.conns, out)
	p.mu.Unlock()
}

// ProxiedKubeconfig writes a kubeconfig of the administrator's that
// reaches the apiserver through a new Proxy, which the test can Cut.
func (c *Cluster) ProxiedKubeconfig() (string, *Proxy) {
	c.t.Helper()
	u, err := url.Parse(c.config.Host)
	if err != nil {
		c.t.Fatalf("testcluster: apiserver URL %q: %v", c.config.Host, err)
	}
	p := NewProxy(c.t, u.Host)
	cfg, err := clientcmd.LoadFromFile(c.kubeconfig)
	if err != nil {
		c.t.Fatalf("testcluster: read kubeconfig: %v", err)
	}
	for _, cl := range cfg.Clusters {
		cl.Server = "https://" + p.Addr()
	}
	path := filepath.Join(c.dir, "kubeconfig-proxied-"+strings.ReplaceAll(p.Addr(), ":", "-"))
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		c.t.Fatalf("testcluster: write kubeconfig: %v", err)
	}
	return path, p
}
