package faults_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeguard/nodeguard/pkg/authz"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// TestWatchCutRevokesAssignmentAfterRecovery cuts the webhook's
// connections to the apiserver, clears a node's assignment while they are
// cut, and shows: once the cut outlasts --graph-stale-after the webhook is
// unready and never allows the read it can no longer vouch for; after the
// cut, the informers catch up and the read is refused, by the webhook and
// through the apiserver; and all along every review is answered, the
// untouched node's read is refused only while the graph is stale, and
// admission is unaffected.
func TestWatchCutRevokesAssignmentAfterRecovery(t *testing.T) {
	ctx := t.Context()
	ns := newNamespace(t)
	n1, n2 := ns+"-n1", ns+"-n2"
	for _, step := range []error{
		eligibleConfigMap(ctx, ns, "a"), eligibleConfigMap(ctx, ns, "b"),
		registerNode(ctx, n1, ns, "a"), registerNode(ctx, n2, ns, "b"),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	deleteNodeOnCleanup(t, n1)
	deleteNodeOnCleanup(t, n2)
	n1Client := nodeClient(t, n1)
	waitRead(t, n1Client, ns, "a", true, revocationDeadline)

	tr := startTraffic(ctx, 20,
		review{"n1 reads a", "/authorize", sarBody(n1, ns, "a")},
		review{"n2 reads b", "/authorize", sarBody(n2, ns, "b")},
		review{"n2 status update", "/validate", nodeStatusReviewBody(n2)})
	defer tr.stop()

	cut(t)
	node, err := admin.CoreV1().Nodes().Get(ctx, n1, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(node.Annotations, contract.ConfigSourceAnnotation)
	if _, err := admin.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("clearing n1's assignment while the webhook is cut off: %v", err)
	}
	staleSeen := waitStale(t)
	if a, err := post(ctx, "/authorize", sarBody(n1, ns, "a")); err != nil || a.allowed || a.reason != authz.ReasonGraphStale {
		t.Fatalf("n1 reads a from the stale graph: %+v, %v; want no opinion, %q", a, err, authz.ReasonGraphStale)
	}
	waitTraffic(t, tr, "n1 reads a", staleSeen, 10)

	restoreAt := time.Now()
	restore(t)
	revokedAt := waitWebhookRevoked(t, sarBody(n1, ns, "a"))
	waitRead(t, n1Client, ns, "a", false, revocationDeadline)
	// The untouched node reads again once the graph is fresh: refusals from
	// the stale period are not cached.
	waitRead(t, nodeClient(t, n2), ns, "b", true, revocationDeadline)

	checkTraffic(t, tr.stop(), trafficWant{
		revoked:   []string{"n1 reads a"},
		kept:      []string{"n2 reads b"},
		admitted:  []string{"n2 status update"},
		staleSeen: staleSeen, restoreAt: restoreAt, revokedAt: revokedAt,
	})
}

// TestAPIServerRestartRelistsDeletes deletes, while the webhook is cut
// off, the ConfigMap a node is assigned and the pod through which another
// node reads its ConfigMap, then restarts the apiserver so that its watch
// cache no longer holds those events: the webhook's informers must relist,
// see the deletes only as DeletedFinalStateUnknown tombstones, and drop
// both paths.
func TestAPIServerRestartRelistsDeletes(t *testing.T) {
	ctx := t.Context()
	ns := newNamespace(t)
	n3, n4 := ns+"-n3", ns+"-n4"
	for _, step := range []error{
		eligibleConfigMap(ctx, ns, "c"), eligibleConfigMap(ctx, ns, "d"),
		registerNode(ctx, n3, ns, "c"), registerNode(ctx, n4, ns, ""),
		boundPod(ctx, ns, "p", n4, "d"),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	deleteNodeOnCleanup(t, n3)
	deleteNodeOnCleanup(t, n4)
	n3Client, n4Client := nodeClient(t, n3), nodeClient(t, n4)
	waitRead(t, n3Client, ns, "c", true, revocationDeadline)
	waitRead(t, n4Client, ns, "d", true, revocationDeadline)

	tr := startTraffic(ctx, 20,
		review{"n3 reads c", "/authorize", sarBody(n3, ns, "c")},
		review{"n4 reads d", "/authorize", sarBody(n4, ns, "d")},
		review{"n3 status update", "/validate", nodeStatusReviewBody(n3)})
	defer tr.stop()

	tombstones := map[string]float64{}
	for _, informer := range []string{"pods", "configmaps"} {
		v, err := counter(ctx, `nodeguard_graph_tombstones_total{informer="`+informer+`"}`)
		if err != nil {
			t.Fatal(err)
		}
		tombstones[informer] = v
	}
	cut(t)
	if err := admin.CoreV1().ConfigMaps(ns).Delete(ctx, "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := admin.CoreV1().Pods(ns).Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	staleSeen := waitStale(t)
	if err := env.CP.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	if err := env.CP.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	waitTraffic(t, tr, "n4 reads d", staleSeen, 10)

	restoreAt := time.Now()
	restore(t)
	revokedAt := waitWebhookRevoked(t, sarBody(n3, ns, "c"), sarBody(n4, ns, "d"))
	// The restarted apiserver's watch cache cannot replay the deletes, so
	// the graph can only have learnt them from a relist's tombstones.
	for informer, before := range tombstones {
		v, err := counter(ctx, `nodeguard_graph_tombstones_total{informer="`+informer+`"}`)
		if err != nil || v < before+1 {
			t.Errorf("nodeguard_graph_tombstones_total{informer=%q} = %v (%v), was %v: want the delete applied from a tombstone", informer, v, err, before)
		}
	}
	waitRead(t, n3Client, ns, "c", false, revocationDeadline)
	waitRead(t, n4Client, ns, "d", false, revocationDeadline)

	checkTraffic(t, tr.stop(), trafficWant{
		revoked:   []string{"n3 reads c", "n4 reads d"},
		admitted:  []string{"n3 status update"},
		staleSeen: staleSeen, restoreAt: restoreAt, revokedAt: revokedAt,
	})
}

// TestAPIServerRestartUnderTraffic restarts the apiserver, with nothing
// cut, while traffic runs: every review is answered, the node's read is
// refused only for staleness, and afterwards the informers follow the new
// apiserver: the read works through it, and a revocation made after the
// restart reaches the webhook.
func TestAPIServerRestartUnderTraffic(t *testing.T) {
	ctx := t.Context()
	ns := newNamespace(t)
	n5 := ns + "-n5"
	if err := eligibleConfigMap(ctx, ns, "e"); err != nil {
		t.Fatal(err)
	}
	if err := registerNode(ctx, n5, ns, "e"); err != nil {
		t.Fatal(err)
	}
	deleteNodeOnCleanup(t, n5)
	n5Client := nodeClient(t, n5)
	waitRead(t, n5Client, ns, "e", true, revocationDeadline)

	tr := startTraffic(ctx, 20,
		review{"n5 reads e", "/authorize", sarBody(n5, ns, "e")},
		review{"n5 status update", "/validate", nodeStatusReviewBody(n5)})
	defer tr.stop()
	stoppedAt := time.Now()
	if err := env.CP.StopAPIServer(); err != nil {
		// With watches open it may not exit on SIGTERM in time and is
		// killed: a crash, which is a restart too.
		if !strings.Contains(err.Error(), "killed it") {
			t.Fatal(err)
		}
		t.Logf("kube-apiserver: %v", err)
	}
	if err := env.CP.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	waitTraffic(t, tr, "n5 reads e", stoppedAt, 20)
	if _, err := waitReadyz(ctx, true, recoveryDeadline); err != nil {
		t.Fatal(err)
	}
	waitRead(t, n5Client, ns, "e", true, revocationDeadline)
	answers := tr.stop()

	node, err := admin.CoreV1().Nodes().Get(ctx, n5, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(node.Annotations, contract.ConfigSourceAnnotation)
	if _, err := admin.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitWebhookRevoked(t, sarBody(n5, ns, "e"))
	waitRead(t, n5Client, ns, "e", false, revocationDeadline)

	checkTraffic(t, answers, trafficWant{
		kept:     []string{"n5 reads e"},
		admitted: []string{"n5 status update"},
	})
}

func nodeClient(t *testing.T, node string) kubernetes.Interface {
	t.Helper()
	c, err := env.NodeClient(node)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitRead waits until node's get of namespace/name through the apiserver
// succeeds (allowed) or is forbidden (!allowed).
func waitRead(t *testing.T, c kubernetes.Interface, namespace, name string, allowed bool, timeout time.Duration) {
	t.Helper()
	what := fmt.Sprintf("a node's get of %s/%s to be forbidden", namespace, name)
	if allowed {
		what = fmt.Sprintf("a node's get of %s/%s to succeed", namespace, name)
	}
	err := framework.Eventually(t.Context(), timeout, what, func(ctx context.Context) (bool, string, error) {
		_, err := c.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
		if allowed {
			return err == nil, fmt.Sprint(err), nil
		}
		return apierrors.IsForbidden(err), fmt.Sprint(err), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// cut cuts the webhook off the apiserver, making sure it comes back even
// when the test fails half-way.
func cut(t *testing.T) {
	t.Helper()
	if err := proxy.Cut(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := proxy.Restore(); err != nil {
			t.Error(err)
		}
		if _, err := waitReadyz(context.Background(), true, recoveryDeadline); err != nil {
			t.Errorf("webhook did not recover after the test: %v", err)
		}
	})
}

func restore(t *testing.T) {
	t.Helper()
	if err := proxy.Restore(); err != nil {
		t.Fatal(err)
	}
	if _, err := waitReadyz(t.Context(), true, recoveryDeadline); err != nil {
		t.Fatal(err)
	}
	if v, err := metric(t.Context(), "nodeguard_graph_stale"); err != nil || v != 0 {
		t.Fatalf("nodeguard_graph_stale = %v, %v after recovery; want 0", v, err)
	}
}

// waitStale waits until the webhook reports its graph stale, in /readyz
// (failing, with the detail) and in its metric, and returns when it saw it.
func waitStale(t *testing.T) time.Time {
	t.Helper()
	body, err := waitReadyz(t.Context(), false, staleAfter+recoveryDeadline)
	if err != nil {
		t.Fatal(err)
	}
	seen := time.Now()
	for _, want := range []string{"[-]graph-fresh failed", "[!]graph-fresh degraded: graph is stale", "disconnected for"} {
		if !strings.Contains(body, want) {
			t.Fatalf("/readyz?verbose while stale lacks %q:\n%s", want, body)
		}
	}
	if v, err := metric(t.Context(), "nodeguard_graph_stale"); err != nil || v != 1 {
		t.Fatalf("nodeguard_graph_stale = %v, %v while stale; want 1", v, err)
	}
	return seen
}

// waitTraffic waits until the traffic holds n answers of the named review
// sent after since, so that the checks on them are not vacuous.
func waitTraffic(t *testing.T, tr *traffic, name string, since time.Time, n int) {
	t.Helper()
	err := framework.Eventually(t.Context(), time.Minute, fmt.Sprintf("%d answers to %q", n, name), func(context.Context) (bool, string, error) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		got := 0
		for _, s := range tr.answers {
			if s.name == name && !s.at.Before(since) {
				got++
			}
		}
		return got >= n, fmt.Sprint(got), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitWebhookRevoked waits until the webhook itself, asked directly,
// refuses every one of the reviews for want of a path, and returns when.
func waitWebhookRevoked(t *testing.T, bodies ...[]byte) time.Time {
	t.Helper()
	err := framework.Eventually(t.Context(), recoveryDeadline, "the webhook to refuse the revoked reads", func(ctx context.Context) (bool, string, error) {
		for _, b := range bodies {
			a, err := post(ctx, "/authorize", b)
			if err != nil {
				return false, "", err
			}
			if a.allowed || a.reason != authz.ReasonNoPath {
				return false, fmt.Sprintf("%+v", a), nil
			}
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return time.Now()
}

// trafficWant says what the traffic's answers must show.
type trafficWant struct {
	// revoked reads must not be allowed while the graph is stale (between
	// staleSeen and restoreAt) nor once the webhook refused them
	// (revokedAt).
	revoked []string
	// kept reads are allowed throughout, except while the graph is stale.
	kept []string
	// admitted reviews are allowed throughout.
	admitted []string

	staleSeen, restoreAt, revokedAt time.Time
}

func checkTraffic(t *testing.T, answers []sent, want trafficWant) {
	t.Helper()
	counts := map[string]int{}
	staleAnswers, keptStale := 0, 0
	for _, s := range answers {
		counts[s.name]++
		switch {
		case s.err != nil:
			t.Errorf("%s at %s: %v", s.name, s.at.Format(time.StampMilli), s.err)
		case slices.Contains(want.revoked, s.name):
			whileStale := !s.at.Before(want.staleSeen) && s.at.Before(want.restoreAt)
			if s.allowed && (whileStale || !s.at.Before(want.revokedAt)) {
				t.Errorf("%s at %s was allowed (%s); the graph was stale or had the revocation", s.name, s.at.Format(time.StampMilli), s.reason)
			}
			if whileStale {
				staleAnswers++
			}
		case slices.Contains(want.kept, s.name):
			if !s.allowed && s.reason == authz.ReasonGraphStale {
				keptStale++
			}
			if !s.allowed && s.reason != authz.ReasonGraphStale {
				t.Errorf("%s at %s was refused (%s), and not for staleness", s.name, s.at.Format(time.StampMilli), s.reason)
			}
		case slices.Contains(want.admitted, s.name):
			if !s.allowed {
				t.Errorf("%s at %s was refused: %s", s.name, s.at.Format(time.StampMilli), s.reason)
			}
		}
	}
	if len(want.revoked) > 0 && staleAnswers == 0 {
		t.Error("no revoked read was asked while the graph was stale; the check above proved nothing")
	}
	t.Logf("answers: %v; revoked reads asked while stale: %d; kept reads refused for staleness: %d", counts, staleAnswers, keptStale)
}
