package policy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

const (
	kubeletVersion = "v1.37.2"
	goodConfig     = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 110\n"

	// cacheDeadline bounds waiting for a decision to change through the
	// apiserver: its cache of the webhook's Allow answers (authorizedTTL 10s
	// in manifests/control-plane), plus graph and
	// policy reload lag, with room for a busy machine.
	cacheDeadline = 45 * time.Second
	// reloadDeadline bounds waiting for the webhook to load a changed
	// policy directory (polled every 200ms here).
	reloadDeadline = 30 * time.Second
)

var nodeGroups = []string{contract.NodesGroup, "system:authenticated"}

// scenario gives a test its own node names and cleans up after it.
type scenario struct {
	t   *testing.T
	ctx context.Context
	pfx string
	// admin collects the warnings the apiserver relays from admission.
	admin    kubernetes.Interface
	warnings *warningCollector
}

func newScenario(t *testing.T) *scenario {
	t.Helper()
	s := &scenario{t: t, ctx: t.Context(), pfx: fmt.Sprintf("p%d", time.Now().UnixNano()%1e9), warnings: &warningCollector{}}
	cfg := rest.CopyConfig(env.CP.AdminConfig())
	cfg.WarningHandler = s.warnings
	var err error
	if s.admin, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	s.namespace(configNamespace)
	return s
}

// warningCollector keeps the warnings of the admin client's responses.
type warningCollector struct {
	mu   sync.Mutex
	seen []string
}

func (w *warningCollector) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

// take returns the warnings seen since the last call.
func (w *warningCollector) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := w.seen
	w.seen = nil
	return seen
}

// namespace creates a namespace unless it exists.
func (s *scenario) namespace(name string) {
	s.t.Helper()
	_, err := s.admin.CoreV1().Namespaces().Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		s.t.Fatal(err)
	}
}

// tempNamespace creates a namespace that goes away with the test.
func (s *scenario) tempNamespace() string {
	s.t.Helper()
	name := "e2e-" + s.pfx
	s.namespace(name)
	s.t.Cleanup(func() { _ = env.Admin.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

func kubeletConfigMap(namespace, name, config string, annotations map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Annotations: annotations,
			Labels: map[string]string{contract.EligibleLabel: contract.EligibleLabelValue}},
		Data: map[string]string{contract.ConfigMapKey: config},
	}
}

// createConfigMap creates a ConfigMap as the admin and returns the error.
func (s *scenario) createConfigMap(cm *corev1.ConfigMap) error {
	_, err := s.admin.CoreV1().ConfigMaps(cm.Namespace).Create(s.ctx, cm, metav1.CreateOptions{})
	if err == nil {
		s.t.Cleanup(func() {
			_ = env.Admin.CoreV1().ConfigMaps(cm.Namespace).Delete(context.Background(), cm.Name, metav1.DeleteOptions{})
		})
	}
	return err
}

func (s *scenario) mustCreateConfigMap(cm *corev1.ConfigMap) {
	s.t.Helper()
	if err := s.createConfigMap(cm); err != nil {
		s.t.Fatalf("creating ConfigMap %s/%s: %v", cm.Namespace, cm.Name, err)
	}
}

// node creates a Node as the admin, assigned source ("" for none), with
// its kubelet version reported, and returns its name.
func (s *scenario) node(name, source string) string {
	s.t.Helper()
	name = s.pfx + "-" + name
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if source != "" {
		n.Annotations = map[string]string{contract.ConfigSourceAnnotation: source}
	}
	created, err := s.admin.CoreV1().Nodes().Create(s.ctx, n, metav1.CreateOptions{})
	if err != nil {
		s.t.Fatalf("creating Node %s: %v", name, err)
	}
	s.t.Cleanup(func() { _ = env.Admin.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	created.Status.NodeInfo.KubeletVersion = kubeletVersion
	if _, err := s.admin.CoreV1().Nodes().UpdateStatus(s.ctx, created, metav1.UpdateOptions{}); err != nil {
		s.t.Fatal(err)
	}
	return name
}

func (s *scenario) nodeClient(node string) kubernetes.Interface {
	s.t.Helper()
	c, err := env.NodeClient(node)
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// eventually polls cond until it returns nil or the deadline passes.
func (s *scenario) eventually(what string, deadline time.Duration, cond func() error) {
	s.t.Helper()
	end := time.Now().Add(deadline)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(end) {
			s.t.Fatalf("%s: still not true after %v: %v", what, deadline, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// readDenied waits until the node's get of namespace/name is Forbidden with
// a reason mentioning want.
func (s *scenario) readDenied(c kubernetes.Interface, namespace, name, want string) {
	s.t.Helper()
	s.eventually(fmt.Sprintf("node denied %s/%s", namespace, name), cacheDeadline, func() error {
		_, err := c.CoreV1().ConfigMaps(namespace).Get(s.ctx, name, metav1.GetOptions{})
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), want) {
			return nil
		}
		return fmt.Errorf("get answers %v, want Forbidden mentioning %q", err, want)
	})
}

// readAllowed waits until the node may get namespace/name.
func (s *scenario) readAllowed(c kubernetes.Interface, namespace, name string) {
	s.t.Helper()
	s.eventually(fmt.Sprintf("node reads %s/%s", namespace, name), cacheDeadline, func() error {
		_, err := c.CoreV1().ConfigMaps(namespace).Get(s.ctx, name, metav1.GetOptions{})
		return err
	})
}

// authorize asks the webhook's /authorize directly, as the apiserver does
// but without its cache, whether node may get namespace/name.
func (s *scenario) authorize(node, namespace, name string) authorizationv1.SubjectAccessReviewStatus {
	s.t.Helper()
	body, err := json.Marshal(&authorizationv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:node:" + node, Groups: nodeGroups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "get", Version: "v1", Resource: "configmaps", Name: name},
		},
	})
	if err != nil {
		s.t.Fatal(err)
	}
	resp, err := env.ProbeClient.Post(env.WebhookURL+"/authorize", "application/json", bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var sar authorizationv1.SubjectAccessReview
	if err := json.NewDecoder(resp.Body).Decode(&sar); err != nil || resp.StatusCode != http.StatusOK {
		s.t.Fatalf("/authorize answered %s: %v", resp.Status, err)
	}
	return sar.Status
}

// get fetches one of the webhook's endpoints.
func get(path string) (int, string, error) {
	resp, err := env.ProbeClient.Get(env.WebhookURL + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// metric returns the value of the first sample of /metrics whose line
// starts with series (a name, or a name with its labels).
func metric(series string) (float64, error) {
	code, body, err := get("/metrics")
	if err != nil || code != http.StatusOK {
		return 0, fmt.Errorf("/metrics: %d %v", code, err)
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, series) {
			continue
		}
		rest := line[len(series):]
		if !strings.HasPrefix(rest, " ") && !strings.HasPrefix(rest, "{") {
			continue
		}
		fields := strings.Fields(line)
		return strconv.ParseFloat(fields[len(fields)-1], 64)
	}
	return 0, fmt.Errorf("no series %s in /metrics", series)
}
