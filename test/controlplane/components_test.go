package controlplane

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// componentWait bounds each wait for a controller or the scheduler to act; they act within
// seconds, and a busy two-core machine may take many times that.
const componentWait = 90 * time.Second

// TestControllerManagerAndScheduler: both start healthy; the controller-manager's service
// account controllers, token controller and CSR signer work with the keys it is given; and a
// Deployment created through the apiserver gets a ReplicaSet and pods (the controller-manager)
// that are bound to a registered Node (the scheduler), once the node lifecycle controller has
// lifted the not-ready taint that admission puts on every new Node.
func TestControllerManagerAndScheduler(t *testing.T) {
	// Start directly rather than through StartForTest, to check what Stop leaves behind.
	cp, err := Start(t.Context(), Options{ControllerManager: true, Scheduler: true})
	if err != nil {
		t.Fatal(err)
	}
	workDir := cp.WorkDir()
	stopped := false
	t.Cleanup(func() {
		if t.Failed() && !stopped {
			t.Logf("control plane logs:\n%s", cp.LogTail(logTailLines))
		}
		if err := cp.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	ctx := t.Context()
	admin := clientset(t, cp.AdminConfig())

	t.Run("both serve /healthz and, to admin, /metrics", func(t *testing.T) {
		httpClient, err := rest.HTTPClientFor(cp.AdminConfig())
		if err != nil {
			t.Fatal(err)
		}
		for _, url := range []string{cp.ControllerManagerURL(), cp.SchedulerURL()} {
			if url == "" {
				t.Fatal("a component has no URL")
			}
			if body := get(t, httpClient, url+"/healthz"); body != "ok" {
				t.Errorf("%s/healthz: %q, want ok", url, body)
			}
			// Delegated authentication and authorization work: the apiserver vouched for
			// the admin's client certificate.
			if body := get(t, httpClient, url+"/metrics"); !strings.Contains(body, "process_start_time_seconds") {
				t.Errorf("%s/metrics does not look like metrics: %.200q", url, body)
			}
		}
	})

	const nodeName = "node-a"
	nodeConfig, err := cp.NodeConfig(nodeName)
	if err != nil {
		t.Fatal(err)
	}
	node := clientset(t, nodeConfig)
	registerReadyNode(t, node, nodeName)
	// The lifecycle controller keeps the Node Ready only while its Lease is renewed, as a
	// kubelet's is.
	leaseCtx, stopLease := context.WithCancel(ctx)
	defer stopLease()
	go renewLease(leaseCtx, node, nodeName)

	t.Run("the node lifecycle controller lifts the not-ready taint", func(t *testing.T) {
		waitFor(t, "Node "+nodeName+" without the not-ready taint", func() (bool, string, error) {
			n, err := admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			return !slices.ContainsFunc(n.Spec.Taints, func(taint corev1.Taint) bool {
				return taint.Key == corev1.TaintNodeNotReady || taint.Key == corev1.TaintNodeUnreachable
			}), fmt.Sprintf("taints %v", n.Spec.Taints), nil
		})
	})

	const namespace = "apps"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("the service account controller creates the default ServiceAccount", func(t *testing.T) {
		waitFor(t, "ServiceAccount apps/default", func() (bool, string, error) {
			_, err := admin.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, "not found", nil
			}
			return err == nil, "", err
		})
	})

	t.Run("controllers act as their own service accounts", func(t *testing.T) {
		waitFor(t, "ServiceAccount kube-system/deployment-controller", func() (bool, string, error) {
			_, err := admin.CoreV1().ServiceAccounts("kube-system").Get(ctx, "deployment-controller", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, "not found", nil
			}
			return err == nil, "", err
		})
	})

	t.Run("the token controller fills a service account token Secret", func(t *testing.T) {
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "default-token", Namespace: namespace,
				Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}},
			Type: corev1.SecretTypeServiceAccountToken,
		}
		if _, err := admin.CoreV1().Secrets(namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "a token and the root CA in Secret apps/default-token", func() (bool, string, error) {
			got, err := admin.CoreV1().Secrets(namespace).Get(ctx, secret.Name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			return len(got.Data[corev1.ServiceAccountTokenKey]) > 0 && string(got.Data[corev1.ServiceAccountRootCAKey]) == string(cp.CA().CertPEM()),
				fmt.Sprintf("keys %v", slices.Sorted(maps.Keys(got.Data))), nil
		})
	})

	t.Run("the CSR signer signs an approved client CSR with the CA", func(t *testing.T) {
		csr := signedCSR(t, admin, "csr-user")
		block, _ := pem.Decode(csr.Status.Certificate)
		if block == nil {
			t.Fatalf("status.certificate is not PEM: %q", csr.Status.Certificate)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: cp.CA().CertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("the signed certificate does not chain to the control plane's CA: %v", err)
		}
	})

	t.Run("a Deployment gets a ReplicaSet and pods bound to the Node", func(t *testing.T) {
		const replicas = 2
		labels := map[string]string{"app": "web"}
		deployment := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: namespace},
			Spec: appsv1.DeploymentSpec{
				Replicas: new(int32(replicas)),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name:  "web",
						Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("100m"),
						}},
					}}},
				},
			},
		}
		created, err := admin.AppsV1().Deployments(namespace).Create(ctx, deployment, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "a ReplicaSet of Deployment web", func() (bool, string, error) {
			sets, err := admin.AppsV1().ReplicaSets(namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, "", err
			}
			for _, rs := range sets.Items {
				if metav1.IsControlledBy(&rs, created) && rs.Spec.Replicas != nil && *rs.Spec.Replicas == replicas {
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("%d ReplicaSets, none of web's with %d replicas", len(sets.Items), replicas), nil
		})
		waitFor(t, fmt.Sprintf("%d pods of web bound to %s", replicas, nodeName), func() (bool, string, error) {
			pods, err := admin.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				return false, "", err
			}
			bound := 0
			var seen []string
			for _, pod := range pods.Items {
				seen = append(seen, pod.Name+"@"+pod.Spec.NodeName)
				if pod.Spec.NodeName == nodeName {
					bound++
				}
			}
			return bound == replicas && len(pods.Items) == replicas, fmt.Sprintf("pods %v", seen), nil
		})
	})

	t.Run("Stop leaves no process behind", func(t *testing.T) {
		if found := processesMentioning(t, workDir); len(found) != 4 {
			t.Fatalf("before Stop, want etcd, kube-apiserver, kube-controller-manager and kube-scheduler running in %s, found %q", workDir, found)
		}
		stopLease()
		if err := cp.Stop(); err != nil {
			t.Fatal(err)
		}
		stopped = true
		if found := processesMentioning(t, workDir); len(found) != 0 {
			t.Errorf("after Stop, still running: %q", found)
		}
	})
}

