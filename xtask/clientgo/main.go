// Command kinformer-client-go is the load test's client-go side: the cache
// under test of `cargo xtask loadtest --impl client-go`. It runs client-go's
// shared informer factory (typed Pods from informers.NewSharedInformerFactory,
// or metadata-only Pods from metadatainformer) against the simulator or a
// kubeconfig, with handlers that do what the load test's Rust handler does:
// count events and record each change's lag from the commit stamp the
// simulator writes into the object.
//
// With --controller it is the controller benchmark's client-go side
// instead (controller.go).
//
// The load test drives it through a line protocol: one command a line on
// stdin, one JSON reply a line on stdout (logs go to stderr). The commands:
//
//	start            start the informers (the clock of the initial sync)
//	status [len]     {"synced", "seen_rv", "watch_errors", "expired"}, and
//	                 with len the objects cached ("len"; it copies the keys)
//	record NANOS     count events and record the lag of changes committed
//	                 at or after NANOS (ns since the Unix epoch)
//	count            count events without recording their lag (a burst)
//	readers N        start N goroutines reading the cache by key
//	finish FILE      stop counting and reading; the lag samples go to FILE
//	                 ("nanoseconds-since-NANOS lag-µs" a line); replies
//	                 {"recorded", "reads"}
//	dump FILE        the cache's keys and resourceVersions to FILE
//	quit             stop the informers and exit
//
// The process's memory and CPU are measured from outside, by the load test.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// The annotation the simulator stamps with a change's commit time (ns since
// the Unix epoch); xtask/src/loadtest/pods.rs names it too.
const commitAnnotation = "kinformer.dev/commit-unix-nanos"

// Keys the readers look up at most, as the Rust side takes.
const readerKeys = 100_000

type sample struct {
	sinceStart int64
	lagMicros  int64
}

// handler counts events and records their lag; one per registration.
type handler struct {
	events       atomic.Uint64
	recorded     atomic.Uint64
	recording    atomic.Bool
	recordingLag atomic.Bool
	lagFrom      atomic.Int64
	maxRV        atomic.Uint64

	mu      sync.Mutex
	samples []sample
}

func (h *handler) observe(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	h.events.Add(1)
	if rv, err := strconv.ParseUint(m.GetResourceVersion(), 10, 64); err == nil {
		for {
			cur := h.maxRV.Load()
			if rv <= cur || h.maxRV.CompareAndSwap(cur, rv) {
				break
			}
		}
	}
	if !h.recording.Load() {
		return
	}
	h.recorded.Add(1)
	if !h.recordingLag.Load() {
		return
	}
	commit, err := strconv.ParseInt(m.GetAnnotations()[commitAnnotation], 10, 64)
	from := h.lagFrom.Load()
	if err != nil || commit < from {
		return
	}
	lag := (time.Now().UnixNano() - commit) / 1000
	h.mu.Lock()
	h.samples = append(h.samples, sample{sinceStart: commit - from, lagMicros: lag})
	h.mu.Unlock()
}

func (h *handler) funcs() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { h.observe(obj) },
		UpdateFunc: func(_, obj any) { h.observe(obj) },
		DeleteFunc: func(obj any) { h.observe(obj) },
	}
}

// harness holds the informer under test and what it counts.
type harness struct {
	informer      cache.SharedIndexInformer
	start         func(stop <-chan struct{})
	registrations []cache.ResourceEventHandlerRegistration
	handlers      []*handler
	watchErrors   atomic.Uint64
	expired       atomic.Uint64

	stopReaders chan struct{}
	readersDone sync.WaitGroup
	reads       atomic.Uint64
}

func newHarness(cfg *rest.Config, namespace string, metadataOnly, stripManagedFields bool, handlers int) (*harness, error) {
	h := &harness{}
	if metadataOnly {
		client, err := metadata.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		factory := metadatainformer.NewFilteredSharedInformerFactory(client, 0, namespace, nil)
		h.informer = factory.ForResource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).Informer()
		h.start = factory.Start
	} else {
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
		h.informer = factory.Core().V1().Pods().Informer()
		h.start = factory.Start
	}
	if stripManagedFields {
		// What a scale user of client-go does: drop managedFields before
		// the object is cached.
		err := h.informer.SetTransform(func(obj any) (any, error) {
			if m, err := meta.Accessor(obj); err == nil {
				m.SetManagedFields(nil)
			}
			return obj, nil
		})
		if err != nil {
			return nil, err
		}
	}
	err := h.informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		h.watchErrors.Add(1)
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			h.expired.Add(1)
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	if err != nil {
		return nil, err
	}
	for i := 0; i < handlers; i++ {
		hd := &handler{}
		reg, err := h.informer.AddEventHandler(hd.funcs())
		if err != nil {
			return nil, err
		}
		h.handlers = append(h.handlers, hd)
		h.registrations = append(h.registrations, reg)
	}
	return h, nil
}

func (h *harness) synced() bool {
	if !h.informer.HasSynced() {
		return false
	}
	for _, r := range h.registrations {
		if !r.HasSynced() {
			return false
		}
	}
	return true
}

// seenRV is the newest resourceVersion every handler has been called with.
func (h *harness) seenRV() uint64 {
	least := ^uint64(0)
	for _, hd := range h.handlers {
		least = min(least, hd.maxRV.Load())
	}
	return least
}

