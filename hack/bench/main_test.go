package main

import "testing"

// A run with -only replaces its sections' tables in docs/benchmarks.md and keeps the rest.
func TestReplaceSectionsKeepsTheOthers(t *testing.T) {
	doc := "# Benchmarks\n\nWritten on day 1.\n\n## A\n\n| a | 1 |\n\n## B\n\nHow B is measured.\n\n| b | 1 |\n| b | 1 |\n\nWhat B means.\n\n## C\n\n| c | 1 |\n"
	fresh := "# Benchmarks\n\nWritten on day 2.\n\n## B\n\n| b | 2 |\n\n## D\n\n| d | 2 |\n"
	want := "# Benchmarks\n\nWritten on day 1.\n\n## A\n\n| a | 1 |\n\n## B\n\nHow B is measured.\n\n| b | 2 |\n\nWhat B means.\n\n## C\n\n| c | 1 |\n\n## D\n\n| d | 2 |\n"
	if got := replaceSections(doc, fresh); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	if got := replaceSections("", fresh); got != fresh {
		t.Fatalf("no document yet: got\n%s", got)
	}
}
