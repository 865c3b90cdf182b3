package main

import (
	"slices"
	"testing"
)

func TestParseRates(t *testing.T) {
	got, err := parseRates("-rates", " 1000, 2500.5 ")
	if err != nil || !slices.Equal(got, []float64{1000, 2500.5}) {
		t.Fatalf("parseRates = %v, %v; want [1000 2500.5]", got, err)
	}
	if got, err := parseRates("-scale-rates", ""); err != nil || len(got) != 0 {
		t.Fatalf("an empty list: %v, %v; want none", got, err)
	}
	for _, bad := range []string{"0", "-5", "x", "1000,"} {
		if _, err := parseRates("-rates", bad); err == nil {
			t.Errorf("parseRates(%q): no error", bad)
		}
	}
}

func TestSumCalls(t *testing.T) {
	info := "# Commandstats\r\ncmdstat_get:calls=12,usec=30,usec_per_call=2.5\r\ncmdstat_set:calls=3,usec=9\r\nother:1\r\n"
	total, by := sumCalls(info)
	if total != 15 || by["get"] != 12 || by["set"] != 3 || len(by) != 2 {
		t.Fatalf("sumCalls = %d, %v; want 15, get 12, set 3", total, by)
	}
}

func TestTopCommands(t *testing.T) {
	m := runMetrics{wrk: wrkResult{Requests: 1000}, redisByCmd: map[string]int64{"get": 200, "set": 50, "ping": 1}}
	if got, want := topCommands(m), " (get 0.200 set 0.050)"; got != want {
		t.Fatalf("topCommands = %q, want %q", got, want)
	}
}
