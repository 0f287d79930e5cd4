package main

// The controller benchmark's client-go side (`cargo xtask controllerbench
// --impl client-go`): the informer feeds a rate-limited workqueue, the way
// client-go's sample controller and kube-controller-manager's controllers
// are written, and worker goroutines run the benchmark's no-op reconcile:
// read the object from the informer's indexer, record the key as in
// flight, yield once, and mark the key done.
//
// Its commands (one a line on stdin, one JSON reply a line on stdout):
//
//	start            start the informer and the workers
//	status           {"synced", "reconciles", "distinct"}
//	reconcile-all    add every cached key to the queue
//	record           record the latency of changes committed from now on
//	truth FILE       the server's keys and resourceVersions ("key rv" lines)
//	lost             {"lost"}: keys of the truth whose newest version was
//	                 never reconciled
//	finish FILE      the latency samples (µs, one a line) to FILE; replies
//	                 {"concurrent", "reconciles", "distinct"}
//	dump FILE        the cache's keys and resourceVersions to FILE
//	quit             stop and exit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Shards of the per-key table, as the Rust tracker's.
const trackerShards = 64

type keyState struct {
	newestRV uint64
	running  uint32
}

type trackerShard struct {
	mu   sync.Mutex
	keys map[string]*keyState
}

// tracker records what every reconcile saw, as the benchmark's Rust tracker
// does for kinformer and kube-rs.
type tracker struct {
	shards     [trackerShards]trackerShard
	reconciles atomic.Uint64
	distinct   atomic.Uint64
	concurrent atomic.Uint64
	recording  atomic.Bool
	recordFrom atomic.Int64

	mu      sync.Mutex
	samples []int64
}

func newTracker() *tracker {
	t := &tracker{}
	for i := range t.shards {
		t.shards[i].keys = map[string]*keyState{}
	}
	return t
}

func (t *tracker) shard(key string) *trackerShard {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return &t.shards[h.Sum64()%trackerShards]
}

func (t *tracker) begin(key string, obj any, now int64) {
	t.reconciles.Add(1)
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	rv, _ := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
	s := t.shard(key)
	s.mu.Lock()
	st, ok := s.keys[key]
	if !ok {
		t.distinct.Add(1)
		st = &keyState{}
		s.keys[key] = st
	}
	if st.running > 0 {
		t.concurrent.Add(1)
	}
	st.running++
	newer := rv > st.newestRV
	st.newestRV = max(st.newestRV, rv)
	s.mu.Unlock()
	if !newer || !t.recording.Load() {
		return
	}
	commit, err := strconv.ParseInt(m.GetAnnotations()[commitAnnotation], 10, 64)
	if err != nil || commit < t.recordFrom.Load() {
		return
	}
	t.mu.Lock()
	t.samples = append(t.samples, max((now-commit)/1000, 1))
	t.mu.Unlock()
}

func (t *tracker) end(key string) {
	s := t.shard(key)
	s.mu.Lock()
	if st, ok := s.keys[key]; ok && st.running > 0 {
		st.running--
	}
	s.mu.Unlock()
}

func (t *tracker) lost(truth map[string]uint64) int {
	n := 0
	for key, want := range truth {
		s := t.shard(key)
		s.mu.Lock()
		st, ok := s.keys[key]
		if !ok || st.newestRV < want {
			n++
		}
		s.mu.Unlock()
	}
	return n
}

// controller is the informer, its queue and its workers.
type controller struct {
	h       *harness
	queue   workqueue.TypedRateLimitingInterface[string]
	tracker *tracker
	workers int
}

func newController(h *harness, workers int) (*controller, error) {
	c := &controller{
		h:       h,
		queue:   workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		tracker: newTracker(),
		workers: workers,
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	_, err := h.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	})
	return c, err
}

func (c *controller) worker() {
	indexer := c.h.informer.GetIndexer()
	for {
		key, shutdown := c.queue.Get()
		if shutdown {
			return
		}
		now := time.Now().UnixNano()
		if obj, exists, err := indexer.GetByKey(key); err == nil && exists {
			c.tracker.begin(key, obj, now)
			runtime.Gosched()
			c.tracker.end(key)
		}
		c.queue.Forget(key)
		c.queue.Done(key)
	}
}

