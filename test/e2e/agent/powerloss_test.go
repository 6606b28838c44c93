package agent_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubelet"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
	"github.com/nodeguard/nodeguard/test/statedir"
)

// powerLossPlan is how hard TestPowerLoss works: kills is the target,
// budget bounds the time spent (the test stops early, never fails, when it
// runs out), convergeEvery is how often the kills pause for a check that a
// restarted agent converges.
type powerLossPlan struct {
	kills         int
	budget        time.Duration
	convergeEvery int
}

func planPowerLoss() powerLossPlan {
	if os.Getenv("NODEGUARD_SOAK") == "1" {
		return powerLossPlan{kills: 1000, budget: 20 * time.Minute, convergeEvery: 100}
	}
	return powerLossPlan{kills: 200, budget: 150 * time.Second, convergeEvery: 50}
}

// Agent settings for the power-loss run: trials short enough that they pass
// (last-known-good moves, the trial record goes) and fail (the bad list
// grows, a rollback is written) within the life of an agent that is about
// to be killed.
var powerLossAgentArgs = []string{
	"--trial-period=1s",
	// A real kubelet takes about a second from its restart to /healthz.
	"--trial-grace-period=3s",
	"--health-probe-period=100ms",
	"--health-probe-timeout=80ms",
	"--resync-period=1s",
}

// TestPowerLoss kills the agent (SIGKILL, with whatever it runs) at random
// moments, hundreds of times, while an administrator keeps changing what
// its Node is assigned: new assignments, in-place edits, a configuration
// that crashes the kubelet (so trials fail and roll back), and clearing the
// assignment. After every kill, before anything else touches the node:
//
//   - the state directory, read with the agent's own checkpoint reader
//     (test/statedir's Inspect, which moves nothing), holds only sound files:
//     every record and checkpoint decodes and passes its checksum, every
//     pointer resolves to a checkpoint, each checkpoint holds exactly what the
//     apiserver stored for that UID and resourceVersion; temporary files of
//     interrupted writes are counted, never read as state;
//   - the kubelet's file decodes strictly and is, byte for byte, the local
//     configuration or the rendering of a configuration that was assigned;
//   - every kubelet restart so far read such a file.
//
// Every convergeEvery kills, and at the end, the changes stop, a last
// configuration is assigned and a new agent must take it through its trial
// to last-known-good, leave no temporary file in its state directory, and
// leave a kubelet running exactly that file.
//
// Only the agent dies, and the page cache survives SIGKILL: this shows what
// a killed process leaves (every write is a rename of a complete file), not
// what reaches the platters in a real power cut. The order of the durable
// steps (fsync before rename, payload before pointer) is checked step by
// step by the failpoint tests in pkg/durable,
// pkg/nodeagent/checkpoint and pkg/nodeagent/reconciler (crash_test.go).
func TestPowerLoss(t *testing.T) {
	plan := planPowerLoss()
	n := newNode(t, nodeOptions{agentArgs: powerLossAgentArgs})
	n.passedLocal()
	n.recordedKubeletVersion()
	h := newPowerLossHarness(t, n)
	// The agent newNode started is at rest: its end is not a kill that
	// counts, but what it leaves is checked like the rest.
	if _, err := n.KillAgent(); err != nil {
		t.Fatal(err)
	}
	// From now on, no HTTP server: its port comes from the ephemeral range,
	// and between two agents an outgoing connection may take it
	// (EADDRINUSE), which would end the agent before it is killed.
	n.AddAgentArgs("--listen-address=")
	h.mu.Lock()
	if err := h.checkLeftovers(true); err != nil {
		t.Fatal(err)
	}
	h.stats = powerLossStats{}
	h.mu.Unlock()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 7))
	t.Logf("plan: %d kills within %v; kill delays from seed %d", plan.kills, plan.budget, seed)

	start := time.Now()
	h.startChanges()
	for h.stats.kills < plan.kills && time.Since(start) < plan.budget {
		h.killOnce(rng)
		if h.stats.kills%plan.convergeEvery == 0 {
			h.stopChanges()
			h.converge()
			h.startChanges()
		}
	}
	h.stopChanges()
	h.converge()
	s := h.stats
	t.Logf("%d kills (%d aimed) in %v (%d changes by the administrator, %d convergence checks): "+
		"%d agents killed before they watched the Node, %d after applying a configuration; "+
		"%d kills left a new temporary file in the state directory, %d in the kubelet's directory (killed mid-write); "+
		"state changes seen between kills: assigned %d, last-known-good %d, bad list %d, kubelet file %d; "+
		"kubelet restarts checked %d",
		s.kills, s.aimed, time.Since(start).Round(time.Second), h.changes, s.converged,
		s.beforeOnline, s.afterApply, s.stateTemps, s.kubeletTemps,
		s.assignedMoves, s.lkgMoves, s.badGrew, s.fileChanges, s.restartsChecked)
	if s.kills < plan.kills {
		t.Logf("the time budget ran out after %d of %d kills", s.kills, plan.kills)
	}
}

