package settings

import (
	"testing"
)

// FuzzParse feeds arbitrary bytes to the settings file's decoder: it must
// refuse or accept, never panic, and what it accepts must be consistent
// (a minimum version that parsed, only known fields forbidden, no node
// exempt).
func FuzzParse(f *testing.F) {
	header := "apiVersion: config.nodeguard.dev/v1alpha1\nkind: NodeguardPolicy\n"
	for _, s := range []string{
		header,
		header + "minKubeletVersion: v1.35.2\nallowNodeSelfAssignment: true\nforbiddenDynamicFields: [staticPodPath]\nexemptUsers: [break-glass]\n",
		header + "minKubeletVersion: latest\n",
		header + "exemptUsers: ['system:node:n1']\n",
		"{}", "", "- a\n- b\n", header + "allowNodeSelfAssignment: yes\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data, "fuzz")
		if err != nil {
			return
		}
		for _, field := range s.ForbiddenDynamicFields {
			if field == "" {
				t.Fatalf("accepted an empty forbidden field from %q", data)
			}
		}
		for _, user := range s.ExemptUsers {
			if user == "" || len(user) >= len("system:node:") && user[:len("system:node:")] == "system:node:" {
				t.Fatalf("accepted exempt user %q from %q", user, data)
			}
		}
	})
}
