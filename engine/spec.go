package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/hnswsearch"
	"github.com/faiss-sidecar/faiss-sidecar/internal/sysmem"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/blockcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/diskcache"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
	"github.com/faiss-sidecar/faiss-sidecar/quant"
	"github.com/faiss-sidecar/faiss-sidecar/rerank"
)

// Spec says how to open one index.
type Spec struct {
	// Path is the index file, already resolved by the caller (httpapi keeps
	// it inside its data roots); Label is how errors name it (default Path).
	Path, Label string
	// Mode is full (the whole file in memory), memory_efficient (read on
	// demand; also "") or on_disk (ModeOnDisk: the graph walked on an
	// in-memory guide, exact rerank from the file).
	Mode Mode
	// Compression is on_disk's guide level: CompressionAuto ("" too), 4x
	// or 32x. GuideDir holds guide files ("": beside the index; for an
	// s3:// index, RemoteGuideDir, the caller's default, such as the
	// command line's user cache directory; with neither such a load is
	// refused).
	Compression, GuideDir, RemoteGuideDir string
	// GuideDirLabel is how messages name GuideDir ("": its path): a guide
	// there is GuideDirLabel/NAME to them.
	GuideDirLabel string
	// Progress, when set, is called while an on_disk guide is built with
	// the bytes read so far and the total; Ctx, when set, cancels the build.
	Progress func(done, total int64)
	Ctx      context.Context
	// Backend is one of storage.Backends, or "" for ModeBackend's choice, which is direct under a MemoryBudget (its misses are read in
	// batches with direct I/O) unless the file is zstd.
	Backend Backend
	// CacheBytes is the block cache budget (0: partial's default, capped
	// at what the file can fill); CacheBlock its block size (0: 4096).
	CacheBytes int64
	CacheBlock int
	// CacheDir is an s3:// object's local disk cache (NewCacheDir;
	// storage.Options), nil for none.
	CacheDir *CacheDir
	// MemoryBudget > 0 (memory_efficient and on_disk) plans everything the
	// index may hold (hnswsearch.PlanBudget) with Workers concurrent
	// queries (0: GOMAXPROCS).
	MemoryBudget int64
	Workers      int
	// MachineBudget: an on_disk spec without a MemoryBudget, on a machine
	// that cannot hold its files and their 4x guide beside what the caller
	// holds, is planned under machineBudget's: for a
	// caller serving this one index (the command line's bench and
	// search), and for a server, whose indexes share its node budget,
	// under what that has free (Room). Beside is
	// what that caller holds beside the index while it serves (its queries
	// and ground truth), which the machine's budget leaves it. Room, when
	// positive, is the memory the caller gives such an index in place of
	// the machine's (a server: what its node budget has free), and Beside
	// is then not counted.
	MachineBudget bool
	Beside        int64
	Room          int64
	// Semantics and Kernel are hnswsearch's names ("": the defaults).
	Semantics, Kernel string
	// BatchReads, ExactFilterMax, EfSearch (index-level efSearch, 0: the
	// file's) and VerifyChecksum are hnswsearch.Options'.
	BatchReads     bool
	ExactFilterMax int
	EfSearch       int
	VerifyChecksum bool
	// CAGRASeed seeds a CAGRA graph's random level-0 entry points
	// (hnswsearch.Options.CAGRASeed; 0: the fixed default).
	CAGRASeed uint64
	// SpaceType is l2, innerproduct, cosinesimil or hamming ("": the
	// metric's); it sets the score of a hit and, for cosinesimil, the
	// normalisation of queries.
	SpaceType string
	// Rerank, when set, rescores shortlists with full-precision vectors.
	Rerank *RerankSpec
	// VectorsPath is the vector file of a graph written without its
	// vectors (IO_FLAG_SKIP_STORAGE; vectors.go), resolved by the caller;
	// VectorsLabel names it in errors (default VectorsPath). Such a graph
	// cannot be served without one, and a file that holds its vectors
	// takes none.
	VectorsPath, VectorsLabel string
	// Env is the process's choices: its S3 client and kernels (nil: the
	// defaults).
	Env *Env
	// MachineMemory is the memory the process can have (sysmem.Total),
	// when the caller already knows it: reading it takes a dozen file
	// reads, a third of a small index's load (0: Prepare reads it).
	MachineMemory int64
}