// registerReadyNode registers a Node with the node's own credentials and reports it Ready with
// room for pods, as a kubelet would: without allocatable pods the scheduler finds no room.
func registerReadyNode(t *testing.T, node kubernetes.Interface, name string) {
	t.Helper()
	ctx := t.Context()
	created, err := node.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("registering Node %s: %v", name, err)
	}
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	now := metav1.Now()
	created.Status.Capacity, created.Status.Allocatable = resources, resources
	created.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: now, LastTransitionTime: now,
	}}
	if _, err := node.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("reporting Node %s Ready: %v", name, err)
	}
}

// renewLease keeps the Node's Lease in kube-node-lease fresh until ctx ends, at a fifth of the
// grace period the lifecycle controller allows.
func renewLease(ctx context.Context, node kubernetes.Interface, name string) {
	leases := node.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		now := metav1.NewMicroTime(time.Now())
		lease, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, _ = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity:       new(name),
					LeaseDurationSeconds: new(int32(NodeMonitorGracePeriod / time.Second)),
					RenewTime:            &now,
				},
			}, metav1.CreateOptions{})
			return
		}
		if err != nil {
			return
		}
		lease.Spec.RenewTime = &now
		_, _ = leases.Update(ctx, lease, metav1.UpdateOptions{})
	}, NodeMonitorGracePeriod/5)
}

// signedCSR asks for a client certificate for user through a CertificateSigningRequest,
// approves it as admin, and returns it once the signer has issued the certificate.
func signedCSR(t *testing.T, admin kubernetes.Interface, user string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	ctx := t.Context()
	key, err := newKey()
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: user}}, key)
	if err != nil {
		t.Fatal(err)
	}
	csrs := admin.CertificatesV1().CertificateSigningRequests()
	csr, err := csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeAPIServerClientSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test", Message: "approved by the test",
	})
	if _, err := csrs.UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "CSR "+user+" signed", func() (bool, string, error) {
		csr, err = csrs.Get(ctx, user, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return len(csr.Status.Certificate) > 0, fmt.Sprintf("conditions %v", csr.Status.Conditions), nil
	})
	return csr
}

func get(t *testing.T, client *http.Client, url string) string {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %.300s", url, resp.Status, body)
	}
	return string(body)
}

// waitFor polls cond until it holds, failing t with what was last seen after componentWait.
func waitFor(t *testing.T, what string, cond func() (bool, string, error)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, componentWait, true, func(context.Context) (bool, error) {
		done, detail, err := cond()
		last = detail
		return done, err
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %s)", what, err, last)
	}
}
