package freeport

import "testing"

func TestPortWindow(t *testing.T) {
	tests := []struct {
		file      string
		low, high int
		ok        bool
	}{
		{"32768\t60999\n", 16384, 32768, true},
		{"49152 65535", 24576, 49152, true},
		{"", 16384, 32768, true},             // unreadable: Linux's default
		{"garbage", 16384, 32768, true},      // unparseable: likewise
		{"99999 100000", 16384, 32768, true}, // not a port
		{"2000 3000", 1024, 2000, false},     // too little room below
		{"1024 65535", 1024, 1024, false},
	}
	for _, tc := range tests {
		low, high, ok := portWindow(tc.file)
		if low != tc.low || high != tc.high || ok != tc.ok {
			t.Errorf("portWindow(%q) = %d, %d, %v; want %d, %d, %v", tc.file, low, high, ok, tc.low, tc.high, tc.ok)
		}
	}
}

// TestFreePort: ports come from below the ephemeral range, are never handed
// out twice in one process, and are free.
func TestFreePort(t *testing.T) {
	low, high, ok := portWindow(readEphemeralRange())
	if !ok {
		t.Skipf("this machine's ephemeral range leaves no room below it (%d-%d)", low, high)
	}
	seen := map[int]bool{}
	for range 200 {
		port, err := Get()
		if err != nil {
			t.Fatal(err)
		}
		if port < low || port >= high {
			t.Fatalf("Get() = %d, outside %d-%d", port, low, high-1)
		}
		if seen[port] {
			t.Fatalf("Get() handed out %d twice", port)
		}
		seen[port] = true
		if !bindable(port) {
			t.Fatalf("Get() = %d, which cannot be bound", port)
		}
	}
}
