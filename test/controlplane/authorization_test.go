package controlplane

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeAuthorizer stands in for nodeguard's /authorize: it lets node-a read the ConfigMap
// "assigned", denies node-b everything, has no opinion otherwise, and records who it was asked
// about.
type fakeAuthorizer struct {
	mu        sync.Mutex
	users     []string
	resources []string
}

func (f *fakeAuthorizer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The apiserver appends ?timeout=...; the path alone routes.
	if r.URL.Path != "/authorize" {
		http.NotFound(w, r)
		return
	}
	var review authorizationv1.SubjectAccessReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.users = append(f.users, review.Spec.User)
	if review.Spec.ResourceAttributes != nil {
		f.resources = append(f.resources, review.Spec.ResourceAttributes.Resource)
	} else {
		f.resources = append(f.resources, "(non-resource)")
	}
	f.mu.Unlock()

	attrs := review.Spec.ResourceAttributes
	switch {
	case review.Spec.User == "system:node:node-b" && attrs != nil && attrs.Name == "other":
		review.Status = authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: "node-b is too old"}
	case review.Spec.User == "system:node:node-a" && attrs != nil && attrs.Resource == "configmaps" && attrs.Name == "assigned" && attrs.Verb == "get":
		review.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "assigned to node-a"}
	default:
		review.Status = authorizationv1.SubjectAccessReviewStatus{Reason: "no opinion"}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}

func (f *fakeAuthorizer) askedAbout() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.users)
}

func (f *fakeAuthorizer) resourcesAsked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.resources)
}

// TestAuthorizationChain runs the shipped manifests/control-plane configuration against a
// fake webhook: the webhook is asked first, only about nodes' ConfigMap requests, and its
// deny beats Node.
func TestAuthorizationChain(t *testing.T) {
	dir := t.TempDir()
	webhookCA, err := NewCA("webhook-ca")
	if err != nil {
		t.Fatal(err)
	}
	servingCert, servingKey, err := webhookCA.IssueServingCert("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	keyPair, err := tls.X509KeyPair(servingCert, servingKey)
	if err != nil {
		t.Fatal(err)
	}
	// The webhook insists on the apiserver's client certificate, as cmd/webhook does when given
	// a client CA: a successful Allow below proves the kubeconfig presents it.
	clientCA, err := NewCA("apiserver-client-ca")
	if err != nil {
		t.Fatal(err)
	}
	clientCert, clientKey, err := clientCA.IssueClientCert("kube-apiserver")
	if err != nil {
		t.Fatal(err)
	}
	clientCertFile, clientKeyFile, err := WriteCertPair(dir, "apiserver-client", clientCert, clientKey)
	if err != nil {
		t.Fatal(err)
	}

	authorizer := &fakeAuthorizer{}
	server := httptest.NewUnstartedServer(authorizer)
	server.TLS = &tls.Config{
		Certificates: []tls.Certificate{keyPair},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    clientCA.CertPool(),
	}
	server.StartTLS()
	t.Cleanup(server.Close)

	authzConfig, err := WriteAuthorizationFiles(dir, WebhookKubeconfig{
		Server:         server.URL + "/authorize",
		CABundle:       webhookCA.CertPEM(),
		ClientCertFile: clientCertFile,
		ClientKeyFile:  clientKeyFile,
	})
	if err != nil {
		t.Fatal(err)
	}
	cp := StartForTest(t, Options{AuthorizationConfigFile: authzConfig})
	ctx := t.Context()

	admin := clientset(t, cp.AdminConfig())
	for _, name := range []string{"assigned", "other", "mounted"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
		if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createNode(t, admin, "node-a")
	createNode(t, admin, "node-b")
	// A pod bound to node-b that mounts "other" and "mounted": the Node authorizer lets
	// node-b read both; the webhook denies it "other".
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "uses-other", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "node-b", Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/c"}},
			Volumes: []corev1.Volume{
				{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "other"}}}},
				{Name: "w", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "mounted"}}}},
			}},
	}
	if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	nodeAConfig, err := cp.NodeConfig("node-a")
	if err != nil {
		t.Fatal(err)
	}
	nodeBConfig, err := cp.NodeConfig("node-b")
	if err != nil {
		t.Fatal(err)
	}
	nodeA, nodeB := clientset(t, nodeAConfig), clientset(t, nodeBConfig)

	t.Run("webhook allow grants what Node would not", func(t *testing.T) {
		if _, err := nodeA.CoreV1().ConfigMaps("default").Get(ctx, "assigned", metav1.GetOptions{}); err != nil {
			t.Errorf("node-a get assigned ConfigMap: %v", err)
		}
	})
	t.Run("no opinion falls through to Node", func(t *testing.T) {
		if _, err := nodeA.CoreV1().ConfigMaps("default").Get(ctx, "other", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("node-a get other ConfigMap: error = %v, want Forbidden", err)
		}
		if _, err := nodeA.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{}); err != nil {
			t.Errorf("node-a get own Node: %v", err)
		}
	})
	t.Run("webhook deny beats Node", func(t *testing.T) {
		// Once node-b reads "mounted", the Node authorizer's graph has the pod, and would
		// allow "other" too.
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := nodeB.CoreV1().ConfigMaps("default").Get(ctx, "mounted", metav1.GetOptions{})
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node-b never read its pod's ConfigMap through Node: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if _, err := nodeB.CoreV1().ConfigMaps("default").Get(ctx, "other", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("node-b get its pod's ConfigMap: error = %v, want Forbidden", err)
		}
		// Its own Node never reaches the webhook: Node allows it.
		if _, err := nodeB.CoreV1().Nodes().Get(ctx, "node-b", metav1.GetOptions{}); err != nil {
			t.Errorf("node-b get own Node: %v", err)
		}
	})
	t.Run("only nodes reach the webhook", func(t *testing.T) {
		// system:masters never reaches any authorizer, so ask as an ordinary user too.
		aliceConfig, err := cp.UserConfig("alice", "developers")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := clientset(t, aliceConfig).CoreV1().ConfigMaps("default").Get(ctx, "assigned", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("alice get ConfigMap: error = %v, want Forbidden from RBAC", err)
		}
		asked := authorizer.askedAbout()
		for _, want := range []string{"system:node:node-a", "system:node:node-b"} {
			if !slices.Contains(asked, want) {
				t.Errorf("webhook never asked about %s; asked about %v", want, asked)
			}
		}
		for _, user := range asked {
			if user != "system:node:node-a" && user != "system:node:node-b" {
				t.Errorf("webhook asked about %s, which is not in system:nodes", user)
			}
		}
		for _, resource := range authorizer.resourcesAsked() {
			if resource != "configmaps" {
				t.Errorf("webhook asked about %s: only nodes' ConfigMap requests reach it", resource)
			}
		}
	})
}
