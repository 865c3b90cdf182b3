package lru

import (
	"fmt"
	"testing"
)

func TestBoundedLRU(t *testing.T) {
	c := New[string, string](3)
	for _, u := range []string{"a", "b", "c"} {
		c.Put(u, "store:"+u, "v-"+u)
	}
	if v, ok := c.Get("a"); !ok || v != "v-a" { // a is now the most recent
		t.Fatalf("got %q %v, want v-a", v, ok)
	}
	c.Put("d", "store:d", "v-d") // evicts b, the least recently used
	if _, ok := c.Get("b"); ok {
		t.Fatal("got b, want it evicted")
	}
	if got := c.Len(); got != 3 {
		t.Fatalf("got %d entries, want 3", got)
	}
	c.DropStoreKey("store:a")
	if _, ok := c.Get("a"); ok {
		t.Fatal("got a after its store key was invalidated")
	}
	c.Put("c", "store:c", "v-c2") // replacing keeps one entry per key
	if v, _ := c.Get("c"); v != "v-c2" || c.Len() != 2 {
		t.Fatalf("got %q with %d entries, want v-c2 and 2", v, c.Len())
	}
	c.Drop("c")
	if _, ok := c.Get("c"); ok {
		t.Fatal("got c after Drop")
	}
	c.Clear()
	if got := c.Len(); got != 0 {
		t.Fatalf("got %d entries after clear, want 0", got)
	}
	for i := 0; i < 100; i++ {
		c.Put(fmt.Sprint(i), fmt.Sprint("s", i), "")
	}
	if got := c.Len(); got != 3 {
		t.Fatalf("got %d entries after 100 puts, want the bound 3", got)
	}
}

// A key moved to another store key is found only under the new one.
func TestStoreKeyFollowsTheEntry(t *testing.T) {
	c := New[string, int](10)
	c.Put("u", "gen1", 1)
	c.Put("u", "gen2", 2)
	c.DropStoreKey("gen1")
	if v, ok := c.Get("u"); !ok || v != 2 {
		t.Fatalf("got %d %v, want 2", v, ok)
	}
	c.DropStoreKey("gen2")
	if _, ok := c.Get("u"); ok {
		t.Fatal("got u after its current store key was invalidated")
	}
}

func TestDisabled(t *testing.T) {
	c := New[string, int](0)
	c.Put("u", "k", 1)
	if _, ok := c.Get("u"); ok || c.Len() != 0 {
		t.Fatal("a disabled cache kept an entry")
	}
}

func TestPrune(t *testing.T) {
	c := New[int, int](100)
	for i := 0; i < 10; i++ {
		c.Put(i, fmt.Sprint(i), i)
	}
	if n := c.Prune(func(v int) bool { return v%2 == 0 }); n != 5 || c.Len() != 5 {
		t.Fatalf("pruned %d, %d left; want 5 and 5", n, c.Len())
	}
	if _, ok := c.Get(4); ok {
		t.Fatal("an expired entry survived")
	}
	if _, ok := c.Get(3); !ok {
		t.Fatal("a live entry was pruned")
	}
}
