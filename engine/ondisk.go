package engine

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/faiss-sidecar/faiss-sidecar/faissfmt"
	"github.com/faiss-sidecar/faiss-sidecar/hnswsearch"
	"github.com/faiss-sidecar/faiss-sidecar/internal/readahead"
	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
	"github.com/faiss-sidecar/faiss-sidecar/quant"
	"github.com/faiss-sidecar/faiss-sidecar/rerank"
)

// Loading mode on_disk: the search walks the file's graph on a compressed
// in-memory copy of its vectors (a guide, package quant), then reranks
// rerank.ShortlistSize(k, oversample) candidates with exact distances from
// the file's own vectors (or Spec.Rerank's file), read with direct I/O.
// The guide is built from the file in one streaming pass and persisted in
// a guide file, reused while the index file is unchanged.
const ModeOnDisk Mode = "on_disk"

// CompressionAuto picks, among quant.Levels (finest first), the finest
// compression level whose guide and every neighbor list, pinned, fit the
// memory budget; else the finest whose guide alone fits; else the index
// is refused, naming the smallest guide (chooseLevel). Without a budget,
// the finest (see machineBudget for a machine that cannot hold the
// index's files and their guide).
const CompressionAuto = "auto"

// CompressionNames are the values Spec.Compression takes: auto, then
// quant.Levels' names.
func CompressionNames() []string {
	out := []string{CompressionAuto}
	for _, l := range quant.Levels {
		out = append(out, l.String())
	}
	return out
}

// checkCompression checks an on_disk spec's compression name.
func checkCompression(spec *Spec) error {
	if spec.Mode != ModeOnDisk {
		if spec.Compression != "" {
			return fieldErr("compression", "{compression} applies to {mode} on_disk, not %q", spec.Mode)
		}
		return nil
	}
	if spec.Compression == "" || spec.Compression == CompressionAuto {
		return nil
	}
	if _, err := quant.ParseLevel(spec.Compression); err != nil {
		shown := spec.Compression
		if len(shown) > 16 { // a long value is not echoed whole
			shown = strings.ToValidUTF8(shown[:16], "") + "…"
		}
		return fieldErr("compression", "unknown {compression} %q (known: %s)", shown, strings.Join(CompressionNames(), ", "))
	}
	return nil
}

// guideBytes bounds what a level's guide of n vectors of dimension d
// holds: the codes, and trained parameters of at most 8 bytes a dimension
// (4x, 5x, 6x, 8x: a minimum and a step; 32x: the centroid and the rotation's
// signs).
func guideBytes(l quant.Level, n int64, d int) int64 {
	return int64(l.BytesPerVector(d))*n + 8*int64(d) + 4096
}

// planOnDisk resolves the compression level and plans an on_disk index's
// memory: the guide first, then (with a budget) the lists through the
// bounded-memory policy in what the guide leaves. It fills in the default
// rerank source: the index file itself, read with direct I/O, at the
// level's default oversampling.
func (p *Plan) planOnDisk(workers int) error {
	spec, pf := &p.spec, p.probe
	g := pf.Graph
	external := pf.Storage == nil && p.vlayout != nil // flat float32 in a separate vector file
	if g.Binary || (!external && (pf.Storage == nil || pf.Storage.SQ != nil || pf.Storage.CodeSize != int64(g.D)*4)) {
		return &tagged{msg: fmt.Sprintf("%s: mode on_disk serves indexes with float (flat) storage; this one is %s",
			spec.Label, pf.Root.FourCC), tags: []error{ErrBadSpec, ErrNotServable}}
	}
	if g.Metric != faissfmt.MetricL2 && g.Metric != faissfmt.MetricInnerProduct {
		return badSpec("%s: mode on_disk serves L2 and inner-product indexes; this one is %s", spec.Label, g.Metric)
	}
	levels := quant.Levels
	if spec.Compression != "" && spec.Compression != CompressionAuto {
		l, _ := quant.ParseLevel(spec.Compression)
		levels = []quant.Level{l}
	}
	if err := p.chooseLevel(levels, workers); err != nil {
		return err
	}
	spec.Compression = p.level.String()
	if err := remoteGuideDir(spec); err != nil {
		return err
	}
	if spec.Rerank == nil {
		spec.Rerank = &RerankSpec{}
	}
	if spec.Rerank.Strategy == "" {
		spec.Rerank.Strategy = onDiskRerankStrategy(spec.MemoryBudget)
	}
	switch {
	case spec.Rerank.Path != "":
	case external: // the separate vector file
		spec.Rerank.Path, spec.Rerank.Label = spec.VectorsPath, spec.VectorsLabel
	default: // the index file's own vectors
		spec.Rerank.Path, spec.Rerank.Label = spec.Path, spec.Label
	}
	if spec.Rerank.Oversample == 0 {
		spec.Rerank.Oversample = quant.DefaultOversample(p.level, g.D)
	}
	if spec.MemoryBudget > 0 {
		p.need = spec.MemoryBudget
	} else {
		p.need = pf.ResidentBytes() + p.cacheBytes + p.guide
	}
	return nil
}