func readTruth(path string) (map[string]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	truth := map[string]uint64{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		key, rv, ok := strings.Cut(s.Text(), " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseUint(rv, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("truth %q: %w", s.Text(), err)
		}
		truth[key] = v
	}
	return truth, s.Err()
}

func writeSamples(path string, samples []int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, s := range samples {
		fmt.Fprintln(w, s)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

func serveController(c *controller, in *bufio.Scanner, reply func(any)) {
	stop := make(chan struct{})
	defer close(stop)
	defer c.queue.ShutDown()
	var truth map[string]uint64
	for in.Scan() {
		cmd, arg, _ := strings.Cut(strings.TrimSpace(in.Text()), " ")
		switch cmd {
		case "start":
			c.h.start(stop)
			for range c.workers {
				go c.worker()
			}
			reply(map[string]bool{"ok": true})
		case "status":
			reply(map[string]any{
				"synced":     c.h.informer.HasSynced(),
				"reconciles": c.tracker.reconciles.Load(),
				"distinct":   c.tracker.distinct.Load(),
			})
		case "reconcile-all":
			for _, key := range c.h.informer.GetIndexer().ListKeys() {
				c.queue.Add(key)
			}
			reply(map[string]bool{"ok": true})
		case "record":
			c.tracker.recordFrom.Store(time.Now().UnixNano())
			c.tracker.recording.Store(true)
			reply(map[string]bool{"ok": true})
		case "truth":
			t, err := readTruth(arg)
			if err != nil {
				fail(err)
			}
			truth = t
			reply(map[string]bool{"ok": true})
		case "lost":
			reply(map[string]int{"lost": c.tracker.lost(truth)})
		case "finish":
			c.tracker.recording.Store(false)
			c.tracker.mu.Lock()
			samples := c.tracker.samples
			c.tracker.samples = nil
			c.tracker.mu.Unlock()
			if err := writeSamples(arg, samples); err != nil {
				fail(err)
			}
			reply(map[string]uint64{
				"concurrent": c.tracker.concurrent.Load(),
				"reconciles": c.tracker.reconciles.Load(),
				"distinct":   c.tracker.distinct.Load(),
			})
		case "dump":
			if err := c.h.dump(arg); err != nil {
				fail(err)
			}
			reply(map[string]bool{"ok": true})
		case "quit":
			return
		default:
			fail(fmt.Errorf("unknown command %q", cmd))
		}
	}
}

// queueBytes measures the RSS growth of adding n fresh keys (the load
// test's names) to an empty workqueue, and of building the keys alone, as
// the benchmark measures kinformer's queue and kube-rs's scheduler.
func queueBytes(n int) map[string]float64 {
	rss := func() float64 {
		runtime.GC()
		b, err := os.ReadFile("/proc/self/status")
		if err != nil {
			return 0
		}
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kib, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
				return kib * 1024
			}
		}
		return 0
	}
	key := func(i int) string { return fmt.Sprintf("ns-%d/web-7d4b9c8f6-%08d", i%20, i) }
	keys := make([]string, 0, n)
	before := rss()
	for i := range n {
		keys = append(keys, key(i))
	}
	alone := (rss() - before) / float64(n)
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	before = rss()
	for i := range n {
		queue.Add(key(i))
	}
	queued := (rss() - before) / float64(n)
	if queue.Len() != n {
		fmt.Fprintf(os.Stderr, "kinformer-client-go: the queue holds %d keys, not %d\n", queue.Len(), n)
	}
	runtime.KeepAlive(keys)
	queue.ShutDown()
	return map[string]float64{"per_queued_key": queued, "per_key_alone": alone}
}

// The encoder of replies, shared by both modes.
func encoder() func(any) {
	out := json.NewEncoder(os.Stdout)
	return func(v any) {
		if err := out.Encode(v); err != nil {
			fail(err)
		}
	}
}