func (h *harness) startReaders(n int) {
	keys := h.informer.GetStore().ListKeys()
	if len(keys) > readerKeys {
		keys = keys[:readerKeys]
	}
	h.stopReaders = make(chan struct{})
	if len(keys) == 0 {
		return
	}
	indexer := h.informer.GetIndexer()
	for t := 0; t < n; t++ {
		h.readersDone.Add(1)
		go func(i int) {
			defer h.readersDone.Done()
			for {
				select {
				case <-h.stopReaders:
					return
				default:
				}
				for range 1000 {
					i += 104_729
					_, _, _ = indexer.GetByKey(keys[i%len(keys)])
				}
				h.reads.Add(1000)
			}
		}(t * 7919)
	}
}

func (h *harness) finish(path string) (map[string]uint64, error) {
	if h.stopReaders != nil {
		close(h.stopReaders)
		h.readersDone.Wait()
	}
	first := h.handlers[0]
	first.recording.Store(false)
	first.mu.Lock()
	samples := first.samples
	first.samples = nil
	first.mu.Unlock()
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriter(f)
	for _, s := range samples {
		fmt.Fprintf(w, "%d %d\n", s.sinceStart, s.lagMicros)
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return map[string]uint64{"recorded": first.recorded.Load(), "reads": h.reads.Load()}, nil
}

func (h *harness) dump(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, obj := range h.informer.GetStore().List() {
		m, err := meta.Accessor(obj)
		if err != nil {
			continue
		}
		key := m.GetName()
		if ns := m.GetNamespace(); ns != "" {
			key = ns + "/" + key
		}
		fmt.Fprintf(w, "%s %s\n", key, m.GetResourceVersion())
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

func config(server, kubeconfig string) (*rest.Config, error) {
	var cfg *rest.Config
	if kubeconfig != "" {
		c, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, err
		}
		cfg = c
	} else {
		cfg = &rest.Config{Host: server}
	}
	// A scale user lifts the client's rate limit (a negative QPS turns the
	// limiter off).
	cfg.QPS = -1
	return cfg, nil
}

func main() {
	server := flag.String("server", "", "the API server's URL (plain HTTP, no credentials), e.g. the simulator's")
	kubeconfig := flag.String("kubeconfig", "", "a kubeconfig instead of --server")
	namespace := flag.String("namespace", "", "the namespace to cache (empty: all)")
	metadataOnly := flag.Bool("metadata-only", false, "cache PartialObjectMetadata through metadatainformer")
	strip := flag.Bool("strip-managed-fields", false, "drop managedFields in the informer's transform")
	handlers := flag.Int("handlers", 1, "event handlers on the informer")
	controllerMode := flag.Bool("controller", false, "run the controller benchmark's workqueue and workers (see controller.go)")
	workers := flag.Int("workers", 16, "with --controller: worker goroutines")
	queueKeys := flag.Int("queue-bytes", 0, "print the RSS growth per key of N keys added to an empty workqueue, and exit")
	flag.Parse()
	reply := encoder()
	if *queueKeys > 0 {
		reply(queueBytes(*queueKeys))
		return
	}

	cfg, err := config(*server, *kubeconfig)
	if err != nil {
		fail(err)
	}
	if *controllerMode {
		*handlers = 0
	}
	h, err := newHarness(cfg, *namespace, *metadataOnly, *strip, *handlers)
	if err != nil {
		fail(err)
	}
	in := bufio.NewScanner(os.Stdin)
	if *controllerMode {
		c, err := newController(h, max(*workers, 1))
		if err != nil {
			fail(err)
		}
		serveController(c, in, reply)
		return
	}
	if len(h.handlers) == 0 {
		fail(fmt.Errorf("--handlers must be at least 1"))
	}
	stop := make(chan struct{})
	for in.Scan() {
		cmd, arg, _ := strings.Cut(strings.TrimSpace(in.Text()), " ")
		switch cmd {
		case "start":
			h.start(stop)
			reply(map[string]bool{"ok": true})
		case "status":
			status := map[string]any{
				"synced":       h.synced(),
				"seen_rv":      h.seenRV(),
				"watch_errors": h.watchErrors.Load(),
				"expired":      h.expired.Load(),
			}
			// Counting copies every key: only when asked (`status len`).
			if arg == "len" {
				status["len"] = len(h.informer.GetStore().ListKeys())
			}
			reply(status)
		case "record", "count":
			from := int64(0)
			if cmd == "record" {
				if from, err = strconv.ParseInt(arg, 10, 64); err != nil {
					fail(fmt.Errorf("record %q: %w", arg, err))
				}
			}
			for _, hd := range h.handlers {
				hd.lagFrom.Store(from)
				hd.recordingLag.Store(cmd == "record")
				hd.recording.Store(true)
			}
			reply(map[string]bool{"ok": true})
		case "readers":
			n, err := strconv.Atoi(arg)
			if err != nil {
				fail(fmt.Errorf("readers %q: %w", arg, err))
			}
			h.startReaders(n)
			reply(map[string]bool{"ok": true})
		case "finish":
			figures, err := h.finish(arg)
			if err != nil {
				fail(err)
			}
			reply(figures)
		case "dump":
			if err := h.dump(arg); err != nil {
				fail(err)
			}
			reply(map[string]bool{"ok": true})
		case "quit":
			close(stop)
			return
		default:
			fail(fmt.Errorf("unknown command %q", cmd))
		}
	}
	if err := in.Err(); err != nil && err != io.EOF {
		fail(err)
	}
	close(stop)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "kinformer-client-go:", err)
	os.Exit(1)
}