// passedLocal waits until the agent reports the local configuration.
func (n *node) passedLocal() {
	n.t.Helper()
	n.waitReport("the local configuration", func(o framework.Report) bool { return o.Status.Assigned == nil && o.Condition != nil })
}

// recordedKubeletVersion waits until the agent has recorded the kubelet
// version in its state directory. The agent reports the local configuration
// before its Node informer shows the version the kubelet registered, and
// writes the record only then: until it has, the agent is not at rest.
func (n *node) recordedKubeletVersion() {
	n.t.Helper()
	n.eventually("the kubelet version recorded in the state directory", func() (bool, string) {
		in, err := statedir.Inspect(n.StateDir())
		if err != nil {
			return false, err.Error()
		}
		return in.KubeletVersion != "" && len(in.Temporary) == 0, fmt.Sprintf("recorded %q, temporary files %v", in.KubeletVersion, in.Temporary)
	})
}

type powerLossStats struct {
	kills, aimed, converged          int
	beforeOnline, afterApply         int
	stateTemps, kubeletTemps         int
	assignedMoves, lkgMoves, badGrew int
	fileChanges, restartsChecked     int
}

// powerLossHarness is the node under test and what the administrator did to
// it. mu is held while the cluster is changed and what changed is recorded,
// and while a killed agent's leftovers are checked, so a check never sees a
// version the agent read before the harness recorded it.
type powerLossHarness struct {
	t        *testing.T
	n        *node
	renderer kubelet.Renderer

	mu sync.Mutex
	// versions is every ConfigMap version created, by checkpoint file name.
	versions map[string]string
	// files is every kubelet file the agent may write, by SHA-256.
	files   map[string]string
	changes int
	edits   int

	stop context.CancelFunc
	done chan struct{}

	stats        powerLossStats
	last         statedir.Inspection
	lastFile     string
	restartsSeen int
	// kubeletTempsSeen is how many temporary files the kubelet's directory
	// held at the last check.
	kubeletTempsSeen int
}

func newPowerLossHarness(t *testing.T, n *node) *powerLossHarness {
	h := &powerLossHarness{
		t:        t,
		n:        n,
		renderer: kubelet.Renderer{Mode: kubelet.ModeConfig, LocalConfigFile: n.LocalConfigFile, LocalFields: n.LocalFields()},
		versions: map[string]string{},
		files:    map[string]string{},
	}
	local, err := h.renderer.Local()
	if err != nil {
		t.Fatal(err)
	}
	h.files[sha(local.Data)] = "the local configuration"
	return h
}

