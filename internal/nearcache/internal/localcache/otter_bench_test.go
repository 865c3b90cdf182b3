package localcache_test

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/maypok86/otter/v2"

	"github.com/fintech-bff/bff/internal/nearcache/internal/localcache"
)

// The case for this package, kept measurable: localcache against otter
// (what it replaced, configured as the wrapper over it was: bounded by a
// weight in bytes, a deadline per entry) at the scale that made the
// difference, 200,000 session-sized entries. Run it with
//
//	go test -run '^$' -bench Otter ./internal/nearcache/internal/localcache
//
// For each cache it fills 200,000 entries once, then reports:
//   - gc: the heap the entries added (heap-MiB, heap-objects, scan-MiB:
//     the heap the collector must scan), and per forced collection with
//     the cache full its wall time (ns/op), the CPU its mark phase took
//     (mark-cpu-ms/op) and its longest stop (stw-max-µs);
//   - get, set: the throughput of Gets and Puts of the 200,000 keys from
//     every core (ns/op);
//   - p99: from every core, requests that allocate what a request's
//     handling would (8 KiB and 16 small objects) and Get one entry, so
//     that the collector runs throughout: the latency of the Get alone
//     (get-p50-ns, get-p99-ns, get-p999-ns) and of the whole request
//     (req-p99-ns, req-p999-ns), where the collector's cost lands (its
//     assists, the CPU its workers take), the collections per second
//     (gcs/s) and the share of the CPU time marking took (mark-cpu-%).
//
// Each part runs for -benchtime (1 s by default): about 15 s in all.
// The figures measured are in the package's doc.
func BenchmarkAgainstOtter(b *testing.B) {
	for _, impl := range []struct {
		name string
		new  func() benchCache
	}{
		{"localcache", newBenchLocal},
		{"otter", newBenchOtter},
	} {
		// The cache is reached only through c, which is nil once its
		// parts are done: the other cache's collections do not mark it.
		runtime.GC()
		runtime.GC()
		before := readGC()
		c := impl.new()
		buf := make([]byte, benchKeyLen)
		for i := range benchEntries {
			c.Put(string(benchKey(buf, i)), benchValue(i))
		}
		if n := c.Len(); n < benchEntries {
			b.Fatalf("%s holds %d entries of %d", impl.name, n, benchEntries)
		}
		runtime.GC()
		filled := readGC()

		b.Run(impl.name+"/gc", func(b *testing.B) {
			m0 := readGC()
			for b.Loop() {
				runtime.GC()
			}
			m1 := readGC()
			// After the loop: its start deletes the metrics reported.
			b.ReportMetric((float64(filled.heap)-float64(before.heap))/(1<<20), "heap-MiB")
			b.ReportMetric(float64(filled.objects)-float64(before.objects), "heap-objects")
			b.ReportMetric(float64(filled.scan-before.scan)/(1<<20), "scan-MiB")
			cycles := float64(m1.cycles - m0.cycles)
			b.ReportMetric(1e3*(m1.markCPU-m0.markCPU)/cycles, "mark-cpu-ms/op")
			b.ReportMetric(1e6*maxPause(m0.pauses, m1.pauses), "stw-max-µs")
			runtime.KeepAlive(c)
		})

		b.Run(impl.name+"/get", func(b *testing.B) {
			var misses atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
				buf := make([]byte, benchKeyLen)
				for pb.Next() {
					if _, ok := c.Get(unsafeKey(benchKey(buf, rng.IntN(benchEntries)))); !ok {
						misses.Add(1)
					}
				}
			})
			if misses.Load() > 0 {
				b.Errorf("%d misses on a cache that holds every key", misses.Load())
			}
		})

		b.Run(impl.name+"/p99", func(b *testing.B) {
			var (
				misses           atomic.Int64
				mu               sync.Mutex
				allGets, allReqs latencies
			)
			m0 := readGC()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				rng := rand.New(rand.NewPCG(rand.Uint64(), 2))
				buf := make([]byte, benchKeyLen)
				var gets, reqs latencies
				for pb.Next() {
					k := unsafeKey(benchKey(buf, rng.IntN(benchEntries)))
					t0 := time.Now()
					request()
					t1 := time.Now()
					_, ok := c.Get(k)
					t2 := time.Now()
					gets.add(t2.Sub(t1))
					reqs.add(t2.Sub(t0))
					if !ok {
						misses.Add(1)
					}
				}
				mu.Lock()
				allGets.merge(&gets)
				allReqs.merge(&reqs)
				mu.Unlock()
			})
			elapsed := time.Since(start)
			m1 := readGC()
			if misses.Load() > 0 {
				b.Errorf("%d misses on a cache that holds every key", misses.Load())
			}
			b.ReportMetric(allGets.quantile(0.5), "get-p50-ns")
			b.ReportMetric(allGets.quantile(0.99), "get-p99-ns")
			b.ReportMetric(allGets.quantile(0.999), "get-p999-ns")
			b.ReportMetric(allReqs.quantile(0.99), "req-p99-ns")
			b.ReportMetric(allReqs.quantile(0.999), "req-p999-ns")
			b.ReportMetric(float64(m1.cycles-m0.cycles)/elapsed.Seconds(), "gcs/s")
			if cpu := m1.totalCPU - m0.totalCPU; cpu > 0 { // counted at the end of a cycle
				b.ReportMetric(100*(m1.markCPU-m0.markCPU)/cpu, "mark-cpu-%")
			}
		})

		// Last: replacing entries leaves dead records in localcache's
		// rings (until its eviction reaches them) and garbage in otter.
		b.Run(impl.name+"/set", func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				rng := rand.New(rand.NewPCG(rand.Uint64(), 3))
				buf := make([]byte, benchKeyLen)
				for pb.Next() {
					i := rng.IntN(benchEntries)
					c.Put(string(benchKey(buf, i)), benchValues[i%len(benchValues)])
				}
			})
		})
		c = nil
	}
}

