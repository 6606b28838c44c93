package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// demoTimeout bounds a whole run: building what is not cached yet and the
// story, on a busy two-core machine.
const demoTimeout = 10 * time.Minute

// TestDemo runs the demonstration as `go run ./hack/localup --demo-only`
// does and checks that it tells the story, then leaves nothing behind.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and three nodes")
	}
	root := t.TempDir()
	// What run's processes must leave alone: the directory it runs from
	// (the repository root under make run). A kubelet on the fake runtime
	// deletes every file in its working directory when it removes a
	// container.
	here, err := filepath.Glob("*")
	if err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	ctx, cancel := context.WithTimeout(t.Context(), demoTimeout)
	defer cancel()
	opts := defaultOptions()
	opts.demoOnly, opts.tempRoot = true, root
	err = run(ctx, opts, &out)
	for _, name := range here {
		if _, statErr := os.Lstat(name); statErr != nil {
			t.Errorf("run removed %s from the directory it ran in: %v", name, statErr)
		}
	}
	if err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	output := out.String()
	var wants []string
	for _, want := range []string{
		"(?m)^\\$ kubectl nodeguard rollout status pool-blue --watch --timeout 2m0s$",
		`(?m)^State: +Complete$`,
		`(?m)^Nodes: +2 selected, 2 updated, 0 in trial, 0 failed$`,
		`(?m)^NODE +KUBELET +ASSIGNED +ACTIVE +LAST-KNOWN-GOOD +RUNNING +PHASE +PENDING-PODS +TRIAL +ERROR$`,
		`(?m)^node-1 +v1\.37\.2 +kubelet-configs/pool-blue@\d+ +kubelet-configs/pool-blue@\d+ +kubelet-configs/pool-blue@\d+ +Matches +<none> +<none> +<none> +<none>$`,
		`(?m)^    node-1: kubelet-configs/pool-blue@\d+ is active and last-known-good \(KubeletConfigReady=True, ConfigActive\)$`,
		`(?m)^    node-2: kubelet-configs/pool-blue@\d+ is active and last-known-good`,
		`(?m)^    node-1: the kubelet itself reports capacity pods=150, and the Node is Ready$`,
		`(?m)^State: +Revert(ing|ed)$`,
		`(?m)^Failed +True +TrialFailed +.*node-1`,
		`(?m)^\(exit code 3\)$`,
		`(?m)^    node-1: the canary, reverted to kubelet-configs/pool-blue@\d+ \(KubeletConfigReady=True, ConfigActive\)$`,
		`(?m)^    node-1: its kubelet, start by start \(from its unit's journal\): start -> stopped, restart -> stopped, restart -> crashed(, auto-restart -> (crashed|stopped))*, restart -> running$`,
		`(?m)^    node-2: never touched: still assigned kubelet-configs/pool-blue, its kubelet not restarted`,
		`(?m)^    node-1 GET configmaps kubelet-configs/pool-blue: allowed`,
		`(?m)^    node-3 GET configmaps kubelet-configs/pool-blue: Forbidden: .*system:node:node-3`,
		`(?m)^    node-3 PATCH nodes node-3 nodeguard\.dev/pool=blue: refused: .*rule 2 \(node-restriction\).*nodeguard\.dev/pool`,
		`(?m)^    node-old registration: refused: .*rule 4 \(min-kubelet-version\)`,
		`(?m)^    node-old GET configmaps kubelet-configs/pool-blue: Forbidden: .*older than the minimum`,
		`(?m)^    node-old GET nodes node-old: allowed`,
		// 4. The static CPU manager policy, through a drain of each Node.
		`(?m)^=== 4\. A change a restart cannot carry: the static CPU manager policy, through a drain$`,
		`(?m)^    node-1: its /configz says cpuManagerPolicy: none; its cpu_manager_state records policyName none$`,
		`(?m)^    demo/web-\S+: Running on node-1$`,
		`(?m)^    demo/web-\S+: Running on node-2$`,
		`(?m)^Waiting for rollout "pool-blue": .*waiting on node-2 \((Draining|Restarting|TrialInProgress)`,
		`(?m)^node-2 +Updated +kubelet-configs/pool-blue-v3@\d+ +kubelet-configs/pool-blue-v3@\d+ +kubelet-configs/pool-blue-v3@\d+ +True +<none>$`,
		// The watch's timeline: each Node assigned, cordoned by its agent,
		// drained of its web pod, restarted, tried and uncordoned, in that
		// order; the canary through its trial before the other Node is
		// assigned; the evicted pods running again on the other Node.
		`(?s)` + timeline("node-1", "assigned kubelet-configs/pool-blue-v3", "cordoned by its agent", `phase Draining, waiting on [^\n]*demo/web-`,
			"phase Restarting", "phase TrialInProgress", "uncordoned"),
		`(?s)` + timeline("node-2", "assigned kubelet-configs/pool-blue-v3", "cordoned by its agent", `phase Draining, waiting on [^\n]*demo/web-`,
			"phase Restarting", "phase TrialInProgress", "uncordoned"),
		`(?s)` + timeline("node-1", "phase TrialInProgress") + timeline("node-2", "assigned"),
		`(?s)` + timeline(`demo/web-\S+`, `evicted \(EvictionByEvictionAPI\) from node-1`) + timeline(`demo/web-\S+`, "Running on node-2"),
		`(?s)` + timeline(`demo/web-\S+`, `evicted \(EvictionByEvictionAPI\) from node-2`) + timeline(`demo/web-\S+`, "Running on node-1"),
		`(?m)^node-1 +v1\.37\.2 +kubelet-configs/pool-blue-v3@\d+ +kubelet-configs/pool-blue-v3@\d+ +kubelet-configs/pool-blue-v3@\d+ +Matches +<none> +<none> +<none> +<none>$`,
		`(?m)^    node-1: its /configz says cpuManagerPolicy: static, systemReserved cpu: 500m; its cpu_manager_state records policyName static`,
		`(?m)^    node-2: its /configz says cpuManagerPolicy: static, systemReserved cpu: 500m; its cpu_manager_state records policyName static`,
		`(?m)^    node-1: schedulable again: uncordoned by its agent`,
		`(?m)^    node-2: schedulable again: uncordoned by its agent`,
		`(?m)^    nodeguard-agent/nodeguard-agent-\S+ \(DaemonSet pod\): on node-1 throughout, never evicted$`,
		// 5. What active means: a flag on node-3's kubelet shadows the
		// assignment, which fails its trial naming it; the operator reads
		// the kubelet's configuration through the apiserver.
		`(?m)^=== 5\. What active means: a kubelet flag that shadows the assignment$`,
		`(?m)^\$ kubectl get --raw /api/v1/nodes/node-3/proxy/configz$`,
		`(?m)^\{"kubeletconfig":\{\.\.\.,"maxPods":58,`,
		`(?m)^node-3 +v1\.37\.2 +kubelet-configs/pool-green@\d+ +local +local +<none> +<none> +<none> +<none> +False +RolledBack +.*maxPods: 120 asked, 58 running \(set by the kubelet's command line: --max-pods=58\)`,
		`(?m)^    node-3: never reported active: the file said 120, the kubelet ran 58`,
		`(?m)^    go run ./cmd/kubectl-nodeguard --kubeconfig \S+/admin\.kubeconfig status$`,
		`(?m)^==> removed \S+; nothing is left running$`,
	} {
		wants = append(wants, want)
	}
	wants = append(wants, pinningLines()...)
	for _, want := range wants {
		if !regexp.MustCompile(want).MatchString(output) {
			t.Errorf("the output has no line matching %s", want)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", output)
	}
	checkNothingLeft(t, root)
}

