package agent_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// kubeletGet asks a real kubelet's HTTPS API for path with node's own
// client certificate, as its agent does, and returns the status code and
// body. The kubelet authenticates the certificate against its client CA and
// asks the apiserver whether system:node:<node> may get nodes/configz of the
// kubelet's Node.
func kubeletGet(t *testing.T, node string, target *node, path string) (int, string) {
	t.Helper()
	cfg, err := env.NodeRESTConfig(node)
	if err != nil {
		t.Fatal(err)
	}
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The kubelet's serving certificate is self-signed; what is tested is
	// whom the kubelet lets in.
	tlsConfig.InsecureSkipVerify, tlsConfig.RootCAs = true, nil
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig, Proxy: nil}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d%s", target.KubeletPort, path))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(body)
}

// TestANodeReadsItsOwnKubeletConfigurationOnly: what nodeguard's authorizer
// grants for the agent's read of /configz gives a node no right over any
// other Node. With a node's own credentials: its own kubelet answers
// /configz and /flagz; another node's kubelet refuses both; the apiserver
// refuses the node both Nodes' proxy; and the apiserver's own answer to the
// SubjectAccessReview a kubelet sends says the same. An administrator
// reading a Node's configuration through the apiserver's proxy, as an
// operator would, is answered.
func TestANodeReadsItsOwnKubeletConfigurationOnly(t *testing.T) {
	a := newNode(t, nodeOptions{})
	b := newNode(t, nodeOptions{})

	for _, path := range []string{"/configz", "/flagz"} {
		code, body := kubeletGet(t, a.Name, a, path)
		if code != http.StatusOK {
			t.Errorf("node %s reading its own kubelet's %s: %d %s", a.Name, path, code, body)
		}
		code, body = kubeletGet(t, a.Name, b, path)
		if code != http.StatusForbidden {
			t.Errorf("node %s reading node %s's kubelet's %s: %d %s, want 403", a.Name, b.Name, path, code, body)
		}
		if strings.Contains(body, "maxPods") {
			t.Errorf("node %s read node %s's configuration:\n%s", a.Name, b.Name, body)
		}
	}

	// Through the apiserver: nodes/proxy is granted to no node, its own
	// included.
	nodeClient, err := env.NodeClient(a.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{a.Name, b.Name} {
		_, err := nodeClient.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", target, "proxy", "configz").DoRaw(t.Context())
		if !apierrors.IsForbidden(err) {
			t.Errorf("node %s reading /api/v1/nodes/%s/proxy/configz: %v, want Forbidden", a.Name, target, err)
		}
	}

	// The SubjectAccessReview a kubelet sends, answered by the apiserver's
	// whole chain (nodeguard, Node, RBAC).
	for _, tc := range []struct {
		target, verb, subresource string
		allowed                   bool
	}{
		{a.Name, "get", "configz", true},
		{b.Name, "get", "configz", false},
		{a.Name, "get", "proxy", false},
		{a.Name, "update", "configz", false},
		{"", "list", "configz", false},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: contract.NodeUserPrefix + a.Name, Groups: []string{contract.NodesGroup, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: tc.verb, Resource: "nodes", Subresource: tc.subresource, Name: tc.target},
		}}
		got, err := env.Admin.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Allowed != tc.allowed {
			t.Errorf("%s %s nodes/%s of %q: allowed %v (%s), want %v", sar.Spec.User, tc.verb, tc.subresource, tc.target, got.Status.Allowed, got.Status.Reason, tc.allowed)
		}
	}

	// An operator looks for themselves, as on a real cluster.
	raw, err := env.Admin.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", b.Name, "proxy", "configz").DoRaw(t.Context())
	if err != nil || !strings.Contains(string(raw), `"kubeletconfig"`) {
		t.Errorf("kubectl get --raw /api/v1/nodes/%s/proxy/configz: %v\n%s", b.Name, err, raw)
	}
}
