// Command localup is what `make run` runs: a real etcd and kube-apiserver on
// loopback with nodeguard wired in exactly as manifests/ describe, a short
// demonstration of what nodeguard decides, and then a running cluster to
// poke at until Ctrl-C.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/controlplane"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

const demoNamespace = "kubelet-configs"

func main() {
	keep := flag.Bool("keep", false, "keep the work directory (certificates, logs) after exit")
	demoOnly := flag.Bool("demo-only", false, "exit after the demonstration instead of waiting for Ctrl-C")
	minVersion := flag.String("min-kubelet-version", "1.30.0", "minimum kubelet version the webhook enforces")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *keep, *demoOnly, *minVersion); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "localup:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, keep, demoOnly bool, minVersion string) error {
	dir, err := os.MkdirTemp("", "nodeguard-localup-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Println("work directory kept:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	step("starting etcd, kube-apiserver (authorization chain from manifests/control-plane) and the nodeguard webhook")
	env, err := framework.Start(ctx, framework.Options{WorkDir: dir, WebhookArgs: []string{"--min-kubelet-version=" + minVersion}})
	if err != nil {
		return err
	}
	defer func() {
		step("stopping; removing processes and temporary files")
		env.Stop()
	}()
	kubeconfig := filepath.Join(dir, "admin.kubeconfig")
	if err := controlplane.WriteKubeconfig(kubeconfig, env.CP.AdminConfig()); err != nil {
		return err
	}

	if err := demo(ctx, env, minVersion); err != nil {
		return err
	}
	fmt.Printf("\nThe cluster is up. Admin kubeconfig:\n  export KUBECONFIG=%s\n", kubeconfig)
	fmt.Printf("Webhook: %s (log: %s)\n", env.WebhookURL, filepath.Join(dir, "webhook.log"))
	if demoOnly {
		return nil
	}
	fmt.Println("Press Ctrl-C to stop.")
	<-ctx.Done()
	return nil
}

func step(msg string) { fmt.Printf("==> %s\n", msg) }

type demoNode struct{ name, kubeletVersion, assignment string }

func demo(ctx context.Context, env *framework.Env, minVersion string) error {
	admin := env.Admin
	step("creating eligible kubelet configs and three nodes")
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demoNamespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	for _, name := range []string{"pool-blue", "pool-green"} {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: demoNamespace, Name: name,
				Labels: map[string]string{contract.EligibleLabel: contract.EligibleLabelValue}},
			Data: map[string]string{contract.ConfigMapKey: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 110\n"},
		}
		if _, err := admin.CoreV1().ConfigMaps(demoNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	nodes := []demoNode{
		{"node-blue", "v1.37.2", "pool-blue"},
		{"node-green", "v1.37.2", "pool-green"},
		{"node-old", "v1.29.4", "pool-blue"},
	}
	for _, n := range nodes {
		obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name,
			Annotations: map[string]string{contract.ConfigSourceAnnotation: demoNamespace + "/" + n.assignment}}}
		created, err := admin.CoreV1().Nodes().Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		created.Status.NodeInfo.KubeletVersion = n.kubeletVersion
		if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	step(fmt.Sprintf("each node reads kubelet configs with its own client certificate (minimum kubelet %s)", minVersion))
	// The webhook learns of new objects through its watches; wait until
	// it has seen them so the table shows settled answers.
	blue, err := env.NodeClient("node-blue")
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(time.Minute); readResult(ctx, blue, "pool-blue") != "allowed"; {
		if time.Now().After(deadline) {
			return errors.New("the webhook did not learn of the demo objects within a minute")
		}
		time.Sleep(200 * time.Millisecond)
	}
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tKUBELET\tASSIGNED\tREADS\tRESULT")
	for _, n := range nodes {
		c, err := env.NodeClient(n.name)
		if err != nil {
			return err
		}
		for _, target := range []string{"pool-blue", "pool-green"} {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n.name, n.kubeletVersion, n.assignment, target, readResult(ctx, c, target))
		}
	}
	return tw.Flush()
}

func readResult(ctx context.Context, c kubernetes.Interface, name string) string {
	_, err := c.CoreV1().ConfigMaps(demoNamespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return "allowed"
	case apierrors.IsForbidden(err):
		return "forbidden"
	default:
		return "error: " + err.Error()
	}
}