func sha(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// put creates or edits a ConfigMap and records the version and its
// rendering; the caller holds mu.
func (h *powerLossHarness) put(name, config string) (*corev1.ConfigMap, error) {
	cm, err := framework.PutKubeletConfigMap(h.n.ctx, env.Admin, h.n.ns, name, config)
	if err != nil {
		return nil, err
	}
	data := cm.Data[contract.ConfigMapKey]
	h.versions[statedir.CheckpointName(contract.ConfigMapVersion{UID: string(cm.UID), ResourceVersion: cm.ResourceVersion})] = data
	rendered, err := h.renderer.Assigned([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", name, err)
	}
	h.files[sha(rendered.Data)] = name + " at resourceVersion " + cm.ResourceVersion
	return cm, nil
}

// change makes one random change, as an administrator would.
func (h *powerLossHarness) change(rng *rand.Rand) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.changes++
	h.edits++
	var source string
	switch r := rng.IntN(100); {
	case r < 35:
		source = "pl-a"
	case r < 60:
		source = "pl-b"
	case r < 75:
		_, err := h.put("pl-a", fmt.Sprintf("maxPods: %d\n", 100+h.edits))
		return err
	case r < 85:
		if _, err := h.put("pl-crash", fmt.Sprintf("maxPods: %d\n%s", 100+h.edits, framework.CrashingKubelet())); err != nil {
			return err
		}
		source = "pl-crash"
	default:
		source = ""
	}
	if source != "" {
		source = h.n.ns + "/" + source
	}
	return h.n.Assign(h.n.ctx, source)
}

// startChanges starts the administrator: one change after another, with
// pauses mostly short and now and then long enough for a trial to end.
func (h *powerLossHarness) startChanges() {
	h.mu.Lock()
	if len(h.versions) == 0 {
		for name, config := range map[string]string{"pl-a": "maxPods: 100\n", "pl-b": "maxPods: 99\n"} {
			if _, err := h.put(name, config); err != nil {
				h.mu.Unlock()
				h.t.Fatal(err)
			}
		}
	}
	h.mu.Unlock()
	ctx, cancel := context.WithCancel(h.n.ctx)
	h.stop, h.done = cancel, make(chan struct{})
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	go func() {
		defer close(h.done)
		for ctx.Err() == nil {
			if err := h.change(rng); err != nil && ctx.Err() == nil {
				h.t.Errorf("changing the assignment: %v", err)
				return
			}
			pause := time.Duration(rng.IntN(300)) * time.Millisecond
			if rng.IntN(5) == 0 {
				pause = time.Duration(500+rng.IntN(1000)) * time.Millisecond
			}
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
		}
	}()
}

func (h *powerLossHarness) stopChanges() {
	h.stop()
	<-h.done
}

// killOnce starts an agent, kills it at a random moment and checks what
// it left. Half the kills are free-running: a random delay after the start,
// mostly within the first few hundred milliseconds (where an agent starts,
// reads its state, connects and applies), sometimes later (when trials end
// and roll back). The other half are aimed: once the agent watches its
// Node, the harness makes a change itself and kills a random few
// milliseconds later, when the agent is most likely writing.
func (h *powerLossHarness) killOnce(rng *rand.Rand) {
	t := h.t
	t.Helper()
	logStart := fileSize(t, h.n.AgentLogPath())
	aimed := rng.IntN(2) == 0
	var delay time.Duration
	switch {
	case aimed:
		delay = time.Duration(rng.IntN(40_000)) * time.Microsecond
	case rng.IntN(10) < 3:
		delay = time.Duration(400+rng.IntN(1100)) * time.Millisecond
	default:
		delay = time.Duration(rng.IntN(400)) * time.Millisecond
	}
	if err := h.n.SpawnAgent(); err != nil {
		t.Fatal(err)
	}
	if aimed {
		h.n.eventually("the agent to watch its Node", func() (bool, string) {
			life := readFrom(t, h.n.AgentLogPath(), logStart)
			if h.n.AgentExited() {
				t.Fatalf("kill %d: the agent exited by itself; its log:\n%s", h.stats.kills+1, lastLines(life, 40))
			}
			return strings.Contains(life, "Watching the Node"), fmt.Sprintf("log since its start (%d bytes from offset %d):\n%s", len(life), logStart, lastLines(life, 20))
		})
		if err := h.change(rng); err != nil {
			t.Fatal(err)
		}
	}
	// The random kill point itself: nothing is awaited here.
	time.Sleep(delay)
	wasRunning, err := h.n.KillAgent()
	if err != nil {
		t.Fatal(err)
	}
	h.stats.kills++
	if aimed {
		h.stats.aimed++
	}
	if !wasRunning {
		t.Fatalf("kill %d: the agent had exited by itself; log:\n%s", h.stats.kills, h.n.AgentLogTail(40))
	}
	life := readFrom(t, h.n.AgentLogPath(), logStart)
	if !strings.Contains(life, "Watching the Node") {
		h.stats.beforeOnline++
	}
	if strings.Contains(life, "Applied a kubelet configuration") {
		h.stats.afterApply++
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.checkLeftovers(false); err != nil {
		t.Fatalf("kill %d (aimed: %v), %v after the agent started: %v\nthe agent's last words:\n%s", h.stats.kills, aimed, delay, err, lastLines(life, 15))
	}
}

// checkLeftovers checks the state directory, the kubelet's file and the
// kubelet's restarts; the caller holds mu.
func (h *powerLossHarness) checkLeftovers(atRest bool) error {
	in, err := statedir.Inspect(h.n.StateDir())
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if len(in.Quarantined) > 0 {
		return fmt.Errorf("state directory: the agent found files corrupt: %v", in.Quarantined)
	}
	for name, cp := range in.Checkpoints {
		want, ok := h.versions[name]
		if !ok || !cp.HasKey || cp.Config != want {
			return fmt.Errorf("checkpoint %s holds %q; the apiserver stored %q (known: %v)", name, cp.Config, want, ok)
		}
	}
	if len(in.Temporary) > 0 {
		if atRest {
			return fmt.Errorf("a started agent left temporary files in its state directory: %v", in.Temporary)
		}
		h.stats.stateTemps++
	}

	data, err := os.ReadFile(h.n.KubeletConfigFile)
	if err != nil {
		return fmt.Errorf("kubelet file: %w", err)
	}
	if _, err := kubeletconfig.Decode(data); err != nil {
		return fmt.Errorf("kubelet file does not decode strictly: %w\n%s", err, data)
	}
	fileSum := sha(data)
	if _, ok := h.files[fileSum]; !ok {
		return fmt.Errorf("kubelet file is neither the local configuration nor one that was assigned:\n%s", data)
	}
	// The agent does not clean these up, so count only new ones.
	temps, err := temporaryFiles(filepath.Dir(h.n.KubeletConfigFile))
	if err != nil {
		return err
	}
	if temps > h.kubeletTempsSeen {
		h.stats.kubeletTemps++
	}
	h.kubeletTempsSeen = temps

	restarts := h.n.restartRecords()
	for _, r := range restarts[h.restartsSeen:] {
		if _, ok := h.files[r.SHA256]; !ok {
			return fmt.Errorf("the kubelet restarted with a file that was never assigned (sha256 %s)", r.SHA256)
		}
	}
	h.stats.restartsChecked += len(restarts) - h.restartsSeen
	h.restartsSeen = len(restarts)

	if !sameRefPtr(in.Assigned, h.last.Assigned) {
		h.stats.assignedMoves++
	}
	if !sameRefPtr(in.LastKnownGood, h.last.LastKnownGood) {
		h.stats.lkgMoves++
	}
	if len(in.Bad) > len(h.last.Bad) {
		h.stats.badGrew++
	}
	if fileSum != h.lastFile {
		h.stats.fileChanges++
	}
	h.last, h.lastFile = in, fileSum
	return nil
}

// converge assigns a new version of a good configuration and checks that a
// new agent takes it through its trial and cleans up after its killed
// predecessors.
func (h *powerLossHarness) converge() {
	t := h.t
	t.Helper()
	h.stats.converged++
	h.mu.Lock()
	h.edits++
	final, err := h.put("pl-a", fmt.Sprintf("maxPods: %d\n", 100+h.edits))
	h.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	h.n.assign("pl-a")

	if err := h.n.SpawnAgent(); err != nil {
		t.Fatal(err)
	}
	h.n.passed(final)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.checkLeftovers(true); err != nil {
		t.Fatalf("after convergence %d: %v", h.stats.converged, err)
	}
	rendered, err := h.renderer.Assigned([]byte(final.Data[contract.ConfigMapKey]))
	if err != nil {
		t.Fatal(err)
	}
	if h.lastFile != sha(rendered.Data) {
		t.Fatalf("after convergence %d: the kubelet file is not the final configuration's:\n%s", h.stats.converged, h.n.kubeletFile())
	}
	in := h.last
	want := &contract.ConfigMapVersion{Namespace: final.Namespace, Name: final.Name, UID: string(final.UID), ResourceVersion: final.ResourceVersion}
	if !sameRefPtr(in.Assigned, want) || !sameRefPtr(in.LastKnownGood, want) || in.Active == nil || !sameRefPtr(in.Active.Ref, want) || in.Trial != nil {
		t.Fatalf("after convergence %d: state directory %+v", h.stats.converged, in)
	}
	restarts := h.n.restartRecords()
	if last := restarts[len(restarts)-1]; last.SHA256 != h.lastFile || last.Behavior != framework.KubeletRunning {
		t.Fatalf("after convergence %d: the kubelet's last restart was with %+v", h.stats.converged, last)
	}
	// Not a kill that counts: the agent is at rest.
	if _, err := h.n.KillAgent(); err != nil {
		t.Fatal(err)
	}
}

func sameRefPtr(a, b *contract.ConfigMapVersion) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// temporaryFiles counts the dot files in dir: renameio's temporary files,
// which a killed writer leaves behind.
func temporaryFiles(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("listing %s: %w", dir, err)
	}
	count := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			count++
		}
	}
	return count, nil
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

func readFrom(t *testing.T, path string, offset int64) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if offset > int64(len(data)) {
		return ""
	}
	return string(data[offset:])
}

func lastLines(text string, n int) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
