package scale

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodeguard/nodeguard/test/controlplane"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// The counting proxy runs in a process of its own (test/scale/cmd/countproxy):
// its stamps are the controller's own share of a reaction, and in the
// harness's process, which simulates every kubelet and agent, they waited
// on the harness's goroutines for the CPU, most of all in a wave at 5,000
// Nodes. The harness drives it over a plain-HTTP control endpoint on
// loopback: POST /start counts from zero, GET /record returns what it
// recorded since.

// proxyRecord is what the proxy recorded since it was started.
type proxyRecord struct {
	// Counts are the controller's requests by "verb resource[/sub]".
	Counts map[string]int `json:"counts"`
	// Rejected are those the apiserver answered 429, by the same key
	// (an assignment's apart).
	Rejected map[string]int `json:"rejected"`
	// Levels are the requests by the UID of the priority level that
	// served them.
	Levels map[string]int `json:"levels"`
	// Protos count its requests by protocol.
	Protos map[string]int `json:"protos"`
	// Patches time each Node's latest assignment or revert on the wire.
	Patches map[string]wireTiming `json:"patches"`
	// Deliveries are the Node watch events passed to the controller.
	Deliveries map[string][]delivery `json:"deliveries"`
}

// nodeEvents returns the record's deliveries for lookup.
func (r proxyRecord) nodeEvents() *deliveries {
	d := newDeliveries()
	if r.Deliveries != nil {
		d.byNode = r.Deliveries
	}
	return d
}

func (p *countingProxy) record() proxyRecord {
	p.mu.Lock()
	rec := proxyRecord{Counts: maps.Clone(p.counts), Rejected: maps.Clone(p.rejected), Levels: maps.Clone(p.levels), Protos: maps.Clone(p.protos), Patches: maps.Clone(p.patches)}
	p.mu.Unlock()
	p.nodeEvents.mu.Lock()
	rec.Deliveries = make(map[string][]delivery, len(p.nodeEvents.byNode))
	for node, ds := range p.nodeEvents.byNode {
		rec.Deliveries[node] = append([]delivery(nil), ds...)
	}
	p.nodeEvents.mu.Unlock()
	return rec
}

// controlHandler serves the harness's control endpoint.
func (p *countingProxy) controlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /start", func(w http.ResponseWriter, _ *http.Request) {
		p.start()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /record", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(p.record())
	})
	return mux
}

// proxyAddresses is the one line the proxy process prints on its standard
// output once it serves: where the controller reaches it, the CA to trust
// it by, and where the harness drives it.
type proxyAddresses struct {
	URL     string `json:"url"`
	CAData  []byte `json:"caData"`
	Control string `json:"control"`
}

// ServeCountingProxy runs a counting proxy in front of the apiserver of
// the kubeconfig upstream (whose credentials it sends on every request)
// until ctx ends. Once it serves it writes its addresses to out as one
// line of JSON.
func ServeCountingProxy(ctx context.Context, upstream string, out io.Writer) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", upstream)
	if err != nil {
		return fmt.Errorf("counting proxy: the upstream kubeconfig: %w", err)
	}
	p, err := startCountingProxy(cfg)
	if err != nil {
		return err
	}
	defer p.stop()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("counting proxy: listening for control: %w", err)
	}
	control := &http.Server{Handler: p.controlHandler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- control.Serve(l) }()
	defer func() { _ = control.Close() }()
	line, err := json.Marshal(proxyAddresses{URL: p.url, CAData: p.caData, Control: "http://" + l.Addr().String()})
	if err != nil {
		return fmt.Errorf("counting proxy: %w", err)
	}
	if _, err := fmt.Fprintf(out, "%s\n", line); err != nil {
		return fmt.Errorf("counting proxy: writing its addresses: %w", err)
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-served:
		return fmt.Errorf("counting proxy: control endpoint: %w", err)
	}
}

// proxyProcess is the harness's handle on a running proxy process.
type proxyProcess struct {
	proxyAddresses
	cmd    *exec.Cmd
	waited chan struct{}
	client *http.Client
}

// startProxyProcess builds test/scale/cmd/countproxy into dir and starts it
// in front of upstream, writing upstream's kubeconfig (with its token) and
// the proxy's log into dir. It returns once the proxy serves.
func startProxyProcess(ctx context.Context, dir string, upstream *rest.Config) (*proxyProcess, error) {
	binary, err := framework.BuildPackage(ctx, dir, "./test/scale/cmd/countproxy")
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "counting-proxy-upstream.kubeconfig")
	if err := controlplane.WriteKubeconfig(kubeconfig, upstream); err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "counting-proxy.log"))
	if err != nil {
		return nil, fmt.Errorf("counting proxy: its log: %w", err)
	}
	defer func() { _ = logFile.Close() }() // the child holds its own descriptor
	cmd := exec.Command(binary, "--upstream-kubeconfig="+kubeconfig)
	cmd.Stderr = logFile
	// If the harness dies without stopping it, the proxy dies with it, as
	// the control plane's processes do.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("counting proxy: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("counting proxy: starting %s: %w", binary, err)
	}
	p := &proxyProcess{cmd: cmd, waited: make(chan struct{}), client: &http.Client{Timeout: time.Minute}}
	lines := make(chan []byte, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		if sc.Scan() {
			lines <- bytes.Clone(sc.Bytes())
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { _ = cmd.Wait(); close(p.waited) }()
	select {
	case line, ok := <-lines:
		if !ok {
			p.stop()
			return nil, fmt.Errorf("counting proxy: it exited before serving; see %s", logFile.Name())
		}
		if err := json.Unmarshal(line, &p.proxyAddresses); err != nil {
			p.stop()
			return nil, fmt.Errorf("counting proxy: its addresses %q: %w", line, err)
		}
		return p, nil
	case <-ctx.Done():
		p.stop()
		return nil, fmt.Errorf("counting proxy: waiting for it to serve: %w", ctx.Err())
	case <-time.After(time.Minute):
		p.stop()
		return nil, fmt.Errorf("counting proxy: not serving after a minute; see %s", logFile.Name())
	}
}

// start has the proxy count from zero.
func (p *proxyProcess) start(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.Control+"/start", nil)
	if err != nil {
		return fmt.Errorf("counting proxy: %w", err)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("counting proxy: starting the count: %w", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("counting proxy: starting the count: %s", resp.Status)
	}
	return nil
}

// record returns what the proxy recorded since start.
func (p *proxyProcess) record(ctx context.Context) (proxyRecord, error) {
	var rec proxyRecord
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.Control+"/record", nil)
	if err != nil {
		return rec, fmt.Errorf("counting proxy: %w", err)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return rec, fmt.Errorf("counting proxy: reading its record: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return rec, fmt.Errorf("counting proxy: reading its record: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&rec); err != nil {
		return rec, fmt.Errorf("counting proxy: decoding its record: %w", err)
	}
	return rec, nil
}

// stop ends the proxy process: SIGTERM, then SIGKILL after five seconds.
func (p *proxyProcess) stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.waited:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.waited
	}
}

// running reports whether the proxy process is still running.
func (p *proxyProcess) running() bool {
	select {
	case <-p.waited:
		return false
	default:
		return true
	}
}