// machine is the memory the process can have: MachineMemory, or what the
// system says.
func (s *Spec) machine() int64 {
	if s.MachineMemory > 0 {
		return s.MachineMemory
	}
	return machineMemory()
}

// RerankSpec configures full-precision rescoring.
type RerankSpec struct {
	// Path is the vector file (resolved by the caller); Label names it in
	// errors (default Path).
	Path, Label string
	// Strategy is one of rerank.Strategies ("": DefaultRerankStrategy).
	Strategy string
	// Oversample sizes the shortlist (rerank.ShortlistSize); 0: the
	// default for the vectors' dimension (rerank.DefaultOversample).
	Oversample float64
	// Metric rescores a binary index's shortlist: l2 ("") or ip; a float
	// index always rescores with its own metric.
	Metric string
}

// DefaultRerankStrategy is the rerank read strategy when none is named.
const DefaultRerankStrategy = rerank.StrategyDirect

// Errors. Each front end maps them once: ErrBadSpec and ErrBadRequest to a
// usage error or a 400, ErrNotServable to a 422.
var (
	// ErrBadSpec marks a Spec that cannot be served whatever the file
	// holds (a name, a size, a combination). It matches
	// partial.ErrBadOption too.
	ErrBadSpec = errors.New("bad load spec")
	// ErrBackendMismatch marks a backend that cannot read the file as it
	// is stored (zstd on a plain file, another backend on a zstd one). It
	// matches partial.ErrBadOption too.
	ErrBackendMismatch = errors.New("backend does not fit the file")
	// ErrNotServable marks a file that parses but cannot be searched (no
	// HNSW graph, a mode full check that failed, …).
	ErrNotServable = errors.New("index not servable")
	// ErrBadRequest marks a query that cannot be run (k, ef_search, the
	// vector).
	ErrBadRequest = errors.New("bad request")
)

// tagged is an error that keeps its message and matches extra sentinels.
type tagged struct {
	msg   string
	tags  []error
	inner error
}

func (e *tagged) Error() string { return e.msg }
func (e *tagged) Unwrap() error { return e.inner }
func (e *tagged) Is(t error) bool {
	return slices.Contains(e.tags, t)
}

func badSpec(format string, a ...any) error {
	return &tagged{msg: fmt.Sprintf(format, a...), tags: []error{ErrBadSpec, partial.ErrBadOption}}
}

// asBadSpec marks err (an option error of partial or hnswsearch) as a bad
// spec, message unchanged.
func asBadSpec(err error) error {
	return &tagged{msg: err.Error(), tags: []error{ErrBadSpec, partial.ErrBadOption}, inner: err}
}

func badRequest(format string, a ...any) error {
	return &tagged{msg: fmt.Sprintf(format, a...), tags: []error{ErrBadRequest}}
}

// FieldError is a Spec check that failed on one field. Field is the
// field's name in the HTTP API's load body (mode, backend, semantics,
// kernel, cache_bytes, cache_block, memory_budget, exact_filter_max,
// ef_search, space_type, rerank.strategy, rerank.oversample_factor,
// rerank.metric); Error words the problem with those names, and a front end
// with other names (the CLI's flags) words it with its own by Message. It
// matches ErrBadSpec and partial.ErrBadOption.
type FieldError struct {
	Field string
	// text is the message, each field it names written {name}; args are
	// its values.
	text  string
	args  []any
	inner error
}

func (e *FieldError) Error() string { return e.Message(nil) }
func (e *FieldError) Unwrap() error { return e.inner }
func (e *FieldError) Is(t error) bool {
	return t == ErrBadSpec || t == partial.ErrBadOption
}

// Message is the error with each field named by name(field) (nil, or ""
// for a field it has no name for: the field's own name).
func (e *FieldError) Message(name func(field string) string) string {
	var b strings.Builder
	t := e.text
	for {
		i := strings.IndexByte(t, '{')
		j := strings.IndexByte(t[i+1:], '}')
		if i < 0 || j < 0 {
			b.WriteString(t)
			break
		}
		b.WriteString(t[:i])
		f := t[i+1 : i+1+j]
		if name != nil && name(f) != "" {
			f = name(f)
		}
		b.WriteString(f)
		t = t[i+j+2:]
	}
	return fmt.Sprintf(b.String(), e.args...)
}

// fieldErr is a FieldError on field; text names fields as {name}.
func fieldErr(field, text string, a ...any) error {
	return &FieldError{Field: field, text: text, args: a}
}

