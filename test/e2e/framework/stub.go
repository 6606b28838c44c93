package framework

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// defaultStubStartupDelay is how long a stub restart keeps /healthz down
// unless told otherwise.
const defaultStubStartupDelay = 100 * time.Millisecond

// stubKubelet runs test/kubeletstub, for the faults no real kubelet
// produces on demand: a health check that fails an exact number of times,
// a set time up between crashes.
type stubKubelet struct {
	node         *Node
	startupDelay string
	args         []string
	pidFile      string
	restartLog   string
	log          string

	mu      sync.Mutex
	process *child
}

func newStubKubelet(n *Node, opts *StubKubelet, args []string) *stubKubelet {
	delay := opts.StartupDelay
	if delay <= 0 {
		delay = defaultStubStartupDelay
	}
	return &stubKubelet{node: n, startupDelay: delay.String(), args: args,
		pidFile:    filepath.Join(n.Dir, "kubelet.pid"),
		restartLog: filepath.Join(n.Dir, "kubelet-restarts.log"),
		log:        filepath.Join(n.Dir, "kubelet.log")}
}

func (s *stubKubelet) writeLocalConfig(path, extra string) error {
	local := KubeletConfigHeader + fmt.Sprintf("healthzBindAddress: 127.0.0.1\nhealthzPort: %d\nproviderID: e2e://%s\n", s.node.KubeletHealthzPort, s.node.Name) + extra
	return writeFile(path, local)
}

func (s *stubKubelet) start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.process != nil {
		return fmt.Errorf("the kubelet is already running")
	}
	_ = os.Remove(s.pidFile)
	args := append([]string{s.node.binaries.KubeletStub, "serve",
		"--config", s.node.KubeletConfigFile, "--healthz-port", strconv.Itoa(s.node.KubeletHealthzPort), "--pid-file", s.pidFile,
		"--restart-log", s.restartLog, "--startup-delay", s.startupDelay}, s.args...)
	process, err := startChild("kubelet stub", s.log, args...)
	if err != nil {
		return err
	}
	s.process = process
	return Eventually(ctx, startTimeout, "the kubelet stub of "+s.node.Name+" to write its PID", func(context.Context) (bool, string, error) {
		if !process.running() {
			return false, "", fmt.Errorf("the kubelet stub of %s exited; log:\n%s", s.node.Name, tail(s.log, 20))
		}
		_, err := os.Stat(s.pidFile)
		return err == nil, fmt.Sprint(err), nil
	})
}

func (s *stubKubelet) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.process != nil {
		s.process.stop()
		s.process = nil
	}
}

func (s *stubKubelet) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.process != nil && s.process.running()
}

func (s *stubKubelet) controlArgs() []string {
	return []string{
		fmt.Sprintf("--kubelet-restart-command=%s restart --pid-file %s", s.node.binaries.KubeletStub, s.pidFile),
		// The stub keeps no state files; a root directory of its own
		// keeps the agent off the host's /var/lib/kubelet.
		"--kubelet-root-dir=" + filepath.Join(s.node.Dir, "stub-root"),
		// It serves /configz beside /healthz, without TLS.
		fmt.Sprintf("--kubelet-server-url=http://127.0.0.1:%d", s.node.KubeletHealthzPort),
	}
}

func (s *stubKubelet) restartAsAdmin(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, s.node.binaries.KubeletStub, "restart", "--pid-file", s.pidFile).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

func (s *stubKubelet) restarts() ([]KubeletRestart, error) {
	f, err := os.Open(s.restartLog)
	if err != nil {
		return nil, fmt.Errorf("the kubelet's restart log: %w", err)
	}
	defer f.Close()
	var restarts []KubeletRestart
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		var r KubeletRestart
		if err := json.Unmarshal(scanner.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("the kubelet's restart log: %w", err)
		}
		restarts = append(restarts, r)
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("the kubelet's restart log: %w", err)
	}
	return restarts, nil
}

func (s *stubKubelet) localFields() []string { return nil }
func (s *stubKubelet) logPath() string       { return s.log }
