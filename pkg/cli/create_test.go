package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubelet.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCreate(t *testing.T) {
	client := fake.NewClientset()
	file := writeConfig(t, goodConfig)

	r := runFake(t, client, "create", "pool-blue", "--from-file", file, "-o", "name")
	if r.code != ExitOK {
		t.Fatalf("create: %+v", r)
	}
	ref := strings.TrimSpace(r.out)
	ns, name, _ := strings.Cut(ref, "/")
	if ns != testNamespace || !strings.HasPrefix(name, "pool-blue-") || len(name) != len("pool-blue-")+10 {
		t.Fatalf("created %q, want %s/pool-blue-HASH", ref, testNamespace)
	}
	cm, err := client.CoreV1().ConfigMaps(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Immutable == nil || !*cm.Immutable || !contract.IsEligible(cm.Labels) || cm.Data[contract.ConfigMapKey] != goodConfig {
		t.Fatalf("created %+v, want an immutable, eligible ConfigMap holding the file", cm)
	}

	// The same content is the same revision.
	r = runFake(t, client, "create", "pool-blue", "--from-file", file)
	if r.code != ExitOK || !strings.Contains(r.out, "configmap/"+ref+": unchanged\n") || !strings.Contains(r.out, "kubectl nodeguard assign "+ref) {
		t.Fatalf("create again: %+v", r)
	}
	// Other content is another.
	r = runFake(t, client, "create", "pool-blue", "--from-file", writeConfig(t, goodConfig+"maxOpenFiles: 1000\n"), "-o", "name")
	if r.code != ExitOK || strings.TrimSpace(r.out) == ref {
		t.Fatalf("create with other content: %+v, want a new name", r)
	}
	// A ConfigMap of that name made otherwise is not taken for it.
	cm.Immutable = nil
	if _, err := client.CoreV1().ConfigMaps(ns).Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r = runFake(t, client, "create", "pool-blue", "--from-file", file)
	if r.code != ExitError || !strings.Contains(r.errOut, "exists with other content or settings") {
		t.Fatalf("create over a mutable ConfigMap: %+v", r)
	}
}

func TestCreateRefusesBadInput(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no file", []string{"create", "x"}, ExitError, "--from-file is required"},
		{"no name", []string{"create", "--from-file", "f"}, ExitError, "give the ConfigMap's base NAME"},
		{"missing file", []string{"create", "x", "--from-file", "/nonexistent/kubelet.yaml"}, ExitError, "no such file"},
		{"unknown field", []string{"create", "x", "--from-file", "UNKNOWN"}, ExitError, `unknown field "maxPodz"`},
		{"invalid value", []string{"create", "x", "--from-file", "INVALID"}, ExitError, "imageGCHighThresholdPercent"},
		{"bad name", []string{"create", "Pool_Blue", "--from-file", "GOOD"}, ExitError, `invalid NAME "Pool_Blue"`},
		{"bad output", []string{"create", "x", "--from-file", "GOOD", "-o", "yaml"}, ExitError, "the only format is name"},
		{"bad dry run", []string{"create", "x", "--from-file", "GOOD", "--dry-run=maybe"}, ExitError, "invalid --dry-run"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]string{"UNKNOWN": writeConfig(t, unknownField), "INVALID": writeConfig(t, invalidValue), "GOOD": writeConfig(t, goodConfig)}
			args := make([]string, len(tt.args))
			for i, a := range tt.args {
				if f, ok := files[a]; ok {
					a = f
				}
				args[i] = a
			}
			client := fake.NewClientset()
			r := runFake(t, client, args...)
			if r.code != tt.code || !strings.Contains(r.errOut, tt.want) {
				t.Fatalf("%v: %+v, want exit %d mentioning %q", tt.args, r, tt.code, tt.want)
			}
			if list, _ := client.CoreV1().ConfigMaps(testNamespace).List(t.Context(), metav1.ListOptions{}); len(list.Items) > 0 {
				t.Errorf("created %d ConfigMaps", len(list.Items))
			}
		})
	}
}

func TestCreateDryRun(t *testing.T) {
	client := fake.NewClientset()
	r := runFake(t, client, "create", "pool-blue", "--from-file", writeConfig(t, goodConfig), "--dry-run")
	if r.code != ExitOK || !strings.Contains(r.out, "would be created (dry run, client): nothing was sent") {
		t.Fatalf("dry run: %+v", r)
	}
	if list, _ := client.CoreV1().ConfigMaps(testNamespace).List(t.Context(), metav1.ListOptions{}); len(list.Items) > 0 {
		t.Fatal("a client dry run created a ConfigMap")
	}
}