// fieldWrap is a FieldError on field carrying err (an option error of
// partial or hnswsearch), message unchanged.
func fieldWrap(field string, err error) error {
	return &FieldError{Field: field, text: "%s", args: []any{err.Error()}, inner: err}
}

// spaceMetric maps each space type to the metric it needs.
var spaceMetric = map[string]string{"l2": "L2", "innerproduct": "IP", "cosinesimil": "IP", "hamming": "Hamming"}

// Plan is a checked, probed Spec whose memory is known but not committed.
type Plan struct {
	spec    Spec
	backend Backend
	probe   *faissfmt.File
	// src is the index's file or object as Prepare opened and probed it,
	// open until Plan.Open builds its storage on it.
	src        *source
	opts       hnswsearch.Options
	cacheBytes int64
	need, heap int64
	level      quant.Level // on_disk's guide level
	guide      int64       // and its bytes
	// A separate vector file (Spec.VectorsPath): where its vectors lie,
	// its size and its cache budget.
	vlayout *rerank.Layout
	vsize   int64
	vcache  int64
	orig    Spec // the spec Prepare was given (Replan)
}

// budgetFromMachine reports whether the plan's memory budget is
// machineBudget's: the spec set none and the plan has one.
func (p *Plan) budgetFromMachine() bool { return p.orig.MemoryBudget == 0 && p.spec.MemoryBudget > 0 }

// machineMemory is the memory a load may not exceed (a test sets less).
var machineMemory = sysmem.Total

// MaxMemoryBudget bounds an index's memory budget: sums of budgets must
// not overflow, and no machine holds more.
const MaxMemoryBudget = 1 << 50

// Prepare checks spec, opens and probes its file (headers and small
// arrays only) and plans its memory. The plan holds the file open for
// Open; Discard releases a plan that will not be opened.
func Prepare(spec Spec) (*Plan, error) { return prepare(spec, nil) }

// prepare is Prepare; src, when not nil, is the spec's file as an earlier
// plan of the same load opened and probed it (Replan), taken over.
func prepare(spec Spec, src *source) (_ *Plan, err error) {
	defer func() {
		if err != nil && src != nil { // the plan is not returned: nothing will open it
			src.close()
		}
	}()
	orig := spec
	if spec.Label == "" {
		spec.Label = spec.Path
	}
	if spec.VectorsLabel == "" {
		spec.VectorsLabel = spec.VectorsPath
	}
	if spec.Mode == "" {
		spec.Mode = ModeMemoryEfficient
	}
	if spec.Rerank != nil {
		rs := *spec.Rerank // the plan's own: defaults are filled in
		spec.Rerank = &rs
	}
	backend, err := modeBackend(spec.Mode, spec.Backend, nil)
	if err != nil {
		return nil, err
	}
	if err := checkStatic(&spec); err != nil {
		return nil, err
	}
	if src == nil {
		if src, err = openSource(spec.Path, spec.Label, spec.Env.s3()); err != nil {
			return nil, err
		}
	}
	if backend == "" {
		backend = src.autoBackend()
	}
	if err := src.fits(backend); err != nil {
		return nil, err
	}
	if spec.Mode == ModeOnDisk && spec.MemoryBudget == 0 && spec.MachineBudget {
		spec.MemoryBudget = machineBudget(&spec, src.size)
	}
	if spec.MemoryBudget > 0 && spec.Backend == "" && backend != BackendZstd {
		backend = BackendDirect // the budget policy reads misses in batches with direct I/O
	}
	sem, _ := hnswsearch.ParseSemantics(spec.Semantics)
	ker, _ := hnswsearch.ParseKernel(spec.Kernel)
	// The probe's reads end with spec.Ctx (a load's deadline, a DELETE).
	ctx := loadContext(spec.Ctx)
	if err := src.probe(ctx, spec, backend); err != nil {
		return nil, err
	}
	pf := src.parse
	p := &Plan{spec: spec, backend: backend, probe: pf, src: src, orig: orig}
	if err := hnswsearch.CheckSearchable(pf); err != nil { // before a download or a guide build
		return nil, &tagged{msg: spec.Label + ": " + err.Error(), tags: []error{ErrNotServable}, inner: err}
	}
	p.opts = hnswsearch.Options{Semantics: sem, Kernel: ker, BatchReads: spec.BatchReads, ExactFilterMax: spec.ExactFilterMax,
		IndexEfSearch: spec.EfSearch, FullMode: spec.Mode == ModeFull, VerifyChecksum: spec.VerifyChecksum, CAGRASeed: spec.CAGRASeed,
		NoAVX512: !spec.Env.avx512()}
	p.cacheBytes = storage.Options{CacheBytes: spec.CacheBytes, BlockSize: spec.CacheBlock, CacheDir: spec.CacheDir}.CacheBudgetFor(storage.CacheAs(spec.Path, backend), pf.Size)
	p.need = pf.ResidentBytes() + p.cacheBytes
	if backend == BackendMemory {
		p.need += pf.Size
	}
	if err := p.planVectors(); err != nil {
		return nil, err
	}
	workers := spec.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if spec.Mode == ModeOnDisk {
		if err := p.planOnDisk(workers); err != nil {
			return nil, err
		}
	} else if spec.MemoryBudget > 0 {
		bp, err := hnswsearch.PlanBudget(pf, backend == BackendDirect, spec.MemoryBudget, workers)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", spec.Label, err)
		}
		bp.Apply(&p.opts)
		p.cacheBytes, p.need, p.heap = bp.BlockCacheBytes, spec.MemoryBudget, bp.HeapBytes
		p.splitBudgetCache()
	}
	if rs := p.spec.Rerank; rs != nil && storage.IsRemote(rs.Path) {
		rs.Strategy = rerank.StrategyBatch // the one strategy that reads an object
	}
	if m := spec.machine(); m > 0 && p.need > m { // the load would be killed (mode full of a file larger than memory)
		switch {
		case spec.MemoryBudget > 0 && !p.budgetFromMachine():
			return nil, fmt.Errorf("%s: %w: a memory budget of %d bytes is more than this machine's memory (%d bytes, or its cgroup's limit)",
				spec.Label, hnswsearch.ErrBudget, spec.MemoryBudget, m)
		case spec.Mode == ModeOnDisk:
			return nil, fmt.Errorf("%s: %w: on_disk at %s needs %d bytes (a guide of %d), more than this machine's memory (%d bytes, or its cgroup's limit)",
				spec.Label, hnswsearch.ErrBudget, p.level, p.need, p.guide, m)
		}
		return nil, fmt.Errorf("%s: %w: the load needs %d bytes, more than this machine's memory (%d bytes, or its cgroup's limit); "+
			"mode memory_efficient or on_disk reads the file on demand", spec.Label, hnswsearch.ErrBudget, p.need, m)
	}
	return p, nil
}

