package e2e

import (
	"archive/zip"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// functions maps each SAM logical id to its function.
var functions = map[string]string{
	"CatalogFunction": "catalog", "ExecuteFunction": "execute", "IngestFunction": "ingest", "ClaimFunction": "claim",
	"StatusFunction": "status", "ReplayFunction": "replay", "OutboxFunction": "outbox", "SchedulesFunction": "schedules",
	"KeychainFunction": "keychain",
}

// maxBootstrap is the size budget of one function binary (issue #5).
const maxBootstrap = 25 << 20

// checkBootstrap asserts a Lambda binary for provided.al2023 on arm64.
func checkBootstrap(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if st.Size() >= maxBootstrap {
		t.Errorf("%s is %d bytes, over the %d budget", path, st.Size(), maxBootstrap)
	}
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("%s is not an ELF binary: %v", path, err)
	}
	defer f.Close()
	if f.Machine != elf.EM_AARCH64 {
		t.Errorf("%s is built for %v, want arm64", path, f.Machine)
	}
	return st.Size()
}

// TestMakeBuildTargets runs what `sam build` calls for every function
// (make build-<LogicalId> ARTIFACTS_DIR=…, BuildMethod: makefile) and `make
// build`, since the SAM CLI cannot run here. Each function is linked once
// (go build caches no binary, and a link is seconds of CPU on two cores):
// `make build` as the prerequisite of `make package`, which is how a deploy
// runs it, and the build-<LogicalId> rule for the status function.
func TestMakeBuildTargets(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cross-compiles the nine functions")
	}
	tmp := t.TempDir()
	// The group returns when its parallel subtests have ended.
	t.Run("targets", func(t *testing.T) {
		t.Run("package", func(t *testing.T) {
			t.Parallel()
			all := filepath.Join(tmp, "all")
			// make package zips each bootstrap `make build` wrote, executable, as
			// Lambda wants it.
			cmd := exec.Command("make", "--no-print-directory", "package", "BUILD_DIR="+all)
			cmd.Dir = ".."
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("make package: %v\n%s", err, out)
			}
			for _, fn := range functions {
				if !strings.Contains(string(out), filepath.Join(all, fn, "bootstrap")+" (GOARCH=") {
					t.Errorf("make package did not run make build for %s:\n%s", fn, out)
				}
				checkBootstrap(t, filepath.Join(all, fn, "bootstrap"))
			}
			for _, fn := range functions {
				z, err := zip.OpenReader(filepath.Join(all, fn+".zip"))
				if err != nil {
					t.Fatalf("%s.zip: %v", fn, err)
				}
				if len(z.File) != 1 {
					t.Errorf("%s.zip holds %d files, want one bootstrap", fn, len(z.File))
				} else if f := z.File[0]; f.Name != "bootstrap" || f.Mode().Perm()&0o111 == 0 {
					t.Errorf("%s.zip holds %q mode %v, want an executable bootstrap", fn, f.Name, f.Mode())
				}
				z.Close()
			}
		})
		// What sam build calls: one pattern rule for every function. It runs
		// for one (the status function, with the dashboard it embeds); for the
		// others make -n shows it would build that function's package into
		// ARTIFACTS_DIR. make package above linked and checked all nine.
		for id, fn := range functions {
			t.Run("build-"+id, func(t *testing.T) {
				t.Parallel()
				dir := filepath.Join(tmp, id)
				args := []string{"--no-print-directory", "build-" + id, "ARTIFACTS_DIR=" + dir}
				if id != "StatusFunction" {
					args = append([]string{"-n"}, args...)
				}
				cmd := exec.Command("make", args...)
				cmd.Dir = ".."
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("make build-%s: %v\n%s", id, err, out)
				}
				if id != "StatusFunction" {
					if want := "-o " + dir + "/bootstrap ./functions/" + fn; !strings.Contains(string(out), want) {
						t.Fatalf("make -n build-%s does not build %q:\n%s", id, want, out)
					}
					return
				}
				size := checkBootstrap(t, filepath.Join(dir, "bootstrap"))
				t.Logf("build-%s (%s): %d bytes", id, fn, size)
			})
		}
	})
	// Without ARTIFACTS_DIR the target refuses instead of writing /bootstrap.
	cmd := exec.Command("make", "--no-print-directory", "build-CatalogFunction")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("build-CatalogFunction without ARTIFACTS_DIR succeeded:\n%s", out)
	}
}

// TestKeychainOnlyInItsFunction: the keychain's code (sealing, the KMS
// client) is linked into the keychain function only; the others reach no
// credential code (api.Keychain is nil there) and keep their size budget.
func TestKeychainOnlyInItsFunction(t *testing.T) {
	t.Parallel()
	for _, fn := range functions {
		cmd := exec.Command("go", "list", "-tags", "lambda.norpc", "-deps", "./functions/"+fn)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %s: %v", fn, err)
		}
		deps := "\n" + string(out)
		for _, pkg := range []string{"github.com/noetl-go/noetl/shared/keychain", "github.com/aws/aws-sdk-go-v2/service/kms"} {
			if linked := strings.Contains(deps, "\n"+pkg+"\n"); linked != (fn == "keychain") {
				t.Errorf("the %s function links %s: %v", fn, pkg, linked)
			}
		}
	}
}
