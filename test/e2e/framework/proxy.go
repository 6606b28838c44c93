package framework

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
)

// Proxy is a loopback TCP proxy between one client (the webhook) and the
// apiserver, which a test can cut and restore to simulate a network
// partition: Cut closes every connection through it and refuses new ones,
// so that watches end and lists fail with "connection refused", as when
// the apiserver is unreachable; Restore accepts again on the same address.
// TLS passes through untouched.
type Proxy struct {
	target string

	mu       sync.Mutex
	addr     string
	listener net.Listener
	conns    map[net.Conn]struct{}
	closed   bool
	wg       sync.WaitGroup
}

// NewProxy starts a proxy to target (host:port) on a free loopback port.
func NewProxy(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy: listening: %w", err)
	}
	p := &Proxy{target: target, addr: l.Addr().String(), conns: make(map[net.Conn]struct{})}
	p.serve(l)
	return p, nil
}

// ProxyAPIServer is an Options.APIServerForWebhook that starts a Proxy to
// the apiserver and hands it to use.
func ProxyAPIServer(use func(*Proxy)) func(string) (string, error) {
	return func(apiserverURL string) (string, error) {
		u, err := url.Parse(apiserverURL)
		if err != nil {
			return "", fmt.Errorf("proxy: apiserver URL %q: %w", apiserverURL, err)
		}
		p, err := NewProxy(u.Host)
		if err != nil {
			return "", err
		}
		use(p)
		u.Host = p.Addr()
		return u.String(), nil
	}
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

func (p *Proxy) serve(l net.Listener) {
	p.listener = l
	p.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.pipe(c) })
		}
	})
}

func (p *Proxy) pipe(client net.Conn) {
	upstream, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(client, upstream) {
		client.Close()
		upstream.Close()
		return
	}
	defer p.untrack(client, upstream)
	done := make(chan struct{}, 2)
	copyThenClose := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go copyThenClose(upstream, client)
	go copyThenClose(client, upstream)
	<-done
	<-done
}

// track registers a connection pair unless the proxy is cut.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.listener == nil || p.closed {
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
	}
}

// Connections is how many connections pass through the proxy now.
func (p *Proxy) Connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns) / 2
}

// Cut closes every connection and stops accepting: new connections are
// refused until Restore.
func (p *Proxy) Cut() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.listener == nil {
		return nil
	}
	err := p.listener.Close()
	p.listener = nil
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
	if err != nil {
		return fmt.Errorf("proxy: closing listener: %w", err)
	}
	return nil
}

// Restore accepts connections again on the same address.
func (p *Proxy) Restore() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return errors.New("proxy: closed")
	case p.listener != nil:
		return nil
	}
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		return fmt.Errorf("proxy: listening again on %s: %w", p.addr, err)
	}
	p.serve(l)
	return nil
}

// Close cuts the proxy for good and waits for its goroutines.
func (p *Proxy) Close() error {
	err := p.Cut()
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.wg.Wait()
	return err
}