// chooseLevel sets the plan's guide level among levels (finest first) and,
// under a memory budget, the budget's split (CompressionAuto's rule):
// the finest level whose guide fits with every neighbor list pinned
// beside it (hnswsearch.PinsAllLists: the walk on a guide reads no
// vector, but each hop to a list not pinned waits on a device read, so a
// coarser guide with the lists in memory beats a finer one without), else
// the finest whose guide alone fits, else ErrBudget naming the smallest
// guide. One level (named, not auto) is taken when its guide fits.
// Without a budget, the first level.
func (p *Plan) chooseLevel(levels []quant.Level, workers int) error {
	spec, pf := &p.spec, p.probe
	g := pf.Graph
	type fit struct {
		level quant.Level
		guide int64
		bp    hnswsearch.Plan
	}
	use := func(f fit) {
		p.level, p.guide = f.level, f.guide
		if spec.MemoryBudget > 0 {
			f.bp.Apply(&p.opts)
			p.cacheBytes, p.heap = f.bp.BlockCacheBytes, f.bp.HeapBytes
			p.splitBudgetCache()
		}
	}
	if spec.MemoryBudget <= 0 {
		use(fit{level: levels[0], guide: guideBytes(levels[0], g.NTotal, g.D)})
		return nil
	}
	var guideOnly *fit // the finest whose guide alone fits
	lists := int64(-1) // the lists' estimate, read once when a choice needs it
	least := quant.Level(0)
	for _, l := range levels {
		gb := guideBytes(l, g.NTotal, g.D)
		bp, err := hnswsearch.PlanBudget(pf, p.backend == BackendDirect, spec.MemoryBudget-gb, workers)
		if err != nil {
			if least == 0 || gb < guideBytes(least, g.NTotal, g.D) {
				least = l
			}
			continue
		}
		f := fit{l, gb, bp}
		if len(levels) == 1 {
			use(f)
			return nil
		}
		if lists < 0 {
			if lists, err = p.estimateLists(); err != nil {
				return err
			}
		}
		if hnswsearch.PinsAllLists(pf, bp.Options.HeldBytes, lists) {
			use(f)
			return nil
		}
		if guideOnly == nil {
			guideOnly = &f
		}
	}
	if guideOnly != nil {
		use(*guideOnly)
		return nil
	}
	gb, work := guideBytes(least, g.NTotal, g.D), hnswsearch.MinBudget(pf, workers)
	var whose string
	switch {
	case p.budgetFromMachine() && spec.Room == 1:
		whose = " (none was set, and the node's memory budget has none free: other indexes hold it)"
	case p.budgetFromMachine() && spec.Room > 0:
		whose = fmt.Sprintf(" (none was set: the %d bytes of the node's memory budget no other index holds)", spec.Room)
	case p.budgetFromMachine():
		whose = fmt.Sprintf(" (none was set: this machine's memory, %d bytes or its cgroup's limit, less room for the process and the %d bytes its caller holds beside the index)", spec.machine(), spec.Beside)
	}
	return fmt.Errorf("%s: %w: on_disk at %s needs a guide of %d bytes and %d bytes of working memory (small arrays, %d workers' scratch, 64 cached vectors): at least %d bytes, and the budget is %d%s",
		spec.Label, hnswsearch.ErrBudget, least, gb, work, max(workers, 1), gb+work, spec.MemoryBudget, whose)
}

