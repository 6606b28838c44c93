package framework

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/nodeguard/nodeguard/policies"
)

// policyReloadInterval is how often the webhook looks at its policy files
// in the e2e environments, so that a rewrite takes effect quickly.
const policyReloadInterval = "200ms"

// NeutralPolicyFiles is the webhook's policy set when a suite names none.
// The shipped policies judge what the other suites' fixtures do on purpose
// (kubelet configurations in namespaces of their own, a staticPodURL the
// kubelet stub crashes on), so these stand in for them: every review still
// goes through the policy engine with its whole input rendered (object.get
// over input defeats both the projection and the rule index), and a broken
// engine path would refuse (admission fails closed) in every suite, but no
// policy ever has anything to say. test/e2e/policy runs the shipped set.
func NeutralPolicyFiles() map[string]string {
	return map[string]string{
		"neutral_admission.rego": `# Evaluated for every admission review; never denies (every review has a uid).
package nodeguard.admission

deny contains "the review has no uid" if {
	count(object.get(input, ["request", "uid"], "")) == 0
}
`,
		"neutral_authz.rego": `# Evaluated for every node's authorization review; never denies (every
# review from a node names its user).
package nodeguard.authz

deny contains "the review names no user" if {
	count(object.get(input, ["spec", "user"], "")) == 0
}
`,
	}
}

// ShippedPolicyFiles returns the policies shipped in the binary (policies/),
// without their tests: what the webhook serves without --policy-dir.
func ShippedPolicyFiles() (map[string]string, error) {
	files := map[string]string{}
	err := fs.WalkDir(policies.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(name) != ".rego" || strings.HasSuffix(name, "_test.rego") {
			return err
		}
		content, err := fs.ReadFile(policies.FS(), name)
		if err != nil {
			return err
		}
		files[name] = string(content)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the shipped policies: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no shipped policies found")
	}
	return files, nil
}

// policyArgs writes the policy files and data of opts under the work
// directory and returns the webhook flags that serve them.
func (e *Env) policyArgs(opts Options) ([]string, error) {
	files := opts.PolicyFiles
	if files == nil {
		files = NeutralPolicyFiles()
	}
	e.PolicyDir = filepath.Join(opts.WorkDir, "policies")
	if err := os.MkdirAll(e.PolicyDir, 0o755); err != nil {
		return nil, fmt.Errorf("policy directory: %w", err)
	}
	for name, content := range files {
		if err := e.WritePolicyFile(name, content); err != nil {
			return nil, err
		}
	}
	args := []string{"--policy-dir=" + e.PolicyDir}
	if opts.PolicyData != "" {
		dataFile := filepath.Join(opts.WorkDir, "policy-data.yaml")
		if err := os.WriteFile(dataFile, []byte(opts.PolicyData), 0o600); err != nil {
			return nil, fmt.Errorf("writing policy data: %w", err)
		}
		args = append(args, "--policy-data="+dataFile)
	}
	return args, nil
}

// WritePolicyFile creates or replaces a file in PolicyDir atomically (a
// hidden temporary file renamed into place), so that the webhook never
// reads half of it.
func (e *Env) WritePolicyFile(name, content string) error {
	if e.PolicyDir == "" {
		return fmt.Errorf("the environment has no policy directory")
	}
	target := filepath.Join(e.PolicyDir, filepath.FromSlash(name))
	if !strings.HasPrefix(target, e.PolicyDir+string(filepath.Separator)) {
		return fmt.Errorf("policy file %q is outside the policy directory", name)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return fmt.Errorf("writing policy %s: %w", name, err)
	}
	tmp := filepath.Join(filepath.Dir(target), "."+filepath.Base(target)+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return fmt.Errorf("writing policy %s: %w", name, err)
	}
	if err := os.Rename(tmp, target); err != nil {
		return fmt.Errorf("writing policy %s: %w", name, err)
	}
	return nil
}

// RemovePolicyFile deletes a file from PolicyDir; a missing file is fine.
func (e *Env) RemovePolicyFile(name string) error {
	if e.PolicyDir == "" {
		return fmt.Errorf("the environment has no policy directory")
	}
	err := os.Remove(filepath.Join(e.PolicyDir, filepath.FromSlash(name)))
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("removing policy %s: %w", name, err)
	}
	return nil
}