// pinningLines are what part 4 shows of the CPUs each container may use:
// before the static policy all of them; after it, the Guaranteed pod's
// container on the CPU its checkpoint gives it alone, the others on its
// Node on the rest. On real containers (which this machine runs when it
// can) that is read from their cgroups; on the fake runtime, from the
// checkpoint, with the machine's reason for the fallback said on screen.
func pinningLines() []string {
	if err := framework.ContainersSupported(); err != nil {
		return []string{
			`(?m)^    this machine runs no real containers \(`,
			`(?m)^    demo/pinned-\S+ on node-\d: cpu_manager_state gives it CPU \d+ for itself \(the fake runtime runs nothing`,
		}
	}
	return []string{
		`(?m)^    the nodes run real containers: each its own containerd and runc`,
		`(?m)^==> under the none policy every container may run on every CPU:$`,
		`(?m)^    demo/pinned-\S+ on node-\d: its container's cgroup has cpuset.cpus 0-\d+, and the kernel lets its process \(pid \d+\) run on CPUs 0-\d+; cpu_manager_state gives it no CPU of its own \(policy none, shared pool all CPUs\)$`,
		`(?m)^==> under the static policy the Guaranteed container has a CPU of its own, and the others on its Node have lost it:$`,
		`(?m)^    demo/pinned-\S+ on node-\d: its container's cgroup has cpuset.cpus (\d+), and the kernel lets its process \(pid \d+\) run on CPUs (\d+); cpu_manager_state gives it CPU (\d+) for itself$`,
		`(?m)^    demo/web-\S+ on node-\d: its container's cgroup has cpuset.cpus \d+, and the kernel lets its process \(pid \d+\) run on CPUs \d+; cpu_manager_state gives it no CPU of its own \(policy static, shared pool \d+\)$`,
	}
}

