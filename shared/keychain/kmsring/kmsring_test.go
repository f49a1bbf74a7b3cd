package kmsring_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/noetl-go/noetl/shared/config/mototest"
	"github.com/noetl-go/noetl/shared/keychain"
	"github.com/noetl-go/noetl/shared/keychain/kmsring"
)

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
	newKey := func() string {
		out, err := client.CreateKey(ctx, &kms.CreateKeyInput{Description: aws.String("noetl keychain test")})
		if err != nil {
			t.Fatalf("CreateKey: %v", err)
		}
		return aws.ToString(out.KeyMetadata.Arn)
	}
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
