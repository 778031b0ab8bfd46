package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/quotagate/limiter/internal/redistest"
)

// TestUsageListsEveryFlag: the usage `limiter -h` prints names every flag
// of every command (read from each command's own -h).
func TestUsageListsEveryFlag(t *testing.T) {
	_, usage, _ := runCmd(t, "-h")
	flagLine := regexp.MustCompile(`(?m)^\s+-([a-z-]+)`)
	for _, cmd := range []string{"check", "bench", "serve"} {
		var line string
		for _, l := range strings.Split(usage, "\n") {
			if strings.Contains(l, "limiter "+cmd+" ") {
				line = l
			}
		}
		if line == "" {
			t.Errorf("usage has no line for %s:\n%s", cmd, usage)
			continue
		}
		_, _, help := runCmd(t, cmd, "-h")
		flags := flagLine.FindAllStringSubmatch(help, -1)
		if len(flags) == 0 {
			t.Errorf("%s -h lists no flags:\n%s", cmd, help)
		}
		for _, f := range flags {
			if !regexp.MustCompile(`-` + regexp.QuoteMeta(f[1]) + `[ \]]`).MatchString(line) {
				t.Errorf("usage line of %s lacks -%s: %q", cmd, f[1], strings.TrimSpace(line))
			}
		}
	}
}

// TestBenchOverTLS: bench takes check's -tls options, so a server whose
// certificate a private CA signed can be measured.
func TestBenchOverTLS(t *testing.T) {
	s := redistest.StartTLSServer(t)
	code, out, errOut := runCmd(t, "bench", "-allocs", "100", "-redis", "rediss://"+s.Addr(), "-tls-ca", s.TLS().CAFile,
		"-adapters", "goredis", "-callers", "1", "-rounds", "1", "-round", "20ms", "-json")
	if code != 0 || !strings.Contains(out, `"ratio"`) || !strings.Contains(errOut, "over TLS") {
		t.Errorf("bench over TLS: exit %d\n%s\n%s", code, out, errOut)
	}
	code, _, errOut = runCmd(t, "bench", "-tls-ca", s.TLS().CAFile)
	if code != 2 {
		t.Errorf("bench -tls-ca without -redis rediss://: exit %d; want 2 (usage)\n%s", code, errOut)
	}
}

// TestBenchSVGKeptOnFailure: a run that fails (Redis refused) leaves the
// chart an earlier run wrote as it was, and no file of its own beside it;
// -svg emptied it before it measured.
func TestBenchSVGKeptOnFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "chart.svg")
	old := "<svg xmlns=\"http://www.w3.org/2000/svg\"></svg>\n"
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, _ := runCmd(t, "bench", "-svg", path, "-redis", "redis://127.0.0.1:1", "-adapters", "redigo", "-callers", "1", "-rounds", "1", "-round", "1ms")
	data, _ := os.ReadFile(path)
	if code == 0 || string(data) != old {
		t.Errorf("bench against a refused Redis: exit %d, %s left as %d bytes %q; want a failure and the previous chart untouched", code, path, len(data), data)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the directory holds %d files after the failed run; want the chart alone", len(entries))
	}
	code, _, errOut := runCmd(t, "bench", "-allocs", "100", "-svg", path, "-callers", "1", "-rounds", "1", "-round", "5ms", "-adapters", "goredis")
	data, _ = os.ReadFile(path)
	if code != 0 || !strings.HasPrefix(string(data), "<svg") || string(data) == old {
		t.Errorf("a run that succeeded: exit %d, chart %d bytes; want a new chart\n%s", code, len(data), errOut)
	}
}

// TestBenchSVGThroughASymlink: -svg given a symbolic link writes its target
// (the link stays a link) and keeps the target's mode.
func TestBenchSVGThroughASymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "chart.svg")
	if err := os.WriteFile(target, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.svg")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCmd(t, "bench", "-allocs", "100", "-svg", link, "-callers", "1", "-rounds", "1", "-round", "5ms", "-adapters", "goredis")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	fi, err := os.Lstat(link)
	data, _ := os.ReadFile(target)
	st, _ := os.Stat(target)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 || !strings.HasPrefix(string(data), "<svg") || st.Mode().Perm() != 0o600 {
		t.Errorf("after -svg through a link: link mode %v (%v), target %q… mode %v; want the link kept, the chart in its target, mode 0600", fi.Mode(), err, string(data[:min(len(data), 10)]), st.Mode().Perm())
	}
}