// machineBudget is the memory budget an on_disk spec without one
// (Spec.MachineBudget set) is planned under: none (0) where the machine's
// memory is unknown, the index is an object (the index file is
// indexSize bytes), or the machine's room
// (machineRoom) less what the caller holds beside the index (or the
// caller's Spec.Room) holds what
// the index would hold without a budget: its files (index, separate
// vectors, rerank vectors), whose lists and vectors the page cache then
// keeps, and its finest guide, a quarter of their vectors; else that
// room, at least 1 byte (a budget Prepare then refuses, saying why).
// Without it, a machine (or memory cgroup) smaller than the file reads
// every list hop and every reranked vector through page faults on a cache
// the kernel keeps evicting, several times slower than the same level
// under a budget, and auto may pick a guide that does not fit at all.
func machineBudget(spec *Spec, indexSize int64) int64 {
	m := spec.machine()
	if m <= 0 || storage.IsRemote(spec.Path) {
		return 0
	}
	files := indexSize
	for _, path := range []string{spec.VectorsPath, rerankPath(spec)} {
		if path == "" {
			continue
		}
		if st, err := os.Stat(path); err == nil {
			files += st.Size()
		}
	}
	room := machineRoom(m) - max(spec.Beside, 0)
	if spec.Room > 0 {
		room = spec.Room
	}
	if files+files/4 <= room {
		return 0
	}
	return max(room, 1)
}

// rerankPath is a spec's separate rerank vector file, "" for none or the
// index's own files.
func rerankPath(spec *Spec) string {
	if spec.Rerank == nil || spec.Rerank.Path == spec.Path || spec.Rerank.Path == spec.VectorsPath {
		return ""
	}
	return spec.Rerank.Path
}

// estimateLists is hnswsearch.EstimatePinnedLists of the plan's index, read
// as Probe reads it (a batch of 512 small reads), through the file Prepare
// opened. Under backend direct the reads are direct too: a cold 4 KiB read
// through the page cache can bring a larger folio in, charged to the
// process's memory cgroup while the guide loads beside it.
func (p *Plan) estimateLists() (int64, error) {
	ctx := loadContext(p.spec.Ctx)
	st, err := p.src.sample(ctx, p.backend)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	est, err := hnswsearch.EstimatePinnedLists(ctx, p.probe, st)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p.spec.Label, err)
	}
	return est, nil
}

// onDiskRerankStrategy is how on_disk reads the vectors it reranks when
// the spec names no rerank source: under a memory budget with direct I/O
// (the page cache is not the index's to use); without one in place from a
// mapping, where a warm index's vectors already are (direct I/O would read
// the device for every shortlist, MADV_WILLNEED cost a system call per
// vector).
func onDiskRerankStrategy(budget int64) string {
	if budget > 0 {
		return DefaultRerankStrategy
	}
	return rerank.StrategyMmap
}

// GuidePath is where an on_disk index's guide lives: beside the index
// when dir is empty, as the index file's name + "." + level + ".guide";
// in dir (a directory of many indexes' guides), and for an s3:// index
// (whose dir is Spec.GuideDir as Prepare fills it in), as sharedGuideName
// + "." + level + ".guide".
func GuidePath(dir, indexPath, level string) string {
	name := filepath.Base(indexPath)
	switch {
	case storage.IsRemote(indexPath):
		name = sharedGuideName(indexPath)
	case dir == "":
		dir = filepath.Dir(indexPath)
	default: // a directory of many indexes' guides
		name = sharedGuideName(indexPath)
	}
	return filepath.Join(dir, name+"."+level+".guide")
}

// openGuide loads the index's guide when its file matches the index file,
// else builds and saves it (buildGuide). A guide that cannot be written is
// still served; why is in GuideInfo.
func (x *Index) openGuide(p *Plan) error {
	spec := x.spec
	r, off, src, err := guideSource(loadContext(spec.Ctx), x.st, x.file, spec.Path, p.src.mtime, x.vst, p.vlayout)
	if err != nil {
		return err
	}
	path, name := GuidePath(spec.GuideDir, spec.Path, p.level.String()), guideName(&spec, p.level.String())
	// Any guide that cannot be used is rebuilt, and why is reported: none
	// at the path, another file's or version's, damaged, of another level,
	// not a regular file, or unreadable (a directory in the way).
	c, err := quant.LoadAs(path, name, src)
	if err == nil && c.Level() != p.level {
		err = fmt.Errorf("%w: %s holds a %s guide, not %s", quant.ErrStale, name, c.Level(), p.level)
		c.Close()
	}
	x.guideInfo = GuideInfo{Path: name, Level: p.level.String(), Loaded: err == nil}
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			x.guideInfo.Rebuilt = err.Error()
		}
		if c, x.guideInfo.NotSaved, err = buildGuide(r, off, x.file, p.level, path, name, src, p.buildOptions()); err != nil {
			return err
		}
	}
	x.guide = c
	x.guideInfo.Bytes, x.guideInfo.Exact = c.Bytes(), c.Exact()
	return nil
}

