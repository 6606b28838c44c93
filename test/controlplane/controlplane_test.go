package controlplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func TestControlPlane(t *testing.T) {
	// Start directly rather than through StartForTest, to check what Stop leaves behind.
	cp, err := Start(t.Context(), Options{})
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

	t.Run("admin lists namespaces", func(t *testing.T) {
		namespaces, err := admin.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !hasNamespace(namespaces.Items, "kube-system") {
			t.Errorf("namespaces %v lack kube-system", namespaces.Items)
		}
	})

	createNode(t, admin, "node-a")
	nodeA, err := cp.NodeConfig("node-a")
	if err != nil {
		t.Fatal(err)
	}
	node := clientset(t, nodeA)

	t.Run("node reads its own Node through Node,RBAC", func(t *testing.T) {
		got, err := node.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != "node-a" {
			t.Errorf("got Node %q", got.Name)
		}
	})

	t.Run("node may not list secrets", func(t *testing.T) {
		_, err := node.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("error = %v, want Forbidden", err)
		}
	})

	t.Run("kubeconfig", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "node-a.kubeconfig")
		if err := WriteKubeconfig(path, nodeA); err != nil {
			t.Fatal(err)
		}
		fromFile, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := clientset(t, fromFile).CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{}); err != nil {
			t.Errorf("client from written kubeconfig: %v", err)
		}
	})

	t.Run("apiserver restarts on the same URL and data", func(t *testing.T) {
		url := cp.URL()
		if err := cp.StopAPIServer(); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{}); err == nil {
			t.Fatal("request succeeded while the apiserver was stopped")
		}
		if err := cp.StartAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		if cp.URL() != url {
			t.Errorf("URL changed from %s to %s", url, cp.URL())
		}
		// The same client, made before the restart, works: same URL, same CA.
		if _, err := admin.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{}); err != nil {
			t.Errorf("node-a after restart: %v", err)
		}
		if err := cp.StartAPIServer(ctx); err == nil {
			t.Error("StartAPIServer on a running apiserver: want an error")
		}
	})

	t.Run("Stop leaves no process or work directory", func(t *testing.T) {
		if found := processesMentioning(t, workDir); len(found) != 2 {
			t.Fatalf("before Stop, want etcd and kube-apiserver running in %s, found %q", workDir, found)
		}
		if err := cp.Stop(); err != nil {
			t.Fatal(err)
		}
		stopped = true
		if found := processesMentioning(t, workDir); len(found) != 0 {
			t.Errorf("after Stop, still running: %q", found)
		}
		if _, err := os.Stat(workDir); !os.IsNotExist(err) {
			t.Errorf("work directory %s: %v, want it removed", workDir, err)
		}
		if err := cp.StartAPIServer(ctx); err == nil {
			t.Error("StartAPIServer after Stop: want an error")
		}
	})
}

func TestStartWithoutBinaries(t *testing.T) {
	_, err := Start(t.Context(), Options{BinDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "make testbin") {
		t.Errorf("error = %v, want one telling to run make testbin", err)
	}
}

// A failing apiserver must not leave etcd behind, and must say why it failed.
func TestStartFailureCleansUp(t *testing.T) {
	workDir := t.TempDir()
	_, err := Start(t.Context(), Options{WorkDir: workDir, ExtraAPIServerArgs: []string{"--no-such-flag"}})
	if err == nil {
		t.Fatal("Start with a bad apiserver flag succeeded")
	}
	if !strings.Contains(err.Error(), "no-such-flag") {
		t.Errorf("error does not show the apiserver's complaint:\n%v", err)
	}
	if found := processesMentioning(t, workDir); len(found) != 0 {
		t.Errorf("still running after a failed Start: %q", found)
	}
}

func clientset(t *testing.T, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func createNode(t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := client.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Node %s: %v", name, err)
	}
}

func hasNamespace(namespaces []corev1.Namespace, name string) bool {
	for _, ns := range namespaces {
		if ns.Name == name {
			return true
		}
	}
	return false
}

// processesMentioning lists the command lines of running processes whose arguments contain s
// (each control plane passes its work directory to both etcd and kube-apiserver).
func processesMentioning(t *testing.T, s string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, entry := range entries {
		if strings.Trim(entry.Name(), "0123456789") != "" {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", entry.Name(), "cmdline"))
		if err != nil {
			continue // gone meanwhile
		}
		if args := strings.ReplaceAll(string(cmdline), "\x00", " "); strings.Contains(args, s) {
			found = append(found, entry.Name()+": "+args)
		}
	}
	return found
}
