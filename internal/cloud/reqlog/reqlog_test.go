package reqlog

import (
	"context"
	"testing"
)

func TestRingAndFilter(t *testing.T) {
	l := New(3)
	for i, m := range []string{"GET", "PUT", "GET", "DELETE"} {
		l.Add(Entry{Service: "arm", Method: m, Path: "/subscriptions/s/x" + string(rune('0'+i)), Status: 200})
	}
	all := l.Entries(Filter{})
	if len(all) != 3 || all[0].Seq != 2 || all[2].Seq != 4 {
		t.Fatalf("entries %+v", all)
	}
	if n := l.Count(Filter{Method: "get"}); n != 1 {
		t.Errorf("GETs kept = %d", n)
	}
	if n := l.Count(Filter{PathPrefix: "/SUBSCRIPTIONS/s/x3"}); n != 1 {
		t.Errorf("prefix matches = %d", n)
	}
	if n := l.Count(Filter{Since: 3}); n != 1 || l.Last() != 4 {
		t.Errorf("since 3: %d, last %d", n, l.Last())
	}
	l.Clear()
	l.Add(Entry{Method: "GET"})
	if e := l.Entries(Filter{}); len(e) != 1 || e[0].Seq != 5 {
		t.Errorf("after clear %+v", e)
	}
}

func TestPrincipalSlot(t *testing.T) {
	SetPrincipal(context.Background(), "ignored") // no slot: no effect, no panic
	ctx, get := WithSlot(context.Background())
	if get() != "" {
		t.Fatal("slot not empty")
	}
	SetPrincipal(ctx, "oid")
	if get() != "oid" {
		t.Errorf("principal = %q", get())
	}
}