const (
	benchEntries = 200_000
	benchBytes   = 128 << 20 // upstream.token_cache_bytes' default; both caches hold every entry
	benchKeyLen  = 43        // a session handle's
)

// benchSession is a session as the session layer caches it (its compact
// form): five strings and four times, about 190 bytes encoded.
type benchSession struct {
	userID, method, sub, sid, handle     string
	created, lastSeen, authTime, fetched int64
}

// benchKey writes key i into buf (43 bytes).
func benchKey(buf []byte, i int) []byte {
	b := append(buf[:0], "h-"...)
	s := strconv.Itoa(i)
	for range benchKeyLen - 2 - len(s) {
		b = append(b, '0')
	}
	return append(b, s...)
}

// unsafeKey is b as a string for a Get, which keeps nothing of its key.
func unsafeKey(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// benchValue is entry i's session, in strings of its own (as decoded from
// the store).
func benchValue(i int) benchSession {
	id := strconv.Itoa(i)
	pad := func(prefix string, n int) string {
		return prefix + strings.Repeat("0", n-len(prefix)-len(id)) + id
	}
	now := time.Now().UnixNano()
	return benchSession{userID: pad("user-", 36), method: "oidc", sub: pad("sub-", 36), sid: pad("sid-", 36),
		handle: pad("h-", benchKeyLen), created: now, lastSeen: now, authTime: now, fetched: now}
}

// benchValues are what the set part puts.
var benchValues = func() []benchSession {
	v := make([]benchSession, 1024)
	for i := range v {
		v[i] = benchValue(i)
	}
	return v
}()

type benchCache interface {
	Get(k string) (benchSession, bool)
	Put(k string, v benchSession)
	Len() int
}

func newBenchLocal() benchCache {
	return localcache.New(localcache.Options[benchSession]{
		MaxBytes: benchBytes,
		Append: func(b []byte, v benchSession) []byte {
			for _, s := range []string{v.userID, v.method, v.sub, v.sid, v.handle} {
				b = localcache.AppendString(b, s)
			}
			for _, t := range []int64{v.created, v.lastSeen, v.authTime, v.fetched} {
				b = localcache.AppendInt(b, t)
			}
			return b
		},
		Read: func(_ string, b []byte) benchSession {
			r := localcache.Reader(b)
			return benchSession{userID: r.String(), method: r.String(), sub: r.String(), sid: r.String(), handle: r.String(),
				created: r.Int(), lastSeen: r.Int(), authTime: r.Int(), fetched: r.Int()}
		},
		Until: func(benchSession) time.Time { return time.Now().Add(time.Hour) },
	})
}

// benchOtter is otter as localcache wrapped it before it was replaced:
// a weight of the entry's estimated bytes, a deadline per entry.
type benchOtter struct {
	c *otter.Cache[string, benchSession]
}

func newBenchOtter() benchCache {
	const overhead = 160 // the wrapper's EntryOverhead
	return benchOtter{otter.Must(&otter.Options[string, benchSession]{
		MaximumWeight: benchBytes,
		Weigher: func(k string, v benchSession) uint32 {
			return uint32(overhead + len(k) + len(v.userID) + len(v.method) + len(v.sub) + len(v.sid) + len(v.handle) + 32)
		},
		ExpiryCalculator: otter.ExpiryWritingFunc(func(otter.Entry[string, benchSession]) time.Duration { return time.Hour }),
	})}
}

func (o benchOtter) Get(k string) (benchSession, bool) { return o.c.GetIfPresent(k) }
func (o benchOtter) Put(k string, v benchSession)      { o.c.Set(k, v) }
func (o benchOtter) Len() int                          { return o.c.EstimatedSize() }

// request allocates what a request's handling would besides the cache
// (a proxied request allocates some KiB): an 8 KiB buffer and 16 small
// objects holding pointers, all garbage at once.
func request() {
	type node struct {
		next *node
		s    string
	}
	var n *node
	for i := range 16 {
		n = &node{n, benchValues[i].userID}
	}
	buf := make([]byte, 8<<10)
	buf[0] = byte(len(n.s))
	requestSink.Store(&buf)
}

var requestSink atomic.Pointer[[]byte]

// gcSample is what runtime/metrics says of the heap and the collector.
type gcSample struct {
	heap, objects, scan, cycles uint64
	markCPU, totalCPU           float64 // seconds
	pauses                      metrics.Float64Histogram
}

var gcMetrics = []string{
	"/gc/scan/heap:bytes",
	"/gc/cycles/total:gc-cycles",
	"/cpu/classes/gc/mark/assist:cpu-seconds",
	"/cpu/classes/gc/mark/dedicated:cpu-seconds",
	"/cpu/classes/gc/mark/idle:cpu-seconds",
	"/cpu/classes/total:cpu-seconds",
	"/sched/pauses/total/gc:seconds",
}

func readGC() gcSample {
	s := make([]metrics.Sample, len(gcMetrics))
	for i, n := range gcMetrics {
		s[i].Name = n
	}
	metrics.Read(s)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h := s[6].Value.Float64Histogram()
	return gcSample{
		heap: ms.HeapAlloc, objects: ms.HeapObjects, scan: s[0].Value.Uint64(),
		cycles:  s[1].Value.Uint64(),
		markCPU: s[2].Value.Float64() + s[3].Value.Float64() + s[4].Value.Float64(), totalCPU: s[5].Value.Float64(),
		pauses: metrics.Float64Histogram{Counts: slices.Clone(h.Counts), Buckets: h.Buckets},
	}
}

// maxPause is the upper bound of the highest bucket of pauses that grew
// from a to b, in seconds.
func maxPause(a, b metrics.Float64Histogram) float64 {
	for i := len(b.Counts) - 1; i >= 0; i-- {
		if b.Counts[i] > a.Counts[i] {
			if u := b.Buckets[i+1]; !math.IsInf(u, 1) {
				return u
			}
			return b.Buckets[i]
		}
	}
	return 0
}

// latencies is a histogram of durations: buckets by power of two, each cut
// in 16, so a quantile is within about 6%.
type latencies struct{ counts [64 * 16]uint64 }

func (l *latencies) add(d time.Duration) {
	ns := uint64(max(d, 1))
	e := bits.Len64(ns) - 1
	var sub uint64
	if e >= 4 {
		sub = (ns >> (e - 4)) & 15
	} else {
		sub = (ns << (4 - e)) & 15
	}
	l.counts[e*16+int(sub)]++
}

func (l *latencies) merge(o *latencies) {
	for i, n := range o.counts {
		l.counts[i] += n
	}
}

// quantile is the upper bound, in nanoseconds, of the bucket that holds
// the q quantile.
func (l *latencies) quantile(q float64) float64 {
	var total uint64
	for _, n := range l.counts {
		total += n
	}
	want := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i, n := range l.counts {
		seen += n
		if seen >= want && n > 0 {
			e, sub := i/16, i%16
			return math.Ldexp(1+float64(sub+1)/16, e)
		}
	}
	return 0
}
