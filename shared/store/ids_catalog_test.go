package store_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/noetl-go/noetl/shared/ids"
	"github.com/noetl-go/noetl/shared/store"
)

// TestAllocateIDsConcurrent: many goroutines over two shards, blocks of ids, no
// duplicate anywhere and every id carries its shard.
func TestAllocateIDsConcurrent(t *testing.T) {
	s, _ := newStore(t, 2)
	ctx := testContext(t)
	const workers, rounds, block = 16, 40, 25
	results := make([][]int64, workers)
	shardOf := make([][]int, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				sh := s.Shard((w + r) % 2)
				got, err := store.AllocateIDs(ctx, sh.Pool(), sh.Index(), block)
				if err != nil {
					errs[w] = err
					return
				}
				if !slices.IsSorted(got) || len(got) != block {
					errs[w] = fmt.Errorf("block %v not %d ascending ids", got, block)
					return
				}
				results[w] = append(results[w], got...)
				for range got {
					shardOf[w] = append(shardOf[w], sh.Index())
				}
			}
		}()
	}
	wg.Wait()
	seen := map[int64]bool{}
	for w := range workers {
		if errs[w] != nil {
			t.Fatalf("worker %d: %v", w, errs[w])
		}
		for i, id := range results[w] {
			if seen[id] {
				t.Fatalf("id %d allocated twice", id)
			}
			seen[id] = true
			if ids.ShardOf(id) != shardOf[w][i] {
				t.Fatalf("id %d from shard %d says shard %d", id, shardOf[w][i], ids.ShardOf(id))
			}
		}
	}
	if len(seen) != workers*rounds*block {
		t.Fatalf("%d ids, want %d", len(seen), workers*rounds*block)
	}
	// The SQL next_id() (outbox ids) draws from the same sequence with the same bits.
	for i := range 2 {
		var id int64
		if err := s.Shard(i).Pool().QueryRow(ctx, `SELECT next_id()`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if seen[id] || ids.ShardOf(id) != i {
			t.Errorf("next_id() on shard %d = %d (shard %d, duplicate %v)", i, id, ids.ShardOf(id), seen[id])
		}
	}
	if _, err := store.AllocateIDs(ctx, s.Shard(0).Pool(), s.Shard(0).Index(), 0); err == nil {
		t.Error("AllocateIDs(0) accepted")
	}
}

func TestCatalogVersions(t *testing.T) {
	s, _ := newStore(t, 1)
	ctx := testContext(t)
	db := s.Cluster()

	v1, created, err := store.RegisterCatalog(ctx, db, "examples/hello", "Playbook", "content: 1")
	if err != nil || !created || v1.Version != 1 || v1.CatalogID <= 0 || v1.ContentHash != store.ContentHash("content: 1") {
		t.Fatalf("first registration: %+v created %v err %v", v1, created, err)
	}
	again, created, err := store.RegisterCatalog(ctx, db, "examples/hello", "Playbook", "content: 1")
	if err != nil || created || again.CatalogID != v1.CatalogID || again.Version != 1 {
		t.Fatalf("same content again: %+v created %v err %v", again, created, err)
	}
	v2, created, err := store.RegisterCatalog(ctx, db, "examples/hello", "Playbook", "content: 2")
	if err != nil || !created || v2.Version != 2 || v2.CatalogID == v1.CatalogID {
		t.Fatalf("new content: %+v created %v err %v", v2, created, err)
	}
	// Same content as an older version (not the latest) is a new version.
	v3, created, err := store.RegisterCatalog(ctx, db, "examples/hello", "Playbook", "content: 1")
	if err != nil || !created || v3.Version != 3 {
		t.Fatalf("old content again: %+v created %v err %v", v3, created, err)
	}

	got, err := store.GetCatalog(ctx, db, v2.CatalogID)
	if err != nil || got.Content != "content: 2" || got.Path != "examples/hello" || got.Kind != "Playbook" {
		t.Errorf("GetCatalog: %+v %v", got, err)
	}
	latest, err := store.GetCatalogByPath(ctx, db, "examples/hello", 0)
	if err != nil || latest.Version != 3 {
		t.Errorf("latest: %+v %v", latest, err)
	}
	second, err := store.GetCatalogByPath(ctx, db, "examples/hello", 2)
	if err != nil || second.CatalogID != v2.CatalogID {
		t.Errorf("version 2: %+v %v", second, err)
	}
	if _, err := store.GetCatalogByPath(ctx, db, "examples/hello", 9); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing version: %v", err)
	}
	if _, err := store.GetCatalog(ctx, db, 999999); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing id: %v", err)
	}
}

