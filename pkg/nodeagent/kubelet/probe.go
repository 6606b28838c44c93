package kubelet

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Prober asks the kubelet's /healthz whether it is healthy.
type Prober struct {
	URL     string
	Timeout time.Duration
	client  *http.Client
}

// NewProber probes url, giving each probe timeout.
func NewProber(url string, timeout time.Duration) *Prober {
	return &Prober{
		URL:     url,
		Timeout: timeout,
		client: &http.Client{Transport: &http.Transport{
			// The kubelet is local: never go through a proxy from the
			// environment.
			Proxy: nil,
			// A fresh connection per probe, so that a kubelet that stopped
			// accepting connections is noticed and no idle connection
			// outlives a restart.
			DisableKeepAlives: true,
		}},
	}
}

// Probe returns nil when /healthz answers 200.
func (p *Prober) Probe(ctx context.Context) error {
	if p.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.Timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL, nil)
	if err != nil {
		return fmt.Errorf("probing the kubelet: %w", err)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("probing the kubelet at %s: %w", p.URL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("probing the kubelet at %s: %s: %s", p.URL, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
