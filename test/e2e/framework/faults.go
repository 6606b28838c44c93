package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// StateDir is the agent's --state-dir.
func (n *Node) StateDir() string { return filepath.Join(n.Dir, "state") }

// SpawnAgent starts the agent and returns at once, without waiting for it
// to answer /healthz: a test that kills it may want to do so while it is
// still starting.
func (n *Node) SpawnAgent() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.agent != nil {
		return fmt.Errorf("node %s: the agent is already running", n.Name)
	}
	agent, err := startChild("agent", n.agentLog(), append([]string{n.binaries.Agent}, n.agentArgs...)...)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	n.agent = agent
	return nil
}

// KillAgent kills the agent with SIGKILL, as a power cut would stop it,
// together with anything it runs (a kubelet restart command), and returns
// once the process is reaped. It reports whether the agent was still
// running when the signal was sent, and an error when there is no agent.
func (n *Node) KillAgent() (wasRunning bool, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.agent == nil {
		return false, fmt.Errorf("node %s: no agent to kill", n.Name)
	}
	agent := n.agent
	n.agent = nil
	wasRunning = agent.running()
	if err := syscall.Kill(-agent.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return wasRunning, fmt.Errorf("node %s: killing the agent: %w", n.Name, err)
	}
	<-agent.exited
	return wasRunning, nil
}

// AgentLogPath is the agent's log file, which every agent of the node
// appends to.
func (n *Node) AgentLogPath() string { return n.agentLog() }

// RestartKubeletAsAdmin restarts the kubelet the way an administrator
// would (systemctl restart kubelet), behind the agent's back, and waits
// until it has started again.
func (n *Node) RestartKubeletAsAdmin(ctx context.Context) error {
	before, err := n.KubeletRestarts()
	if err != nil {
		return err
	}
	if err := n.kubelet.restartAsAdmin(ctx); err != nil {
		return fmt.Errorf("node %s: restarting the kubelet: %w", n.Name, err)
	}
	return Eventually(ctx, startTimeout, "the kubelet of "+n.Name+" to restart", func(context.Context) (bool, string, error) {
		after, err := n.KubeletRestarts()
		return err == nil && len(after) > len(before), fmt.Sprint(err), nil
	})
}

// FailKubeletProbes makes the next count /healthz requests to the stub
// kubelet fail (HTTP 500), whatever its configuration: a blip. It returns
// once all of them were answered, so the agent, the only prober, has seen
// every one.
func (n *Node) FailKubeletProbes(ctx context.Context, count int) error {
	if !n.IsStub() {
		return fmt.Errorf("node %s: only the stub kubelet fails probes on demand", n.Name)
	}
	base := fmt.Sprintf("http://127.0.0.1:%d/stub/fail-next", n.KubeletHealthzPort)
	client := &http.Client{Timeout: 5 * time.Second}
	// The stub may be between two runs (a restart): ask until it listens.
	err := Eventually(ctx, startTimeout, "the kubelet of "+n.Name+" to take a blip", func(context.Context) (bool, string, error) {
		resp, err := client.Post(fmt.Sprintf("%s?count=%d", base, count), "text/plain", nil)
		if err != nil {
			return false, err.Error(), nil
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, "", fmt.Errorf("node %s: telling the kubelet to fail: %s", n.Name, resp.Status)
		}
		return true, "", nil
	})
	if err != nil {
		return err
	}
	return Eventually(ctx, startTimeout, fmt.Sprintf("%d failed probes of the kubelet of %s", count, n.Name), func(context.Context) (bool, string, error) {
		resp, err := client.Get(base)
		if err != nil {
			return false, err.Error(), nil
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		left := strings.TrimSpace(string(body))
		return err == nil && left == "0", left + " still to fail", nil
	})
}

// AgentExited reports an agent that was started and has died since.
func (n *Node) AgentExited() bool { return n.agentExited() }

// AddAgentArgs adds flags to the agent's command line from its next start
// on; later flags win.
func (n *Node) AddAgentArgs(args ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.agentArgs = append(n.agentArgs, args...)
}
