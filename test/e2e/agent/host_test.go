package agent_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// hostState is what a kubelet left alone changes on its host (docs/agent.md,
// Tests): the sysctls it checks or writes, the mount table (it makes its
// root directory a shared mount) and the directories it creates whatever
// its root directory is.
type hostState struct {
	sysctls map[string]string
	mounts  []string
	dirs    map[string]bool
}

func readHostState(t *testing.T) hostState {
	t.Helper()
	s := hostState{sysctls: map[string]string{}, dirs: map[string]bool{}}
	for key := range framework.HostSysctls {
		data, err := os.ReadFile(filepath.Join("/proc/sys", key))
		if err != nil {
			t.Fatal(err)
		}
		s.sysctls[key] = strings.TrimSpace(string(data))
	}
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	s.mounts = strings.Split(strings.TrimSpace(string(info)), "\n")
	slices.Sort(s.mounts)
	for _, dir := range []string{"/var/log/containers", "/var/log/pods", "/var/lib/kubelet", "/var/lib/kubelet/device-plugins"} {
		_, err := os.Stat(dir)
		s.dirs[dir] = err == nil
	}
	return s
}

// TestHostUntouched runs real kubelets through starts, an assignment, a
// crash loop and a rollback, and checks that the host's sysctls, mounts and
// directories are as they were: each kubelet ran in a mount namespace of its
// own, with its /proc/sys entries and /var/lib and /var/log covered there.
func TestHostUntouched(t *testing.T) {
	before := readHostState(t)
	func() {
		n := newNode(t, nodeOptions{})
		defer n.Stop()
		good := n.configMap("kubelet-good", "maxPods: 57\n")
		n.assign("kubelet-good")
		n.passed(good)
		n.configMap("kubelet-bad", "maxPods: 58\n"+framework.CrashingKubelet())
		n.assign("kubelet-bad")
		n.eventually("the bad configuration to crash the kubelet", func() (bool, string) {
			return slices.Contains(n.restarts(), framework.KubeletCrashed), strings.Join(n.restarts(), " ")
		})
		n.waitKubeletRuns(57)
	}()
	after := readHostState(t)

	for key, was := range before.sysctls {
		if now := after.sysctls[key]; now != was {
			t.Errorf("sysctl %s changed from %s to %s", key, was, now)
		}
	}
	for dir, existed := range before.dirs {
		if after.dirs[dir] != existed {
			t.Errorf("%s: existed %v before, %v after", dir, existed, after.dirs[dir])
		}
	}
	for _, line := range after.mounts {
		if !slices.Contains(before.mounts, line) {
			t.Errorf("a mount appeared or changed: %s", line)
		}
	}
	for _, line := range before.mounts {
		if !slices.Contains(after.mounts, line) {
			t.Errorf("a mount went or changed: %s", line)
		}
	}
}
