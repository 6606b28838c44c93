package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/nodeguard/nodeguard/test/controlplane"
	"github.com/nodeguard/nodeguard/test/freeport"
)

// The rollout controller's identity and Lease, as manifests/base names them.
const (
	RolloutControllerNamespace      = "nodeguard"
	RolloutControllerServiceAccount = "nodeguard-rollout-controller"
	RolloutControllerLease          = "nodeguard-rollout-controller"
)

// Lease timings of a test replica: a SIGKILLed leader is replaced within
// seconds instead of the shipped 15s.
const (
	rolloutLeaseDuration = 4 * time.Second
	rolloutRenewDeadline = 3 * time.Second
	rolloutRetryPeriod   = 500 * time.Millisecond
)

// RolloutController is one replica of cmd/rollout-controller, run as its
// own process with a token of its ServiceAccount (TokenRequest), so that
// the RBAC manifests/base ships is what it is allowed: Start applied that
// RBAC and the CRD from manifests/base, not copies.
type RolloutController struct {
	// Identity is the replica's name in the Lease.
	Identity string
	// URL serves its /healthz, /readyz and /metrics.
	URL string

	log   string
	argv  []string
	mu    sync.Mutex
	child *child
}

var (
	rolloutBinaryMu sync.Mutex
	rolloutBinaries = map[string]string{}
)

// rolloutControllerBinary builds cmd/rollout-controller once per work
// directory.
func (e *Env) rolloutControllerBinary(ctx context.Context) (string, error) {
	rolloutBinaryMu.Lock()
	defer rolloutBinaryMu.Unlock()
	if path, ok := rolloutBinaries[e.dir]; ok {
		return path, nil
	}
	paths, err := buildPackages(ctx, filepath.Join(e.dir, "bin-rollout-controller"), "./cmd/rollout-controller")
	if err != nil {
		return "", err
	}
	rolloutBinaries[e.dir] = paths[0]
	return paths[0], nil
}

// RolloutControllerConfig is a rest.Config with a fresh token of the
// controller's ServiceAccount.
func (e *Env) RolloutControllerConfig(ctx context.Context) (*rest.Config, error) {
	expiry := int64(time.Hour / time.Second)
	token, err := e.Admin.CoreV1().ServiceAccounts(RolloutControllerNamespace).CreateToken(ctx, RolloutControllerServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("a token for %s/%s: %w", RolloutControllerNamespace, RolloutControllerServiceAccount, err)
	}
	return &rest.Config{Host: e.CP.URL(), BearerToken: token.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: e.CP.CA().CertPEM()}}, nil
}

// StartRolloutController starts a replica named identity, leader-elected
// over the shipped Lease with short timings, and returns once its /healthz
// answers (it may not lead yet). args are added to its flags; later flags
// win.
func (e *Env) StartRolloutController(ctx context.Context, identity string, args ...string) (*RolloutController, error) {
	binary, err := e.rolloutControllerBinary(ctx)
	if err != nil {
		return nil, err
	}
	return e.StartRolloutControllerBinary(ctx, binary, identity, args...)
}

// StartRolloutControllerBinary is StartRolloutController with a
// cmd/rollout-controller already built, e.g. from another tree, so that
// one harness can measure two builds; it must take the flags above.
func (e *Env) StartRolloutControllerBinary(ctx context.Context, binary, identity string, args ...string) (*RolloutController, error) {
	cfg, err := e.RolloutControllerConfig(ctx)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(e.dir, "rollout-controller", identity)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := controlplane.WriteKubeconfig(kubeconfig, cfg); err != nil {
		return nil, err
	}
	port, err := freeport.Get()
	if err != nil {
		return nil, err
	}
	c := &RolloutController{Identity: identity, URL: "http://127.0.0.1:" + strconv.Itoa(port), log: filepath.Join(dir, "controller.log")}
	c.argv = append([]string{binary,
		"--kubeconfig=" + kubeconfig,
		"--listen-address=127.0.0.1:" + strconv.Itoa(port),
		"--leader-elect=true",
		"--leader-elect-identity=" + identity,
		"--leader-elect-lease-namespace=" + RolloutControllerNamespace,
		"--leader-elect-lease-name=" + RolloutControllerLease,
		"--leader-elect-lease-duration=" + rolloutLeaseDuration.String(),
		"--leader-elect-renew-deadline=" + rolloutRenewDeadline.String(),
		"--leader-elect-retry-period=" + rolloutRetryPeriod.String(),
		"--resync-period=30s",
		// The agents of each suite run trials of their own length, seconds
		// long; a test that judges the controller's count by a trial's
		// period says it in spec.trial. Later flags win.
		"--trial-period=1s",
		"-v=2",
	}, args...)
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Start (re)starts the replica's process and waits for its /healthz.
func (c *RolloutController) Start(ctx context.Context) error {
	c.mu.Lock()
	if c.child != nil && c.child.running() {
		c.mu.Unlock()
		return fmt.Errorf("rollout controller %s is running", c.Identity)
	}
	child, err := startChild("rollout-controller", c.log, c.argv...)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	c.child = child
	c.mu.Unlock()
	return Eventually(ctx, startTimeout, "rollout controller "+c.Identity+" to answer /healthz", func(context.Context) (bool, string, error) {
		if !child.running() {
			return false, "", fmt.Errorf("rollout controller %s exited; log:\n%s", c.Identity, c.LogTail(30))
		}
		code, err := c.get("/healthz")
		return err == nil && code == http.StatusOK, fmt.Sprint(code, err), nil
	})
}

// Kill SIGKILLs the replica: it neither releases its Lease nor finishes
// what it was doing.
func (c *RolloutController) Kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.child == nil {
		return
	}
	_ = syscall.Kill(-c.child.cmd.Process.Pid, syscall.SIGKILL)
	<-c.child.exited
	c.child = nil
}

// Stop stops the replica with SIGTERM (it releases its Lease).
func (c *RolloutController) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.child != nil {
		c.child.stop()
		c.child = nil
	}
}

// PID is the process's id while it runs, else 0.
func (c *RolloutController) PID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.child == nil || !c.child.running() {
		return 0
	}
	return c.child.cmd.Process.Pid
}

// Running reports whether the process runs.
func (c *RolloutController) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.child != nil && c.child.running()
}

// Leading reports whether the replica says it leads (its
// nodeguard_rollout_leader metric).
func (c *RolloutController) Leading() (bool, error) {
	body, err := c.Metrics()
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "nodeguard_rollout_leader ") {
			return strings.TrimSpace(strings.TrimPrefix(line, "nodeguard_rollout_leader ")) == "1", nil
		}
	}
	return false, errors.New("no nodeguard_rollout_leader metric")
}

// Metrics returns its /metrics page.
func (c *RolloutController) Metrics() (string, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(c.URL + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

func (c *RolloutController) get(path string) (int, error) {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(c.URL + path)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// LogTail returns the last lines of the replica's log.
func (c *RolloutController) LogTail(lines int) string { return tail(c.log, lines) }
