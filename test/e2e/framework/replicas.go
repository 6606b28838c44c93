package framework

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nodeguard/nodeguard/test/freeport"
)

// Replica is one more webhook process beside the Env's own: the same binary
// and arguments, on a port of its own, so that a test can run several
// behind a load balancer, or one with files of its own.
type Replica struct {
	// Name tells replicas apart in logs.
	Name string
	// URL is the replica's base URL, https://127.0.0.1:PORT.
	URL string

	env     *Env
	args    []string
	logPath string

	mu    sync.Mutex
	child *child
}

// readyTimeout bounds a webhook's start: informers sync and policies
// compile in a few seconds even on a busy machine.
const readyTimeout = 2 * time.Minute

// StartReplica starts the webhook binary with the Env's arguments on a free
// port, extraArgs last (so they win), and returns once its /readyz passes.
func (e *Env) StartReplica(ctx context.Context, name string, extraArgs ...string) (*Replica, error) {
	port, err := freeport.Get()
	if err != nil {
		return nil, err
	}
	args := append(append([]string{}, e.args...), "--secure-port="+strconv.Itoa(port))
	r := &Replica{
		Name:    name,
		URL:     "https://127.0.0.1:" + strconv.Itoa(port),
		env:     e,
		args:    append(args, extraArgs...),
		logPath: filepath.Join(e.dir, "webhook-"+name+".log"),
	}
	if err := r.Start(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// Start starts the replica's process again, after Stop, on the same port,
// and returns once its /readyz passes.
func (r *Replica) Start(ctx context.Context) error {
	r.mu.Lock()
	if r.child != nil && r.child.running() {
		r.mu.Unlock()
		return fmt.Errorf("replica %s already running", r.Name)
	}
	c, err := startChild("webhook "+r.Name, r.logPath, append([]string{r.env.binary}, r.args...)...)
	if err != nil {
		r.mu.Unlock()
		return err
	}
	r.child = c
	r.mu.Unlock()
	return r.WaitReady(ctx, readyTimeout)
}

// WaitReady polls /readyz until it passes, the process exits, or timeout.
func (r *Replica) WaitReady(ctx context.Context, timeout time.Duration) error {
	r.mu.Lock()
	c := r.child
	r.mu.Unlock()
	if c == nil {
		return fmt.Errorf("replica %s not started", r.Name)
	}
	return Eventually(ctx, timeout, "webhook "+r.Name+" ready", func(context.Context) (bool, string, error) {
		if !c.running() {
			return false, "", fmt.Errorf("webhook %s exited; log:\n%s", r.Name, r.LogTail(30))
		}
		code, err := r.probe("/readyz")
		return code == http.StatusOK, fmt.Sprintf("readyz %d %v", code, err), nil
	})
}

// Ready reports whether /readyz passes now.
func (r *Replica) Ready() bool {
	code, err := r.probe("/readyz")
	return err == nil && code == http.StatusOK
}

func (r *Replica) probe(path string) (int, error) {
	resp, err := r.env.ProbeClient.Get(r.URL + path)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Stop sends SIGTERM and waits for the process to exit (SIGKILL after a
// grace period); it reports an exit that was not clean.
func (r *Replica) Stop() error {
	r.mu.Lock()
	c := r.child
	r.mu.Unlock()
	if c == nil {
		return nil
	}
	c.stop()
	if state := c.cmd.ProcessState; state != nil && !state.Success() {
		return fmt.Errorf("webhook %s exited with %v; log:\n%s", r.Name, state, r.LogTail(20))
	}
	return nil
}

// Running reports whether the process is running.
func (r *Replica) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.child != nil && r.child.running()
}

// LogTail returns the last lines of the replica's log.
func (r *Replica) LogTail(lines int) string { return tail(r.logPath, lines) }

// WebhookArg returns the value the Env's webhook was given for flag (say
// "--tls-cert-file"), the last one when given twice, or "" when not given.
func (e *Env) WebhookArg(flag string) string {
	value := ""
	for _, arg := range e.args {
		if v, ok := strings.CutPrefix(arg, flag+"="); ok {
			value = v
		}
	}
	return value
}

// StopReplicas stops each replica, reporting every unclean exit.
func StopReplicas(replicas ...*Replica) error {
	var errs []error
	for _, r := range replicas {
		if r != nil {
			errs = append(errs, r.Stop())
		}
	}
	return errors.Join(errs...)
}
