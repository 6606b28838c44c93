package chart

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/nodeguard/nodeguard/test/controlplane"
)

// ReleaseNamespace is where the tests keep the release's record: a
// namespace the chart does not create.
const ReleaseNamespace = "kube-system"

// Dir is the chart's directory.
func Dir() (string, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "charts", "nodeguard"), nil
}

// Helm is the helm binary hack/testbin.sh builds.
func Helm() (string, error) {
	path, err := controlplane.Binary("helm")
	if err != nil {
		return "", fmt.Errorf("helm: %w (hack/testbin.sh helm builds it)", err)
	}
	return path, nil
}

// RunHelm runs helm with args and returns its standard output; an error
// carries its standard error.
func RunHelm(args ...string) ([]byte, error) {
	helm, err := Helm()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(helm, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// helm's own files (its cache, config, registry credentials) go
	// nowhere the tests leave behind.
	home, err := os.MkdirTemp("", "nodeguard-helm-home-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(home)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// Template renders the chart with the given helm flags (--set, -f,
// --set-file) as `helm template` does, into objects in the order helm
// prints them.
func Template(flags ...string) ([]*unstructured.Unstructured, error) {
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	out, err := RunHelm(append([]string{"template", "nodeguard", dir, "--namespace", ReleaseNamespace}, flags...)...)
	if err != nil {
		return nil, err
	}
	return Decode(out)
}

// Decode splits a multi-document YAML stream into objects, skipping empty
// documents.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &obj.Object); err != nil {
			return nil, fmt.Errorf("decoding %q: %w", firstLines(doc), err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		objs = append(objs, obj)
	}
}

// Key names an object: kind, namespace and name.
func Key(obj *unstructured.Unstructured) string {
	key := obj.GetKind() + " "
	if ns := obj.GetNamespace(); ns != "" {
		key += ns + "/"
	}
	return key + obj.GetName()
}

// Keys lists the objects' keys, sorted.
func Keys(objs []*unstructured.Unstructured) []string {
	var keys []string
	for _, o := range objs {
		keys = append(keys, Key(o))
	}
	sort.Strings(keys)
	return keys
}

func firstLines(doc []byte) string {
	lines := strings.SplitN(string(doc), "\n", 4)
	if len(lines) > 3 {
		lines = lines[:3]
	}
	return strings.Join(lines, "\\n")
}