// DefaultMemoryEfficientBackend is mode memory_efficient's backend for an
// uncompressed file when none is named (a zstd file: zstd, by
// storage.AutoBackend).
const DefaultMemoryEfficientBackend = BackendMmap

// ModeBackend resolves a loading mode and an optional backend name to the
// backend that serves them. Mode full reads the whole file into memory
// (backend memory); memory_efficient (also "") reads on demand, by
// default through storage.AutoBackend(path,
// DefaultMemoryEfficientBackend): zstd when the file carries a zstd seek
// table, mmap otherwise. A path that cannot be read picks the plain
// default (the load reports the file). Errors match ErrBadSpec and
// partial.ErrBadOption.
func ModeBackend(mode Mode, backend Backend, path string) (Backend, error) {
	return modeBackend(mode, backend, func() Backend {
		b, err := storage.AutoBackend(path, DefaultMemoryEfficientBackend)
		if err != nil {
			return DefaultMemoryEfficientBackend
		}
		return b
	})
}

// modeBackend is ModeBackend choosing an unnamed backend of mode
// memory_efficient (and on_disk) by auto; with auto nil it leaves that
// choice, "", to a caller that has the file open (source.autoBackend).
func modeBackend(mode Mode, backend Backend, auto func() Backend) (Backend, error) {
	bad := func(field, format string, a ...any) error {
		return fieldWrap(field, partial.BadOptionf(format, a...))
	}
	mode, err := ParseMode(string(mode))
	if err != nil {
		return "", fieldWrap("mode", err)
	}
	if mode == ModeFull {
		if backend != "" && backend != BackendMemory {
			return "", bad("backend", "mode full reads the whole file into memory; backend %q applies to mode memory_efficient", backend)
		}
		return BackendMemory, nil
	}
	switch {
	case backend == "" && auto == nil:
		return "", nil
	case backend == "":
		return auto(), nil
	case backend == BackendMemory:
		return "", bad("backend", "backend memory is mode full")
	}
	if _, err := ParseBackend(string(backend)); err != nil {
		return "", fieldWrap("backend", err)
	}
	return backend, nil
}

