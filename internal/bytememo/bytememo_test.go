package bytememo

import (
	"fmt"
	"testing"
)

func TestRememberedOnTheSecondSighting(t *testing.T) {
	m := New[int](8, 64)
	key := []byte("key")
	sum := m.Sum(key)
	m.Put(key, sum, 1)
	if _, ok := m.Get(key, sum); ok || m.Len() != 0 {
		t.Fatal("remembered on its first sighting")
	}
	m.Put(key, sum, 2)
	if v, ok := m.Get(key, sum); !ok || v != 2 {
		t.Fatalf("Get = %v, %v after the second sighting; want 2, true", v, ok)
	}
}

func TestKeysComparedInFull(t *testing.T) {
	m := New[string](8, 64)
	a, b := []byte("a"), []byte("b")
	// b's value filed under a's digest, as a collision would leave it.
	sum := m.Sum(a)
	m.Put(b, sum, "b's")
	m.Put(b, sum, "b's")
	if v, ok := m.Get(a, sum); ok {
		t.Fatalf("a matched b's entry: %q", v)
	}
	if v, ok := m.Get(b, sum); !ok || v != "b's" {
		t.Fatalf("b: %q, %v", v, ok)
	}
}

func TestKeysAreCopied(t *testing.T) {
	m := New[int](8, 64)
	buf := []byte("key")
	sum := m.Sum(buf)
	m.Put(buf, sum, 1)
	m.Put(buf, sum, 1)
	// The caller's buffer is someone else's now.
	copy(buf, "xxx")
	if _, ok := m.Get([]byte("key"), sum); !ok {
		t.Fatal("the remembered key changed with the caller's buffer")
	}
}

func TestBounded(t *testing.T) {
	m := New[int](4, 64)
	for i := range 20 {
		key := fmt.Appendf(nil, "key-%d", i)
		m.Put(key, m.Sum(key), i)
		m.Put(key, m.Sum(key), i)
	}
	if m.Len() != 4 {
		t.Fatalf("%d entries, want the bound of 4", m.Len())
	}
	last := []byte("key-19")
	if v, ok := m.Get(last, m.Sum(last)); !ok || v != 19 {
		t.Fatalf("the most recent entry: %v, %v", v, ok)
	}
}
