package rules_test

import (
	"context"
	"errors"
	"testing"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/rules"
)

// TestAllowFor: AllowFor looks a request's rules up by rule and counts
// them under subject: each subject has its own counters of the rule's
// limits, a rule without rules of its own gets the set's Default
// (Decision.Default), and the Decision names the subject counted.
func TestAllowFor(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		login := limiter.PerDay(2).Named("login")
		fallback := limiter.PerDay(1).Named("fallback")
		set := &rules.Set{
			Subjects: map[string][]limiter.Limit{"POST /login": {login}},
			Default:  rules.LimitUnknown(fallback),
		}
		rl, err := rules.New(ctx, newLimiter(t, b.st), rules.Static(set))
		if err != nil {
			t.Fatal(err)
		}
		allowFor := func(rule, subject string) rules.Decision {
			t.Helper()
			d, err := rl.AllowFor(ctx, rule, subject)
			if err != nil {
				t.Fatalf("AllowFor(%q, %q): %v", rule, subject, err)
			}
			if d.Subject != subject {
				t.Errorf("AllowFor(%q, %q): Subject %q", rule, subject, d.Subject)
			}
			return d
		}
		for i, want := range []bool{true, true, false} {
			d := allowFor("POST /login", "POST /login 192.0.2.1")
			if d.Allowed != want || d.Default || d.Limit.Name != "login" || len(d.Rules) != 1 {
				t.Errorf("login %d of client 1: %+v; want allowed %v by the route's own rule", i, d, want)
			}
		}
		if d := allowFor("POST /login", "POST /login 192.0.2.2"); !d.Allowed || d.Remaining != 1 {
			t.Errorf("client 2's first login: %+v; want admitted with 1 left (its own counter)", d)
		}
		if n := b.counter(t, "POST /login 192.0.2.1", login); n != 2 {
			t.Errorf("client 1's login counter %d, want 2", n)
		}
		if n := b.counter(t, "POST /login", login); n != 0 {
			t.Errorf("the rule's own subject counted %d; want 0 (AllowFor counts under the subject)", n)
		}
		for i, want := range []bool{true, false} {
			d := allowFor("GET /other", "GET /other 192.0.2.1")
			if d.Allowed != want || !d.Default || d.Limit.Name != "fallback" {
				t.Errorf("unknown route %d: %+v; want allowed %v by the Default, Default set", i, d, want)
			}
		}
		if _, err := rl.AllowFor(ctx, "POST /login", ""); !errors.Is(err, limiter.ErrInvalidKey) {
			t.Errorf("empty subject: %v; want ErrInvalidKey", err)
		}
	})
}
