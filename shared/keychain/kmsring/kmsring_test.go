package kmsring_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/noetl-go/noetl/shared/config/mototest"
	"github.com/noetl-go/noetl/shared/controlplane/cptest"
	"github.com/noetl-go/noetl/shared/credentials"
	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
	"github.com/noetl-go/noetl/shared/keychain"
	"github.com/noetl-go/noetl/shared/keychain/kmsring"
	"github.com/noetl-go/noetl/shared/store"
)

func TestMain(m *testing.M) { devstacktest.Main(m) }

// createKey makes a KMS key and returns its ARN.
func createKey(ctx context.Context, t *testing.T, client *kms.Client) string {
	t.Helper()
	out, err := client.CreateKey(ctx, &kms.CreateKeyInput{Description: aws.String("noetl keychain test")})
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	return aws.ToString(out.KeyMetadata.Arn)
}

// TestKMSRing runs the KMS key ring against moto: values sealed through an
// alias open again, not under another credential's name, and after the alias
// is pointed at a new key (a rotation) the old values still open and Reseal
// moves them under the new key.
func TestKMSRing(t *testing.T) {
	ctx := context.Background()
	url := mototest.Start(t)
	mototest.IsolateSDK(t)
	cfg := mototest.Config(url)
	client := kms.NewFromConfig(cfg)
	newKey := func() string { return createKey(ctx, t, client) }
	first := newKey()
	const alias = "alias/noetl-test-keychain"
	if _, err := client.CreateAlias(ctx, &kms.CreateAliasInput{AliasName: aws.String(alias), TargetKeyId: aws.String(first)}); err != nil {
		t.Fatal(err)
	}
	ring, err := kmsring.New(cfg, alias)
	if err != nil {
		t.Fatal(err)
	}
	if cur, err := ring.Current(ctx); err != nil || cur != first {
		t.Fatalf("current %q %v, want %q", cur, err, first)
	}
	secret := []byte(`{"token":"kms-sealed-token-1"}`)
	s, err := keychain.Seal(ctx, ring, "api_prod", secret)
	if err != nil {
		t.Fatal(err)
	}
	if s.KeyID != first || bytes.Contains(s.WrappedKey, []byte("kms-sealed")) || bytes.Contains(s.Ciphertext, []byte("kms-sealed")) {
		t.Fatalf("sealed under %q, or plaintext in it", s.KeyID)
	}
	if got, err := keychain.Open(ctx, ring, "api_prod", s); err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("open: %q %v", got, err)
	}
	if _, err := keychain.Open(ctx, ring, "api_other", s); !errors.Is(err, keychain.ErrOpen) {
		t.Fatalf("opened under another name's encryption context: %v", err)
	}

	second := newKey()
	if _, err := client.UpdateAlias(ctx, &kms.UpdateAliasInput{AliasName: aws.String(alias), TargetKeyId: aws.String(second)}); err != nil {
		t.Fatal(err)
	}
	rotated, _ := kmsring.New(cfg, alias) // a new function instance sees the alias's new key
	if cur, _ := rotated.Current(ctx); cur != second {
		t.Fatalf("current after the alias moved: %q, want %q", cur, second)
	}
	if got, err := keychain.Open(ctx, rotated, "api_prod", s); err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("a value of the old key after rotation: %q %v", got, err)
	}
	moved, did, err := keychain.Reseal(ctx, rotated, "api_prod", s)
	if err != nil || !did || moved.KeyID != second {
		t.Fatalf("reseal: %q %v %v", moved.KeyID, did, err)
	}
	if got, err := keychain.Open(ctx, rotated, "api_prod", moved); err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("resealed value: %q %v", got, err)
	}
}

// TestKMSRotationAfterAliasMove (issue 33, finding 6): in one running
// process (one ring), after the alias is moved to a new key, rotation
// compares every row with the key the alias names now: every credential is
// resealed under the new key, none remains, and each opens with the new key
// alone, so the old one can be deleted.
func TestKMSRotationAfterAliasMove(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	url := mototest.Start(t)
	mototest.IsolateSDK(t)
	cfg := mototest.Config(url)
	client := kms.NewFromConfig(cfg)
	first, second := createKey(ctx, t, client), createKey(ctx, t, client)
	const alias = "alias/noetl-test-rotation"
	if _, err := client.CreateAlias(ctx, &kms.CreateAliasInput{AliasName: aws.String(alias), TargetKeyId: aws.String(first)}); err != nil {
		t.Fatal(err)
	}
	st := cptest.New(t, 0).Store
	ring, err := kmsring.New(cfg, alias)
	if err != nil {
		t.Fatal(err)
	}
	svc := credentials.New(st, ring, nil)
	put := func(name string) {
		if _, _, err := svc.Put(ctx, credentials.Input{Name: name, Type: "generic", Data: map[string]any{"secret": name + "-value"}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		put(fmt.Sprintf("old%d", i))
	}
	probe, err := keychain.Seal(ctx, ring, "probe", []byte("under the old key"))
	if err != nil {
		t.Fatal(err)
	}
	if rot, err := svc.Rotate(ctx, false, 100); err != nil || rot.KeyID != first || rot.Resealed != 0 || rot.Remaining != 0 {
		t.Fatalf("rotation before the move: %+v %v", rot, err)
	}

	if _, err := client.UpdateAlias(ctx, &kms.UpdateAliasInput{AliasName: aws.String(alias), TargetKeyId: aws.String(second)}); err != nil {
		t.Fatal(err)
	}
	put("new0")
	total := 0
	for {
		rot, err := svc.Rotate(ctx, false, 2)
		if err != nil {
			t.Fatal(err)
		}
		if rot.KeyID != second {
			t.Fatalf("rotation after the alias moved compares with %s, want the alias's new key %s", rot.KeyID, second)
		}
		total += rot.Resealed
		if rot.Remaining == 0 {
			break
		}
		if total > 5 {
			t.Fatalf("rotation does not converge: %+v", rot)
		}
	}
	if total != 5 {
		t.Fatalf("resealed %d credentials, want the 5 under the old key", total)
	}
	// Every row opens asking KMS for the new key, which KMS checks against
	// the wrapped key (a value of the old key does not open so): the old key
	// can go.
	probe.KeyID = second
	if _, err := keychain.Open(ctx, ring, "probe", probe); !errors.Is(err, keychain.ErrOpen) {
		t.Fatalf("a value of the old key opened as the new key's: %v", err)
	}
	rows, err := store.CredentialsNotUnder(ctx, st.Cluster(), "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 6 {
		t.Fatalf("%d credentials, want 6", len(rows))
	}
	for _, row := range rows {
		if row.KeyID != second {
			t.Errorf("%s is still under %s", row.Name, row.KeyID)
		}
		got, err := keychain.Open(ctx, ring, "credential:"+row.Name, keychain.Sealed{KeyID: row.KeyID, WrappedKey: row.WrappedKey, Nonce: row.Nonce, Ciphertext: row.Ciphertext})
		if err != nil || !bytes.Contains(got, []byte(row.Name+"-value")) {
			t.Errorf("%s under the new key: %q %v", row.Name, got, err)
		}
	}
}
