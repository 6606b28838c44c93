package alerts

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nodeguard/nodeguard/test/controlplane"
)

// rulesFile is the name the promtool tests load the rules by
// (rule_files in testdata/*_test.yaml).
const rulesFile = "nodeguard.rules.yaml"

const runbookPrefix = "https://github.com/nodeguard/nodeguard/blob/main/docs/install.md#"

// rule is one alerting rule of the PrometheusRule.
type rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type group struct {
	Name  string `json:"name"`
	Rules []rule `json:"rules"`
}

// prometheusRule is the part of monitoring.coreos.com/v1 PrometheusRule the
// tests read.
type prometheusRule struct {
	Kind string `json:"kind"`
	Spec struct {
		Groups []group `json:"groups"`
	} `json:"spec"`
}

// shipped is the PrometheusRule as read, and its groups whole, as
// Prometheus gets them.
type shipped struct {
	groups []group
	raw    any
}

// unitTests is the part of a promtool test file the coverage check reads.
type unitTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		Name           string `json:"name"`
		AlertRuleTests []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []struct {
				ExpLabels map[string]string `json:"exp_labels"`
			} `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// shippedRules reads the PrometheusRule the manifests ship.
func shippedRules(t *testing.T) (root string, groups []group) {
	root, s := readShipped(t)
	return root, s.groups
}

func readShipped(t *testing.T) (string, shipped) {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "manifests", "components", "monitoring", "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pr prometheusRule
	if err := yaml.Unmarshal(data, &pr); err != nil {
		t.Fatalf("prometheusrule.yaml: %v", err)
	}
	if pr.Kind != "PrometheusRule" || len(pr.Spec.Groups) == 0 {
		t.Fatalf("prometheusrule.yaml holds a %s with %d groups, want a PrometheusRule with groups", pr.Kind, len(pr.Spec.Groups))
	}
	var whole struct {
		Spec struct {
			Groups any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &whole); err != nil {
		t.Fatalf("prometheusrule.yaml: %v", err)
	}
	return root, shipped{groups: pr.Spec.Groups, raw: whole.Spec.Groups}
}

// writeRules writes the groups, every field as shipped, as a Prometheus
// rules file, as the operator hands them to Prometheus, and copies the
// promtool tests beside it.
func writeRules(t *testing.T, groups any) (dir string, tests []string) {
	t.Helper()
	dir = t.TempDir()
	data, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, rulesFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*_test.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no promtool tests in testdata (%v)", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, filepath.Base(f))
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
		tests = append(tests, dst)
	}
	return dir, tests
}

func promtool(t *testing.T) string {
	t.Helper()
	path, err := controlplane.Binary("promtool")
	if err != nil {
		t.Fatalf("promtool: %v (hack/testbin.sh promtool builds it)", err)
	}
	return path
}

func run(t *testing.T, dir string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out.String())
	}
	t.Logf("%s %s:\n%s", filepath.Base(name), strings.Join(args, " "), out.String())
}

// TestRulesPassPromtool: the rules are valid for Prometheus, and every
// promtool test passes.
func TestRulesPassPromtool(t *testing.T) {
	_, rules := readShipped(t)
	bin := promtool(t)
	dir, tests := writeRules(t, rules.raw)
	run(t, dir, bin, "check", "rules", rulesFile)
	var names []string
	for _, f := range tests {
		names = append(names, filepath.Base(f))
	}
	run(t, dir, bin, append([]string{"test", "rules"}, names...)...)
}

// TestEveryAlertFiresAndStaysQuiet: for every alert (each of its severities)
// the promtool tests hold a case where it fires, and a case where it is
// evaluated and stays quiet; and no test names an alert that does not
// exist. promtool itself only checks the cases it is given.
func TestEveryAlertFiresAndStaysQuiet(t *testing.T) {
	_, groups := shippedRules(t)
	fires := map[string]bool{} // alert/severity
	quiet := map[string]bool{} // alert
	known := map[string]bool{}
	var want []string
	for _, g := range groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			known[r.Alert] = true
			want = append(want, r.Alert+"/"+r.Labels["severity"])
		}
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var u unitTests
		if err := yaml.Unmarshal(data, &u); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(u.RuleFiles) != 1 || u.RuleFiles[0] != rulesFile {
			t.Errorf("%s: rule_files %v, want [%s]", f, u.RuleFiles, rulesFile)
		}
		for _, tc := range u.Tests {
			for _, a := range tc.AlertRuleTests {
				if !known[a.Alertname] {
					t.Errorf("%s, test %q: alert %s is not in the rules", f, tc.Name, a.Alertname)
				}
				if len(a.ExpAlerts) == 0 {
					quiet[a.Alertname] = true
				}
				for _, e := range a.ExpAlerts {
					fires[a.Alertname+"/"+e.ExpLabels["severity"]] = true
				}
			}
		}
	}
	sort.Strings(want)
	for _, w := range want {
		if !fires[w] {
			t.Errorf("no promtool test makes %s fire", w)
		}
		if !quiet[strings.SplitN(w, "/", 2)[0]] {
			t.Errorf("no promtool test shows %s quiet", w)
		}
	}
}

// TestEveryAlertHasARunbook: every alert carries a severity, a summary and
// a runbook_url naming a section of docs/install.md that exists.
func TestEveryAlertHasARunbook(t *testing.T) {
	root, groups := shippedRules(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(string(doc), -1) {
		sections[anchor(m[1])] = true
	}
	for _, g := range groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			where := fmt.Sprintf("alert %s (group %s)", r.Alert, g.Name)
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", where, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: needs a summary and a description", where)
			}
			url := r.Annotations["runbook_url"]
			section, ok := strings.CutPrefix(url, runbookPrefix)
			if !ok {
				t.Errorf("%s: runbook_url %q, want %s<section>", where, url, runbookPrefix)
				continue
			}
			if section != anchor(r.Alert) {
				t.Errorf("%s: runbook_url names section %q, want the alert's own, %q", where, section, anchor(r.Alert))
			}
			if !sections[section] {
				t.Errorf("%s: docs/install.md has no section %q", where, section)
			}
		}
	}
}

// anchor is the fragment GitHub gives a Markdown heading.
func anchor(heading string) string {
	heading = strings.ToLower(strings.TrimSpace(heading))
	var b strings.Builder
	for _, r := range heading {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}
