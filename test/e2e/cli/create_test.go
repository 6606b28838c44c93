package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/cli"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

// TestCreateImmutableRevisions is issue 17 item 4: kubectl nodeguard makes
// the safe practice the easy one (one immutable ConfigMap per revision,
// named after its content), and assigning a mutable ConfigMap draws a
// warning from the webhook.
func TestCreateImmutableRevisions(t *testing.T) {
	s := newScenario(t)
	node := s.node("n", "v1.37.2")
	file := filepath.Join(t.TempDir(), "pool.yaml")
	if err := os.WriteFile(file, []byte(goodConfig), 0o600); err != nil {
		t.Fatal(err)
	}

	r := plugin(t, "-n", s.ns, "create", "pool", "--from-file", file, "-o", "name")
	expect(t, "create", r, cli.ExitOK, s.ns+"/pool-")
	ref := strings.TrimSpace(r.out)
	_, name, _ := strings.Cut(ref, "/")
	cm, err := s.admin.CoreV1().ConfigMaps(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Immutable == nil || !*cm.Immutable || !contract.IsEligible(cm.Labels) || cm.Data[contract.ConfigMapKey] != goodConfig {
		t.Fatalf("created %s: immutable %v, labels %v, data %q", ref, cm.Immutable, cm.Labels, cm.Data)
	}
	cm.Data[contract.ConfigMapKey] = goodConfig + "maxOpenFiles: 1000\n"
	if _, err := s.admin.CoreV1().ConfigMaps(s.ns).Update(s.ctx, cm, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("changing the created revision: %v, want Invalid (immutable)", err)
	}
	expect(t, "create again", plugin(t, "-n", s.ns, "create", "pool", "--from-file", file), cli.ExitOK, "configmap/"+ref+": unchanged\n")

	// The webhook judges it before anything is written.
	if err := os.WriteFile(file, []byte(goodConfig+"maxOpenFiles: 1000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = plugin(t, "-n", s.ns, "create", "pool", "--from-file", file, "--dry-run=server")
	expect(t, "server dry run", r, cli.ExitOK, ": accepted by the server (dry run): nothing was written\n")
	if list, err := s.admin.CoreV1().ConfigMaps(s.ns).List(s.ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 1 { // the first revision alone
		t.Fatalf("after a server dry run: %v, %d ConfigMaps", err, len(list.Items))
	}

	// Assigning the revision draws no warning; a mutable ConfigMap does.
	r = plugin(t, "assign", ref, node)
	expect(t, "assign the revision", r, cli.ExitOK, "node/"+node+": local -> "+ref+": assigned\n")
	if strings.Contains(r.out, "is mutable") {
		t.Fatalf("assigning an immutable revision warns: %s", r)
	}
	s.configMap("mutable", goodConfig, true)
	r = plugin(t, "assign", s.ns+"/mutable", node)
	expect(t, "assign a mutable ConfigMap", r, cli.ExitOK,
		"    server warning: ConfigMap "+s.ns+"/mutable is mutable: once node "+node+" has it open, its edits keep reaching the node after the assignment or the label is removed")
}