// CheckSpec checks what needs no file: names, sizes, combinations, the
// rules Prepare applies first. Its errors are FieldErrors.
func CheckSpec(spec Spec) error {
	if spec.Mode == "" {
		spec.Mode = ModeMemoryEfficient
	}
	if spec.Rerank != nil {
		rs := *spec.Rerank
		spec.Rerank = &rs
	}
	if _, err := modeBackend(spec.Mode, spec.Backend, nil); err != nil {
		return err
	}
	return checkStatic(&spec)
}

// checkStatic checks what needs no file but the backend: names, sizes,
// combinations. It sets the defaults it owns (the rerank strategy).
func checkStatic(spec *Spec) error {
	if storage.IsRemote(spec.Path) {
		if _, _, err := s3.ParseURL(spec.Path); err != nil {
			return fieldWrap("path", err)
		}
	}
	if _, err := hnswsearch.ParseSemantics(spec.Semantics); err != nil {
		return fieldWrap("semantics", err)
	}
	if _, err := hnswsearch.ParseKernel(spec.Kernel); err != nil {
		return fieldWrap("kernel", err)
	}
	if err := blockcache.CheckBlockSize(spec.CacheBlock); err != nil {
		return fieldWrap("cache_block", err)
	}
	if spec.CacheDir != nil {
		if err := diskcache.CheckBudget(spec.CacheDir.Budget()); err != nil {
			return fieldWrap("cache_dir_bytes", err)
		}
	}
	switch {
	case spec.CacheBytes < 0:
		return fieldErr("cache_bytes", "{cache_bytes} %d is negative", spec.CacheBytes)
	case spec.MemoryBudget < 0:
		return fieldErr("memory_budget", "{memory_budget} %d is negative", spec.MemoryBudget)
	case spec.MemoryBudget > MaxMemoryBudget:
		return fieldErr("memory_budget", "{memory_budget} %d is above the largest budget, %d (1 PiB)", spec.MemoryBudget, int64(MaxMemoryBudget))
	case spec.MemoryBudget > 0 && spec.Mode != ModeMemoryEfficient && spec.Mode != ModeOnDisk:
		return fieldErr("memory_budget", "{memory_budget} applies to {mode} memory_efficient and on_disk, not %q", spec.Mode)
	case spec.ExactFilterMax < -1:
		return fieldErr("exact_filter_max", "{exact_filter_max} %d: use a count ≥ 0, or -1 for k only", spec.ExactFilterMax)
	case spec.EfSearch < 0:
		return fieldErr("ef_search", "{ef_search}=%d is negative (0: the file's)", spec.EfSearch)
	}
	if err := checkCompression(spec); err != nil {
		return err
	}
	if spec.EfSearch > 0 {
		if err := hnswsearch.CheckIndexEfSearch(spec.EfSearch); err != nil {
			return fieldWrap("ef_search", err)
		}
	}
	if _, ok := spaceMetric[spec.SpaceType]; spec.SpaceType != "" && !ok {
		return fieldErr("space_type", "unknown {space_type} %q (known: l2, innerproduct, cosinesimil, hamming)", spec.SpaceType)
	}
	if rs := spec.Rerank; rs != nil {
		if rs.Strategy == "" && spec.Mode != ModeOnDisk { // on_disk's default depends on its budget (planOnDisk)
			rs.Strategy = DefaultRerankStrategy
		}
		if rs.Label == "" {
			rs.Label = rs.Path
		}
		switch {
		case rs.Strategy != "" && !slices.Contains(rerank.Strategies, rs.Strategy):
			return fieldErr("rerank.strategy", "unknown {rerank.strategy} %q (known: %s)", rs.Strategy, strings.Join(rerank.Strategies, ", "))
		case rs.Oversample < 0:
			return fieldErr("rerank.oversample_factor", "{rerank.oversample_factor} %g is negative", rs.Oversample)
		case rs.Metric != "" && rs.Metric != "l2" && rs.Metric != "ip":
			return fieldErr("rerank.metric", "unknown {rerank.metric} %q (known: l2, ip)", rs.Metric)
		}
	}
	return nil
}

// Backend is the backend the plan opens.
func (p *Plan) Backend() Backend { return p.backend }

