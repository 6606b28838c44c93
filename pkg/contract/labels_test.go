package contract

import "testing"

func TestNodeMayWriteLabel(t *testing.T) {
	tests := []struct {
		key  string
		want bool
	}{
		{"pool", true},
		{"example.com/pool", true},
		{"kubernetes.io/hostname", true},
		{"topology.kubernetes.io/zone", true},
		{"node.kubernetes.io/instance-type", true},
		{"node-role.kubernetes.io/control-plane", false},
		{"example.k8s.io/x", false},
		{"node-restriction.kubernetes.io/pool", false},
		{"x.node-restriction.kubernetes.io/pool", false},
		{PoolLabel, false},
		{"nodeguard.dev/maintenance", false},
		{"team.nodeguard.dev/pool", false},
		// Not a subdomain: a domain that merely ends in the same letters.
		{"notnodeguard.dev/pool", true},
		{"nodeguard.dev.example.com/pool", true},
	}
	for _, tt := range tests {
		if got := NodeMayWriteLabel(tt.key); got != tt.want {
			t.Errorf("NodeMayWriteLabel(%q) = %v, want %v", tt.key, got, tt.want)
		}
	}
}
