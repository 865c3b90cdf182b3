package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// luaDone prints one JSON line with the run's counts and latency
// percentiles (µs), parsed by parseWrk.
const luaDone = `
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('{"bench":1,"requests":%d,"bytes":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,"p50":%d,"p90":%d,"p99":%d,"p999":%d}\n',
    summary.requests, summary.bytes, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9)))
end
`

// luaPace approximates a constant rate in closed-loop wrk: each thread
// hands out send slots every slotMS (threads x 1000 / rate) on LuaJIT's
// monotonic clock and delay() waits for the next slot; slots missed by more
// than 50 ms are dropped rather than sent in a burst. Without ffi it falls
// back to a delay of conns x 1000 / rate per connection, dithered between
// whole milliseconds. Latency is still measured from the actual send
// (coordinated omission).
const luaPace = `
local slotMS, connMS = %f, %f
local okFFI, ffi = pcall(require, "ffi")
local now = nil
if okFFI then
  ffi.cdef[[
    typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
    int clock_gettime(int clk, bench_timespec *ts);
  ]]
  local ts = ffi.new("bench_timespec")
  now = function()
    ffi.C.clock_gettime(1, ts)
    return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
  end
end
local nextAt = nil
delay = function()
  if now == nil then
    local d = math.floor(connMS)
    if math.random() < connMS - d then d = d + 1 end
    return d
  end
  local t = now()
  if nextAt == nil or nextAt < t - 50 then nextAt = t end
  nextAt = nextAt + slotMS
  local d = nextAt - t
  if d <= 0 then return 0 end
  return math.floor(d)
end
`

// request is what a scenario sends: method, path, fixed headers, body, and
// optionally one header whose value rotates over the lines of a file, and
// a header with a value of its own per request (an Idempotency-Key).
type request struct {
	method  string
	path    string
	headers map[string]string
	body    string
	rotate  *rotation
	fresh   *freshKey
}

// rotation sends header: prefix+line, line start+i of file (modulo its
// length) for request i (threads interleave so that no two threads send
// the same line). With second set, each line is two fields split by a tab,
// and the second goes in that header (the payments' repeat: each user's
// cookie and that user's own Idempotency-Key).
type rotation struct {
	header string
	prefix string
	file   string
	start  int64
	second string
}

// freshKey sends header: prefix + the thread's number + "-" + a count,
// a value no other request of the run (nor of another run, by its prefix)
// carries: a new payment each time.
type freshKey struct {
	header string
	prefix string
}

// luaScript renders the wrk script of req; rate > 0 paces each connection
// with delay() so that conns connections offer about rate req/s in total.
func luaScript(req request, conns int, rate float64, threads int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "wrk.method = %q\n", req.method)
	fmt.Fprintf(&b, "wrk.path = %q\n", req.path)
	if req.body != "" {
		fmt.Fprintf(&b, "wrk.body = %q\n", req.body)
	}
	for k, v := range req.headers {
		fmt.Fprintf(&b, "wrk.headers[%q] = %q\n", k, v)
	}
	if req.rotate != nil || req.fresh != nil {
		b.WriteString(dynamicRequest(req, threads))
	}
	if rate > 0 {
		fmt.Fprintf(&b, luaPace, float64(threads)*1000/rate, float64(conns)*1000/rate)
	}
	b.WriteString(luaDone)
	return b.String()
}

// dynamicRequest is the Lua request() of a rotating or keyed request.
func dynamicRequest(req request, threads int) string {
	var b strings.Builder
	r := req.rotate
	if r != nil && r.second == "" {
		fmt.Fprintf(&b, `
local lines = {}
for l in io.lines(%q) do lines[#lines + 1] = l end
local n = #lines`, r.file)
	} else if r != nil {
		fmt.Fprintf(&b, `
local lines, seconds = {}, {}
for l in io.lines(%q) do
  local a, c = l:match("^([^\t]*)\t(.*)$")
  lines[#lines + 1] = a
  seconds[#seconds + 1] = c
end
local n = #lines`, r.file)
	}
	b.WriteString(`
local nextTid = 0
setup = function(thread)
  thread:set("tid", nextTid)
  nextTid = nextTid + 1
end
local h = {}
for k, v in pairs(wrk.headers) do h[k] = v end
local i = nil
local count = 0
request = function()
`)
	if r != nil {
		fmt.Fprintf(&b, `  if i == nil then i = %d + tid end
  h[%q] = %q .. lines[(i %% n) + 1]
`, r.start, r.header, r.prefix)
		if r.second != "" {
			fmt.Fprintf(&b, "  h[%q] = seconds[(i %% n) + 1]\n", r.second)
		}
		fmt.Fprintf(&b, "  i = i + %d\n", threads)
	}
	if k := req.fresh; k != nil {
		fmt.Fprintf(&b, `  count = count + 1
  h[%q] = %q .. tid .. "-" .. count
`, k.header, k.prefix)
	}
	b.WriteString("  return wrk.format(nil, nil, h)\nend\n")
	return b.String()
}

// writeScript writes the script into dir under a name and returns its path.
func writeScript(dir, name, body string) (string, error) {
	path := filepath.Join(dir, name+".lua")
	return path, os.WriteFile(path, []byte(body), 0o644)
}
