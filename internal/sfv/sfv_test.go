package sfv

import "testing"

// The draft's own examples parse; malformed values do not.
func TestParsePolicyAndRateLimit(t *testing.T) {
	for _, v := range []string{
		`"burst";q=100;w=60,"daily";q=1000;w=86400`,
		`"default";q=100;w=10`,
		`"permin";q=50;w=60,"perhr";q=1000;w=3600`,
		`"peruser";q=100;w=60;pk=:cHsdsRa894==:`,
		`"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:`,
		`"hour";q=1000;w=3600, "day";q=5000;w=86400`,
		`"a\"b\\c";q=0`,
	} {
		if _, err := ParsePolicy(v); err != nil {
			t.Errorf("ParsePolicy(%s): %v", v, err)
		}
	}
	for _, v := range []string{
		``, `burst;q=100;w=60`, `"x";w=60`, `"x";q=-1`, `"x";q=1;w=0`, `"x";q=1.5`, `"x";q="1"`,
		`"x";q=1,`, `"x";q=1 "y";q=2`, `"x";Q=1`, `"x";q=1234567890123456`, `"x";q=1;q=2`,
		`"x;q=1`, "\"x\ty\";q=1", `("x");q=1`, `"x";q=1;pk=abc`, `"x";q=1;qu=requests`,
	} {
		if p, err := ParsePolicy(v); err == nil {
			t.Errorf("ParsePolicy(%q) accepted: %+v", v, p)
		}
	}
	for _, v := range []string{`"default";r=50;t=30`, `"default";r=999;pk=:dHJpYWwxMjEzMjM=:`, `"problemPolicy";r=0;t=10`, `"a";r=1;t=0;acme-x=?1`} {
		if _, err := ParseRateLimit(v); err != nil {
			t.Errorf("ParseRateLimit(%s): %v", v, err)
		}
	}
	for _, v := range []string{`default;r=50`, `"d";t=30`, `"d";r=-1`, `"d";r=1;t=-2`, `"d";r=1;t=1.0`} {
		if s, err := ParseRateLimit(v); err == nil {
			t.Errorf("ParseRateLimit(%q) accepted: %+v", v, s)
		}
	}
	got, err := ParsePolicy(`"qps";q=10;w=1, "qpd";q=1000;w=86400`)
	if err != nil || len(got) != 2 || got[1] != (Policy{"qpd", 1000, 86400}) {
		t.Errorf("ParsePolicy = %+v, %v", got, err)
	}
}
