package store_test

import (
	"context"
	"fmt"

	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
	"github.com/noetl-go/noetl/shared/store"
)

// example is the store the examples read and write: a cluster database and
// two shard databases on the tests' Postgres, migrated. An example takes no
// *testing.T, so TestMain opens it (openExample) before the tests run.
var example struct {
	ctx context.Context
	st  *store.Store
}

// openExample is the examples' devstacktest.Setup.
func openExample(ctx context.Context, env *devstacktest.Env) (func(), error) {
	pg, err := env.Databases(ctx, 2)
	if err != nil {
		return nil, err
	}
	cfg := store.Config{ClusterDSN: pg.ClusterDSN, ShardDSNs: pg.ShardDSNs}
	if err := store.Migrate(ctx, cfg); err != nil {
		_ = pg.Stop()
		return nil, err
	}
	st, err := store.Open(ctx, cfg)
	if err != nil {
		_ = pg.Stop()
		return nil, err
	}
	example.ctx, example.st = ctx, st
	return func() { st.Close(); _ = pg.Stop() }, nil
}

// The catalog lives in the cluster database: registering the latest
// version's content again is that version, new content the next one.
func ExampleRegisterCatalog() {
	ctx, cluster := example.ctx, example.st.Cluster()
	for _, content := range []string{"workflow: [a]", "workflow: [a]", "workflow: [a, b]"} {
		e, created, err := store.RegisterCatalog(ctx, cluster, "examples/flow", "Playbook", content)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("version", e.Version, "created", created)
	}
	latest, err := store.GetCatalogByPath(ctx, cluster, "examples/flow", 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("latest: version %d, %q\n", latest.Version, latest.Content)
	// Output:
	// version 1 created true
	// version 1 created false
	// version 2 created true
	// latest: version 2, "workflow: [a, b]"
}

// An id carries its shard in its low bits (R-I1): ids allocated on a shard
// route back to it, so an execution's rows are found without a lookup.
func ExampleStore_ShardFor() {
	ctx, st := example.ctx, example.st
	for i := range st.NumShards() {
		got, err := store.AllocateIDs(ctx, st.Shard(i).Pool(), i, 3)
		if err != nil {
			fmt.Println(err)
			return
		}
		var routed []int
		for _, id := range got {
			sh, err := st.ShardFor(id)
			if err != nil {
				fmt.Println(err)
				return
			}
			routed = append(routed, sh.Index())
		}
		fmt.Printf("allocated on shard %d, routed to %v\n", i, routed)
	}
	// Output:
	// allocated on shard 0, routed to [0 0 0]
	// allocated on shard 1, routed to [1 1 1]
}