// NeedBytes is what the index will hold: the full copy or the cache
// budget plus the small arrays, or the whole memory budget when one is
// planned. A front end with a node budget charges this.
func (p *Plan) NeedBytes() int64 { return p.need }

// HeapBytes is the Go heap share of a memory budget plan (0 without one);
// the rest of the budget lives outside the Go heap.
func (p *Plan) HeapBytes() int64 { return p.heap }

// Dim is the planned index's dimension and whether it is binary (whose
// queries are compared by code bytes: Index.Dim once open).
func (p *Plan) Dim() (d int, binary bool) { return p.probe.Graph.D, p.probe.Graph.Binary }

// Spec is the plan's spec with its defaults filled in.
func (p *Plan) Spec() Spec { return p.spec }

// Open opens the planned index: storage, parse, search index, space type
// and rerank vectors.
func (p *Plan) Open() (*Index, error) {
	spec := p.spec
	// The open's reads (parse, guide build, downloads, rerank vectors) end
	// with spec.Ctx; reads after it, with their own.
	ctx := loadContext(spec.Ctx)
	h, obj, changed := p.src.take()
	// A rerank from the index file's own vectors reads them on a
	// descriptor of its own (its strategy's), made from the load's open
	// file rather than its path.
	var own *partial.Handle
	if rs := spec.Rerank; rs != nil && rs.Path == spec.Path && h != nil && !p.src.zstd && p.probe.Storage != nil {
		var err error
		if own, err = h.Reopen(); err != nil {
			h.Close()
			return nil, err
		}
		defer own.Close() // a no-op once a store took it over
	}
	st, err := storage.Open(ctx, spec.Path, storage.Options{Backend: p.backend, CacheBytes: p.cacheBytes, BlockSize: spec.CacheBlock,
		AlignOffset: hnswsearch.AlignOffset(p.probe), CacheDir: spec.CacheDir, Object: obj, File: h, S3: spec.Env.s3(),
		Name: spec.Label})
	if err != nil {
		if errors.Is(err, partial.ErrBadOption) {
			return nil, asBadSpec(err)
		}
		return nil, err
	}
	x := &Index{spec: spec, backend: p.backend, st: st, cacheBytes: p.cacheBytes}
	if x.file = p.src.reusable(h, obj, changed); x.file == nil { // the file changed since Prepare, or the plan opens twice
		x.file, err = Parse(ctx, st, spec.Path)
		if err == nil && x.file.VectorsMissing() && p.vlayout == nil {
			err = errVectorsMissing(spec.Label) // the file changed since Prepare
		}
	}
	opts := p.opts
	if err == nil {
		err = x.openVectors(ctx, p, &opts)
	}
	if err == nil && spec.Mode == ModeOnDisk {
		if err = x.openGuide(p); err == nil {
			opts.Guide = guideAdapter{x.guide}
			opts.NoVectorCache = !x.rerankCaches(spec.Rerank)
		}
	}
	if err == nil {
		if x.idx, err = hnswsearch.New(ctx, x.file, st, opts); err != nil && !errors.Is(err, partial.ErrBadOption) && !errors.Is(err, hnswsearch.ErrBadOption) {
			err = &tagged{msg: err.Error(), tags: []error{ErrNotServable}, inner: err}
		}
	}
	if err != nil {
		if x.guide != nil {
			x.guide.Close()
		}
		if x.vst != nil {
			x.vst.Close()
		}
		st.Close()
		var fe *FieldError
		if errors.As(err, &fe) && errors.Is(err, hnswsearch.ErrNoVectors) {
			return nil, err // names the file already
		}
		return nil, fmt.Errorf("%s: %w", spec.Label, err)
	}
	x.space = spec.SpaceType
	if x.space == "" {
		x.space = defaultSpace(x.idx)
	}
	if err := checkSpace(x.space, x.idx); err != nil {
		x.Close()
		return nil, err
	}
	if rs := spec.Rerank; rs != nil {
		if err := x.openRerank(ctx, rs, own); err != nil {
			x.Close()
			return nil, err
		}
	}
	return x, nil
}

// Open is Prepare then Plan.Open, for a caller with no budget to charge.
func Open(spec Spec) (*Index, *Plan, error) {
	p, err := Prepare(spec)
	if err != nil {
		return nil, nil, err
	}
	x, err := p.Open()
	return x, p, err
}

