// Package kmsring is the keychain's AWS KMS key ring: data keys come from
// KMS GenerateDataKey under the configured key and are unwrapped with KMS
// Decrypt, with the value's associated data as the encryption context, so a
// wrapped key opens only for the value it was made for (and CloudTrail
// records which credential every decryption was for). It lives apart from
// package keychain so that only the binaries that need KMS link its client.
package kmsring

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/noetl-go/noetl/shared/keychain"
)

// ContextKey is the encryption-context key carrying a value's associated
// data (the credential's name).
const ContextKey = "noetl:credential"

// API is the part of the KMS client the ring uses.
type API interface {
	GenerateDataKey(ctx context.Context, in *kms.GenerateDataKeyInput, opts ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error)
	Decrypt(ctx context.Context, in *kms.DecryptInput, opts ...func(*kms.Options)) (*kms.DecryptOutput, error)
	DescribeKey(ctx context.Context, in *kms.DescribeKeyInput, opts ...func(*kms.Options)) (*kms.DescribeKeyOutput, error)
}

// Ring is a keychain.KeyRing over one KMS key (an id, ARN, alias name or
// alias ARN). The key id stored with each value is the key's ARN as KMS
// answers it, so repointing an alias at a new key is a rotation: old values
// still open through their own key's ARN, new ones use the new key.
type Ring struct {
	api   API
	keyID string
}

// New returns a ring over keyID with the client cfg builds.
func New(cfg aws.Config, keyID string) (*Ring, error) {
	return NewWithAPI(kms.NewFromConfig(cfg), keyID)
}

// NewWithAPI returns a ring over keyID with a given client.
func NewWithAPI(api API, keyID string) (*Ring, error) {
	if keyID == "" {
		return nil, errors.New("kmsring: no KMS key id")
	}
	return &Ring{api: api, keyID: keyID}, nil
}

// Describe implements keychain.KeyRing.
func (r *Ring) Describe() string { return "the KMS key " + r.keyID }

func encContext(aad string) map[string]string { return map[string]string{ContextKey: aad} }

// NewDataKey implements keychain.KeyRing.
func (r *Ring) NewDataKey(ctx context.Context, aad string) (keychain.DataKey, error) {
	out, err := r.api.GenerateDataKey(ctx, &kms.GenerateDataKeyInput{KeyId: aws.String(r.keyID),
		KeySpec: types.DataKeySpecAes256, EncryptionContext: encContext(aad)})
	if err != nil {
		return keychain.DataKey{}, fmt.Errorf("kms GenerateDataKey with %s: %w", r.keyID, err)
	}
	if len(out.Plaintext) != keychain.KeySize || aws.ToString(out.KeyId) == "" {
		return keychain.DataKey{}, fmt.Errorf("kms GenerateDataKey with %s: answered %d key bytes and key id %q", r.keyID, len(out.Plaintext), aws.ToString(out.KeyId))
	}
	return keychain.DataKey{KeyID: aws.ToString(out.KeyId), Plain: out.Plaintext, Wrapped: out.CiphertextBlob}, nil
}

// Unwrap implements keychain.KeyRing.
func (r *Ring) Unwrap(ctx context.Context, keyID string, wrapped []byte, aad string) ([]byte, error) {
	out, err := r.api.Decrypt(ctx, &kms.DecryptInput{KeyId: aws.String(keyID), CiphertextBlob: wrapped,
		EncryptionContext: encContext(aad)})
	if err != nil {
		return nil, fmt.Errorf("kms Decrypt with %s: %w", keyID, err)
	}
	return out.Plaintext, nil
}

// Current implements keychain.KeyRing: the ARN of the key the configured id
// names now, asked of KMS on every call (DescribeKey resolves an alias), so
// that once an alias is repointed, rotation in a running process compares
// each row with the key new data keys are made under, not with the key the
// alias named when the process started.
func (r *Ring) Current(ctx context.Context) (string, error) {
	out, err := r.api.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: aws.String(r.keyID)})
	if err != nil {
		return "", fmt.Errorf("kms DescribeKey %s: %w", r.keyID, err)
	}
	if out.KeyMetadata == nil || aws.ToString(out.KeyMetadata.Arn) == "" {
		return "", fmt.Errorf("kms DescribeKey %s: no key ARN in the answer", r.keyID)
	}
	return aws.ToString(out.KeyMetadata.Arn), nil
}
