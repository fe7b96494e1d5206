package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestReadmeShowsTheTestedReceivers checks that the receivers in the README
// are byte for byte the files TestReceiverSnippets runs.
func TestReadmeShowsTheTestedReceivers(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct{ path, lang string }{
		{"docs/receivers/receiver.go", "go"},
		{"docs/receivers/receiver.ts", "ts"},
		{"docs/receivers/receiver.py", "python"},
	} {
		file, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		shown, err := fencedAfter(readme, "<!-- "+f.path+" -->", f.lang)
		if err != nil {
			t.Errorf("README.md: %v", err)
			continue
		}
		if !bytes.Equal(shown, file) {
			t.Errorf("README.md shows %s differently from the file the tests run; first difference: %s", f.path, firstDiff(shown, file))
		}
	}
}

// fencedAfter returns the content of the ```lang block right after the
// line marker.
func fencedAfter(doc []byte, marker, lang string) ([]byte, error) {
	_, rest, ok := bytes.Cut(doc, []byte("\n"+marker+"\n"))
	if !ok {
		return nil, fmt.Errorf("no line %q", marker)
	}
	open := "```" + lang + "\n"
	if !bytes.HasPrefix(rest, []byte(open)) {
		return nil, fmt.Errorf("%q is not followed by a %q line", marker, strings.TrimSpace(open))
	}
	body, _, ok := bytes.Cut(rest[len(open):], []byte("\n```\n"))
	if !ok {
		return nil, fmt.Errorf("the block after %q is not closed", marker)
	}
	return append(body, '\n'), nil
}

func firstDiff(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d: README %q, file %q", i+1, x, y)
		}
	}
	return "none"
}