// identify is the index file's identity a guide records; mtime is the
// file's modification time as its load opened it.
func identify(r io.ReaderAt, f *faissfmt.File, mtime time.Time) (quant.SourceID, error) {
	src, err := quant.IdentifyFile(r, f, mtime.UnixNano())
	if err != nil {
		return src, fmt.Errorf("identifying the index file for its guide: %w", err)
	}
	return src, nil
}

// buildOptions are the guide build's options: the spec's context and
// progress, buildMemory, and the process's kernel choice.
func (p *Plan) buildOptions() quant.BuildOptions {
	return quant.BuildOptions{Ctx: p.spec.Ctx, Progress: p.spec.Progress, MemoryBytes: p.buildMemory(), NoAVX512: !p.spec.Env.avx512()}
}

// buildMemory is what the plan's guide build may hold beside the codes:
// under a budget, what the budget leaves beside the guide and the small
// arrays (the lists and the vector cache it also pays for fill only
// after the build); 0 (the build's defaults) without one.
func (p *Plan) buildMemory() int64 {
	if p.spec.MemoryBudget <= 0 {
		return 0
	}
	return max(p.spec.MemoryBudget-p.guide-p.probe.ResidentBytes(), 1)
}

// Replan is the plan for a caller that now holds beside bytes beside the
// index (Spec.Beside: inputs it read after Prepare, so that Prepare's
// refusals of the spec came first): the same plan when that leaves its
// machine budget (machineBudget) as it was, else Prepare's anew, and this
// plan discarded. Without Spec.MachineBudget, always the same plan.
func (p *Plan) Replan(beside int64) (*Plan, error) {
	orig := p.orig
	orig.Beside = beside
	if !orig.MachineBudget || orig.MemoryBudget != 0 || orig.Mode != ModeOnDisk {
		return p, nil
	}
	if machineBudget(&orig, p.src.size) == p.spec.MemoryBudget { // 0, or machineBudget's for the beside before
		p.spec.Beside, p.orig.Beside = beside, beside
		return p, nil
	}
	src := p.src // planned anew on the same open file and parse
	p.src = &source{}
	return prepare(orig, src)
}

// OpenHeapBytes is what the Go heap may hold while the plan's index
// opens: its heap share, or, for on_disk under a budget, what a guide
// build may hold (buildMemory, at most quant.DefaultBuildBytes) when that
// is more. A caller that limits the runtime's memory to the heap share
// while opening would have the collector run continually while a larger
// training sample is live.
func (p *Plan) OpenHeapBytes() int64 {
	if p.spec.Mode != ModeOnDisk {
		return p.heap
	}
	return max(p.heap, min(p.buildMemory(), quant.DefaultBuildBytes))
}

// buildGuide builds f's guide at level from its vectors (read through r
// from off, contiguous: guideSource, in one streaming pass) and writes it
// to path atomically, creating its directory. notSaved says why it could
// not be written, naming the guide name. opt is the plan's
// (Plan.buildOptions).
func buildGuide(r io.ReaderAt, off int64, f *faissfmt.File, level quant.Level, path, name string, src quant.SourceID,
	opt quant.BuildOptions) (c *quant.Codes, notSaved string, err error) {
	g := f.Graph
	if o, ok := r.(objectReader); ok { // an object (remoteGuideSource): streamed in parallel ranged GETs
		ra := readahead.New(o, o.Size(), readahead.DefaultChunk, readahead.DefaultAhead)
		defer ra.Close()
		r = ra
	}
	c, err = quant.Build(r, off, int(g.NTotal), g.D, g.Metric, level, opt)
	if err != nil {
		err = fmt.Errorf("building the %s guide: %w", level, err)
		if errors.Is(err, quant.ErrNonFinite) { // the file's data, not the server: a 422
			err = &tagged{msg: err.Error(), tags: []error{ErrNotServable}, inner: err}
		}
		return nil, "", err
	}
	werr := partial.NameError(os.MkdirAll(filepath.Dir(path), 0o755), filepath.Dir(path), filepath.Dir(name))
	if werr == nil {
		werr = quant.WriteAs(path, name, c, src)
	}
	if werr != nil {
		notSaved = werr.Error()
	}
	return c, notSaved, nil
}

