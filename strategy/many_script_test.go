package strategy

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// writesArgs finds an assignment to an element of KEYS or ARGV, or to
// either table.
var writesArgs = regexp.MustCompile(`\b(KEYS|ARGV)\s*(\[[^\]]*\])?\s*=[^=]|table\.(insert|remove|sort)\s*\(\s*(KEYS|ARGV)`)

// localNames finds the names a local statement declares, which it binds
// anew without writing to what they named before ("local KEYS, ARGV =
// KEYS, ARGV").
var localNames = regexp.MustCompile(`\blocal\s+[\w\s,]+=`)

// findWrite is writesArgs' first match in code, local statements' names
// left out.
func findWrite(code string) string {
	return writesArgs.FindString(localNames.ReplaceAllString(code, "local _ ="))
}

var update = flag.Bool("update", false, "rewrite the generated many-request scripts")

// manyFiles pairs each script with the many-request script generated from
// it (testdata/many.lua.tmpl).
var manyFiles = [][2]string{
	{"fixed_window.lua", "fixed_window_many.lua"},
	{"gcra.lua", "gcra_many.lua"},
	{"sliding_window.lua", "sliding_window_many.lua"},
	{"token_bucket.lua", "token_bucket_many.lua"},
	{"sliding_log.lua", "sliding_log_many.lua"},
	{"aligned_window.lua", "aligned_window_many.lua"},
}

// manyParts are the parts of a many-request script that differ from
// script to script: a paragraph of its header, its locals, and the call of
// decide.
var manyParts = [3]string{"", "", "  local ok, r = pcall(decide, ks, as)\n"}

// alignedManyParts are AlignedWindow's: a request answered "another
// window" is counted nowhere and goes again in a later call, and a later
// request that names one of its keys (the same subject) is answered so
// too, uncounted, so that it is decided after it.
var alignedManyParts = [3]string{`
--
-- A request answered "another window" ({-1, seconds, microseconds}: the
-- caller's estimate of the clock named another window, and nothing was
-- counted) goes again, named anew, in a later call: every later request
-- that names one of its keys, or of the keys of a request answered so
-- after it, is answered so too (the same reply), uncounted, so that the
-- requests of one subject are decided in their order.`, `-- the reply of a request answered "another window", and the keys of the
-- requests answered so
local moved, again = false, {}
local function names_again(ks, nk)
  for i = 1, nk do
    if again[ks[i]] then
      return true
    end
  end
  return false
end
`, `  local ok, r
  if moved and names_again(ks, nk) then
    ok, r = true, moved
  else
    ok, r = pcall(decide, ks, as)
  end
  if ok and type(r) == 'table' and r[1] == -1 then
    moved = r
    for i = 1, nk do
      again[ks[i]] = true
    end
  end
`}

// TestManyScripts proves that each many-request script holds its script's
// code verbatim, so that a request decided in a batch is decided as it is
// alone: change a script, then run this test with -update.
func TestManyScripts(t *testing.T) {
	tmpl, err := os.ReadFile(filepath.Join("testdata", "many.lua.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"ARGV[2] = '1'", "KEYS = {}", "table.insert(ARGV, 1)", "local n = 1\nARGV[n] = 2", "local x = {}\nKEYS = x"} {
		if findWrite(w) == "" {
			t.Fatalf("findWrite misses %q", w)
		}
	}
	for _, r := range []string{"local KEYS, ARGV, redis = KEYS, ARGV, redis\nif ARGV[2] == '0' then", "local KEYS, ARGV = KEYS, ARGV\nlocal n, m = #KEYS, #ARGV"} {
		if w := findWrite(r); w != "" {
			t.Fatalf("findWrite finds %q in code that reads: %q", w, r)
		}
	}
	for _, p := range manyFiles {
		src, err := os.ReadFile(filepath.Join("lua", p[0]))
		if err != nil {
			t.Fatal(err)
		}
		code := scriptCode(string(src))
		// The many-request script hands decide the same tables for every
		// request, which holds only while the code never writes to them.
		if w := findWrite(code); w != "" {
			t.Errorf("%s writes to KEYS or ARGV (%q): its many-request script would pass it on", p[0], w)
		}
		parts := manyParts
		if p[0] == "aligned_window.lua" {
			parts = alignedManyParts
		}
		want := strings.NewReplacer("{{file}}", p[0], "{{code}}", code, "{{order}}", parts[0], "{{locals}}", parts[1], "{{decide}}", parts[2]).Replace(string(tmpl))
		path := filepath.Join("lua", p[1])
		if *update {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s is not generated from %s as it is now: run go test ./strategy -run TestManyScripts -update", p[1], p[0])
		}
	}
}

// scriptCode is src from its first line of code: its leading comments,
// which describe the script's own call, left out.
func scriptCode(src string) string {
	lines := strings.SplitAfter(src, "\n")
	for i, l := range lines {
		if s := strings.TrimSpace(l); s != "" && !strings.HasPrefix(s, "--") {
			return strings.Join(lines[i:], "")
		}
	}
	return ""
}