// timeline is a pattern of the lines of part 4's timeline ("  8.6s  node-2
// cordoned ...") in which subject (a pattern) did each of what (patterns),
// in that order, other lines between them.
func timeline(subject string, what ...string) string {
	var b strings.Builder
	for _, w := range what {
		b.WriteString(`\n    +\d+\.\ds  ` + subject + ` +` + w + `.*?`)
	}
	return b.String()
}

// TestInterruptLeavesNothing interrupts runs at several points, as Ctrl-C
// would, and checks that every process and file is gone when run returns.
func TestInterruptLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts control planes")
	}
	for _, tc := range []struct {
		name string
		// at is the start of the output line on which to interrupt, after
		// a pause of after. Where a pause lands varies from run to run;
		// wherever it does, nothing may be left.
		at    string
		after time.Duration
	}{
		{"while the control plane starts", "==> starting etcd and kube-apiserver", 3 * time.Second},
		{"while the nodes start", "==> starting 3 nodes", 0},
		{"with everything running", "=== 1. ", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			ctx, cancel := context.WithTimeout(t.Context(), demoTimeout)
			defer cancel()
			interrupt, interrupted := context.WithCancel(ctx)
			defer interrupted()
			var once sync.Once
			out := &lockedBuffer{onWrite: func(all string) {
				if strings.Contains(all, "\n"+tc.at) {
					once.Do(func() { time.AfterFunc(tc.after, interrupted) })
				}
			}}
			opts := defaultOptions()
			opts.tempRoot = root
			err := run(interrupt, opts, out)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("run returned %v, want an interruption\noutput:\n%s", err, out.String())
			}
			if !strings.Contains(out.String(), "\n"+tc.at) {
				t.Fatalf("the run never got to %q\noutput:\n%s", tc.at, out.String())
			}
			checkNothingLeft(t, root)
		})
	}
}

// checkNothingLeft fails the test if anything is left under root, or any
// process has root on its command line (every process run starts does: the
// work directory holds their data, certificates and files).
func checkNothingLeft(t *testing.T, root string) {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("left behind: %s", filepath.Join(root, e.Name()))
	}
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range procs {
		cmdline, err := os.ReadFile(path)
		if err != nil {
			continue // exited meanwhile
		}
		if bytes.Contains(cmdline, []byte(root)) {
			t.Errorf("still running: %s (%s)", strings.ReplaceAll(string(bytes.TrimRight(cmdline, "\x00")), "\x00", " "), filepath.Dir(path))
		}
	}
}

// lockedBuffer collects the output; onWrite, when set, sees all of it after
// each write.
type lockedBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	onWrite func(all string)
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	if b.onWrite != nil {
		b.onWrite(b.buf.String())
	}
	return n, err
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