// Quantize builds the guide of the index at spec.Path at spec.Compression
// (auto: the finest) into out ("": GuidePath(spec.GuideDir, …)) ahead of
// time, as an on_disk open would, and describes it.
func Quantize(spec Spec, out string) (GuideInfo, error) {
	spec.Mode, spec.MemoryBudget, spec.Rerank = ModeOnDisk, 0, nil
	if spec.Label == "" {
		spec.Label = spec.Path
	}
	if err := checkCompression(&spec); err != nil {
		return GuideInfo{}, err
	}
	p, err := Prepare(spec)
	if err != nil {
		return GuideInfo{}, err
	}
	ctx := loadContext(spec.Ctx)
	h, obj, changed := p.src.take()
	st, err := storage.Open(ctx, spec.Path, storage.Options{Backend: BackendPread, CacheBytes: 1 << 20, Object: obj, File: h, S3: spec.Env.s3()})
	if err != nil {
		return GuideInfo{}, err
	}
	defer st.Close()
	f := p.src.reusable(h, obj, changed)
	if f == nil {
		if f, err = Parse(ctx, st, spec.Path); err != nil {
			return GuideInfo{}, fmt.Errorf("%s: %w", spec.Label, err)
		}
	}
	var vst partial.Storage
	if p.vlayout != nil {
		if vst, err = storage.Open(ctx, spec.VectorsPath, storage.Options{Backend: BackendPread, CacheBytes: 1 << 20, S3: spec.Env.s3()}); err != nil {
			return GuideInfo{}, err
		}
		defer vst.Close()
	}
	r, off, src, err := guideSource(ctx, st, f, spec.Path, p.src.mtime, vst, p.vlayout)
	if err != nil {
		return GuideInfo{}, err
	}
	if out == "" {
		out = GuidePath(p.spec.GuideDir, spec.Path, p.level.String())
	}
	c, notSaved, err := buildGuide(r, off, f, p.level, out, out, src, p.buildOptions())
	if err != nil {
		return GuideInfo{}, fmt.Errorf("%s: %w", spec.Label, err)
	}
	defer c.Close()
	if notSaved != "" {
		return GuideInfo{}, fmt.Errorf("writing the guide %s: %s", out, notSaved)
	}
	return GuideInfo{Path: out, Level: p.level.String(), Bytes: c.Bytes()}, nil
}

// GuideInfo describes an on_disk index's guide.
type GuideInfo struct {
	Path  string `json:"path"` // as Spec's labels name it (guideName)
	Level string `json:"compression"`
	Bytes int64  `json:"bytes"`
	// Loaded: read from Path; else built when the index opened.
	Loaded bool `json:"loaded"`
	// Rebuilt says why a guide file found at Path was not used.
	Rebuilt string `json:"rebuilt,omitempty"`
	// NotSaved says why the built guide could not be written to Path.
	NotSaved string `json:"not_saved,omitempty"`
	// Exact: the guide holds the vectors without loss (quant.Codes.Exact),
	// so the rerank takes them from it and reads nothing.
	Exact bool `json:"exact"`
}

// Guide describes the index's guide (ok false unless mode on_disk).
func (x *Index) Guide() (GuideInfo, bool) { return x.guideInfo, x.guide != nil }

// guideAdapter presents quant.Codes as the search's hnswsearch.Guide.
type guideAdapter struct{ c *quant.Codes }

func (g guideAdapter) Shape() (int64, int) { return g.c.Shape() }
func (g guideAdapter) NewQuery(avx512 bool) hnswsearch.GuideQuery {
	return g.c.NewQuery(avx512)
}
