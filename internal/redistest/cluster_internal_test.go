package redistest

import (
	"strings"
	"testing"
)

func TestParseClusterNodes(t *testing.T) {
	const (
		a = "aaa 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460\n"
		b = "bbb 127.0.0.1:30002@40002,host master - 0 1 2 connected 5461-10921 10922\n"
		c = "ccc 127.0.0.1:30003@40003 master - 0 1 3 connected 10923-16383 [16383->-aaa]\n"
	)
	view, err := parseClusterNodes(a + b + c)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"127.0.0.1:30001": "aaa 0-5460",
		"127.0.0.1:30002": "bbb 5461-10921 10922",
		"127.0.0.1:30003": "ccc 10923-16383",
	}
	if len(view) != len(want) {
		t.Fatalf("view = %v, want %v", view, want)
	}
	for k, v := range want {
		if view[k] != v {
			t.Errorf("view[%s] = %q, want %q", k, view[k], v)
		}
	}
	for name, reply := range map[string]string{
		"missing slots": a + b,
		"handshake":     a + b + strings.Replace(c, " master", " master,handshake", 1),
		"pfail":         a + b + strings.Replace(c, " master", " master,fail?", 1),
		"disconnected":  a + b + strings.Replace(c, "connected", "disconnected", 1),
		"no slots":      a + b + c + "ddd 127.0.0.1:30004@40004 master - 0 1 4 connected\n",
		"malformed":     a + b + c + "ddd 127.0.0.1:30004@40004\n",
	} {
		if view, err := parseClusterNodes(reply); err == nil {
			t.Errorf("%s: parseClusterNodes = %v, want an error", name, view)
		}
	}
}