// TestCatalogRegisterRace registers concurrently, each registration in its own
// transaction: identical content yields one row; distinct contents get distinct,
// gapless versions.
func TestCatalogRegisterRace(t *testing.T) {
	s, _ := newStore(t, 1)
	ctx := testContext(t)
	const n = 12
	run := func(path string, content func(i int) string) []store.CatalogEntry {
		out := make([]store.CatalogEntry, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = pgx.BeginFunc(ctx, s.Cluster(), func(tx pgx.Tx) error {
					var err error
					out[i], _, err = store.RegisterCatalog(ctx, tx, path, "Playbook", content(i))
					return err
				})
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("registration %d of %s: %v", i, path, err)
			}
		}
		return out
	}

	same := run("race/same", func(int) string { return "same" })
	for _, e := range same {
		if e.CatalogID != same[0].CatalogID || e.Version != 1 {
			t.Fatalf("identical registrations disagree: %+v vs %+v", e, same[0])
		}
	}
	distinct := run("race/distinct", func(i int) string { return fmt.Sprintf("content %d", i) })
	versions := map[int]bool{}
	for _, e := range distinct {
		if versions[e.Version] {
			t.Fatalf("version %d handed out twice", e.Version)
		}
		versions[e.Version] = true
	}
	for v := 1; v <= n; v++ {
		if !versions[v] {
			t.Errorf("version %d missing: %v", v, versions)
		}
	}
}

func TestCatalogListKeyset(t *testing.T) {
	s, _ := newStore(t, 1)
	ctx := testContext(t)
	db := s.Cluster()
	type key struct {
		path    string
		version int
	}
	var want []key
	for _, p := range []string{"a/one", "a/two", "b/three", "c/four"} {
		versions := len(p) % 3 // 1..3 versions per path
		if versions == 0 {
			versions = 3
		}
		for v := 1; v <= versions; v++ {
			if _, _, err := store.RegisterCatalog(ctx, db, p, "Playbook", fmt.Sprintf("%s v%d", p, v)); err != nil {
				t.Fatal(err)
			}
		}
		for v := versions; v >= 1; v-- {
			want = append(want, key{p, v})
		}
	}
	collect := func(f store.CatalogFilter) []key {
		var got []key
		for page := 0; page < 20; page++ {
			entries, err := store.ListCatalog(ctx, db, f)
			if err != nil {
				t.Fatal(err)
			}
			size := 0
			for _, e := range entries {
				if e.Content != fmt.Sprintf("%s v%d", e.Path, e.Version) {
					t.Errorf("list returned content %q for %s v%d", e.Content, e.Path, e.Version)
				}
				size += len(e.Content)
				got = append(got, key{e.Path, e.Version})
			}
			if f.MaxContentBytes > 0 && len(entries) > 1 && size-len(entries[len(entries)-1].Content) >= f.MaxContentBytes {
				t.Errorf("the page of %d entries holds %d bytes before its last entry, over the budget of %d", len(entries), size, f.MaxContentBytes)
			}
			if len(entries) == 0 || len(entries) < f.Limit && (f.MaxContentBytes == 0 || size < f.MaxContentBytes) {
				return got
			}
			last := entries[len(entries)-1]
			f.After = &store.CatalogCursor{Path: last.Path, Version: last.Version}
		}
		t.Fatal("pagination did not end")
		return nil
	}
	if got := collect(store.CatalogFilter{Limit: 2}); !slices.Equal(got, want) {
		t.Errorf("all entries, pages of 2:\n got %v\nwant %v", got, want)
	}
	var wantLatest []key
	for i, k := range want {
		if i == 0 || want[i-1].path != k.path {
			wantLatest = append(wantLatest, k)
		}
	}
	if got := collect(store.CatalogFilter{Limit: 3, LatestOnly: true}); !slices.Equal(got, wantLatest) {
		t.Errorf("latest only:\n got %v\nwant %v", got, wantLatest)
	}
	var wantOne []key
	for _, k := range want {
		if k.path == "b/three" {
			wantOne = append(wantOne, k)
		}
	}
	if got := collect(store.CatalogFilter{Limit: 1, Path: "b/three"}); !slices.Equal(got, wantOne) {
		t.Errorf("one path:\n got %v\nwant %v", got, wantOne)
	}
	// A content budget cuts pages short (at least one entry each): every
	// entry is still listed once, in order.
	if got := collect(store.CatalogFilter{Limit: 100, MaxContentBytes: 1}); !slices.Equal(got, want) {
		t.Errorf("pages of one entry by size:\n got %v\nwant %v", got, want)
	}
	if got := collect(store.CatalogFilter{Limit: 100, MaxContentBytes: 20}); !slices.Equal(got, want) {
		t.Errorf("pages of about 20 bytes:\n got %v\nwant %v", got, want)
	}
	if _, err := store.ListCatalog(ctx, db, store.CatalogFilter{Limit: 1001}); err == nil {
		t.Error("limit 1001 accepted")
	}
}
