package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseRates(t *testing.T) {
	got, err := parseRates("-rates", " 1000, 2500.5 ")
	if err != nil || !slices.Equal(got, []float64{1000, 2500.5}) {
		t.Fatalf("parseRates = %v, %v; want [1000 2500.5]", got, err)
	}
	if got, err := parseRates("-scale-fractions", ""); err != nil || len(got) != 0 {
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

func TestSplicePayments(t *testing.T) {
	full := "# Report\n\n## Goals\n\ntext\n\n## Latency against offered load\n\nsweep\n"
	block := payBegin + "\n## Payments\n\nfirst\n" + payEnd + "\n"
	got := splicePayments(full, block)
	want := "# Report\n\n## Goals\n\ntext\n\n" + block + "\n## Latency against offered load\n\nsweep\n"
	if got != want {
		t.Fatalf("inserted:\n%q\nwant\n%q", got, want)
	}
	// The full run writes the same layout with the block it kept.
	block2 := payBegin + "\n## Payments\n\nsecond\n" + payEnd + "\n"
	if again := splicePayments(got, block2); again != strings.Replace(want, "first", "second", 1) {
		t.Fatalf("replaced:\n%q", again)
	}
	if kept := splicePayments(got, block); kept != got {
		t.Fatalf("the same block twice changed the file:\n%q", kept)
	}
	if got := splicePayments("", block); got != block {
		t.Fatalf("into nothing: %q", got)
	}
}

func TestPaymentsBlockOf(t *testing.T) {
	path := filepath.Join(t.TempDir(), "B.md")
	block := payBegin + "\n## Payments\n\nx\n" + payEnd + "\n"
	if err := os.WriteFile(path, []byte("a\n\n"+block+"\n## Latency against offered load\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := paymentsBlockOf(path); got != block {
		t.Fatalf("paymentsBlockOf = %q, want %q", got, block)
	}
	if got := paymentsBlockOf(filepath.Join(t.TempDir(), "none.md")); got != "" {
		t.Fatalf("no file: %q", got)
	}
}

func TestLuaKeys(t *testing.T) {
	fresh := luaScript(request{method: "POST", path: "/api/v2/payments", body: "{}",
		rotate: &rotation{header: "Cookie", prefix: "s=", file: "/tmp/u.txt"},
		fresh:  &freshKey{header: "Idempotency-Key", prefix: "run-sat1-"}}, 64, 0, 2)
	for _, want := range []string{`h["Idempotency-Key"] = "run-sat1-" .. tid .. "-" .. count`, `h["Cookie"] = "s=" .. lines[(i % n) + 1]`, "i = i + 2"} {
		if !strings.Contains(fresh, want) {
			t.Errorf("the creation script lacks %q:\n%s", want, fresh)
		}
	}
	repeat := luaScript(request{method: "POST", path: "/api/v2/payments",
		rotate: &rotation{header: "Cookie", prefix: "s=", file: "/tmp/r.txt", second: "Idempotency-Key"}}, 64, 500, 2)
	for _, want := range []string{`l:match("^([^\t]*)\t(.*)$")`, `h["Idempotency-Key"] = seconds[(i % n) + 1]`, "delay = function()"} {
		if !strings.Contains(repeat, want) {
			t.Errorf("the repeat script lacks %q:\n%s", want, repeat)
		}
	}
	if strings.Contains(repeat, "count = count + 1") {
		t.Error("the repeat script makes keys")
	}
	// The rotating scripts of the other scenarios are as they were.
	plain := luaScript(request{method: "GET", path: "/api/v2/payments", rotate: &rotation{header: "Cookie", prefix: "s=", file: "/tmp/u.txt"}}, 64, 0, 2)
	if strings.Contains(plain, "Idempotency-Key") || strings.Contains(plain, "seconds") {
		t.Errorf("a plain rotating script:\n%s", plain)
	}
}

func TestEachSample(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "# HELP x\nbff_money_requests_total{result=\"answered\"} 7\nbff_money_requests_total{result=\"replayed\"} 3\n"+
			"bff_money_requests_totally 100\nbff_upstream_requests_total{route=\"/v2/payments\",status=\"201\",type=\"\"} 5\n"+
			"bff_upstream_requests_total{route=\"/v2/payments\",status=\"200\",type=\"\"} 4\n")
	}))
	defer srv.Close()
	by, err := metricByLabel(srv.URL, "bff_money_requests_total", "result")
	if err != nil || len(by) != 2 || by["answered"] != 7 || by["replayed"] != 3 {
		t.Fatalf("metricByLabel = %v, %v", by, err)
	}
	if sum, err := metricSum(srv.URL, "bff_upstream_requests_total"); err != nil || sum != 9 {
		t.Fatalf("metricSum = %v, %v; want 9", sum, err)
	}
}

func TestNetRedis(t *testing.T) {
	base := payRun{redisCmds: 100, redisSecs: 2} // 50/s with the BFF idle
	bff := payRun{redisCmds: 160, redisSecs: 2, handled: 60}
	r := &paymentsResult{baseSat: []payRun{base}, create: payBlock{sat: []payRun{bff}, points: []payPoint{{base: base, bff: bff}}}}
	r.netRedis()
	if r.idleRedisPerSec != 50 || r.create.sat[0].redis != 1 || r.create.points[0].bff.redis != 1 {
		t.Fatalf("idle %v, net %v and %v; want 50, 1 and 1", r.idleRedisPerSec, r.create.sat[0].redis, r.create.points[0].bff.redis)
	}
}