func defaultSpace(x *hnswsearch.Index) string {
	switch {
	case x.Binary():
		return "hamming"
	case x.Metric() == faissfmt.MetricInnerProduct:
		return "innerproduct"
	}
	return "l2"
}

func checkSpace(space string, x *hnswsearch.Index) error {
	want := spaceMetric[space]
	have := x.Metric().String()
	if x.Binary() {
		have = "Hamming"
	}
	if want != have {
		return badSpec("space_type %q needs a %s index, this index is %s", space, want, have)
	}
	return nil
}

// openRerank opens the rerank vectors of rs, its object's open ending
// with ctx; own, when not nil, is the index file's own (rs.Path is the
// index's), opened from the load's file, which the store takes over.
func (x *Index) openRerank(ctx context.Context, rs *RerankSpec, own *partial.Handle) error {
	s, shared, err := x.remoteRerank(rs)
	switch name := cmp.Or(rs.Label, rs.Path); {
	case shared || err != nil:
	case storage.IsRemote(rs.Path):
		s, err = openVectorObject(ctx, x.spec.Env, rs.Path, name)
	case own != nil:
		var l rerank.Layout
		if l, err = rerank.FAISSLayout(x.file, name); err == nil {
			s, err = newRerankStore(x.spec.Env, own, l, rs.Strategy, 0)
		}
	default:
		s, err = openVectorFile(x.spec.Env, rs.Path, name, rs.Strategy, 0)
	}
	if err != nil {
		return err
	}
	x.rerShared = shared
	if x.idx.Binary() {
		if s.Count != x.idx.NTotal() {
			err = fmt.Errorf("%w: %s holds %d vectors, the index has %d", rerank.ErrVectors, rs.Label, s.Count, x.idx.NTotal())
		}
	} else {
		err = s.Check(x.idx.Dim(), x.idx.NTotal())
	}
	if err != nil {
		s.Close()
		return err
	}
	switch vc := x.idx.VectorRecords(); {
	case !x.rerankOwn(rs):
	case x.guide != nil && x.guide.Exact(): // the guide holds the vectors themselves: no read
		s.SetDecoder(x.guide)
	case vc != nil: // the walk reads the guide: the budget's vector cache holds reranked vectors
		s.SetCache(vc)
	}
	x.rer = s
	return nil
}

// newRerankStore reads the vectors l locates in the file h holds with
// strategy, the direct strategy keeping parallel reads in flight (≤ 0:
// rerank.DefaultParallel), with env's kernels; the store takes h over.
func newRerankStore(env *Env, h *partial.Handle, l rerank.Layout, strategy string, parallel int) (*rerank.Store, error) {
	if parallel <= 0 {
		parallel = rerank.DefaultParallel
	}
	var st partial.Storage
	var err error
	switch strategy {
	case rerank.StrategyDirect:
		st, err = partial.NewDirect(h, parallel)
	case rerank.StrategyMmap, rerank.StrategyMmapWillneed:
		st, err = partial.NewMmap(h)
	default: // pread, batch
		st, err = partial.NewFile(h)
	}
	if err != nil {
		return nil, err
	}
	s, err := rerank.NewStore(l, strategy, st)
	if err != nil {
		return nil, err
	}
	s.SetAVX512(env.avx512())
	return s, nil
}

// openVectorFile opens the local vector file at path (named name in
// errors) once: its layout is read through the open file, and the
// strategy's reads are built on it.
func openVectorFile(env *Env, path, name, strategy string, parallel int) (*rerank.Store, error) {
	h, err := partial.OpenHandle(path, partial.Named(name))
	if err != nil {
		return nil, err
	}
	l, err := rerank.ReadLayout(h, h.Size(), name)
	if err != nil {
		h.Close()
		return nil, err
	}
	return newRerankStore(env, h, l, strategy, parallel)
}

// rerankOwn is whether an on_disk index reranks with rs from its own
// vectors (the index file's, or its separate vector file).
func (x *Index) rerankOwn(rs *RerankSpec) bool {
	return x.spec.Mode == ModeOnDisk && rs != nil && (rs.Path == x.spec.Path || rs.Path == x.spec.VectorsPath)
}

// rerankCaches is whether the rerank of an on_disk index with its guide
// open reads vectors through the budget's vector cache: from its own
// vectors, when the guide does not hold them exactly.
func (x *Index) rerankCaches(rs *RerankSpec) bool {
	return x.rerankOwn(rs) && !x.guide.Exact()
}
