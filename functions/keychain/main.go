// Command keychain is the NoETL keychain Lambda function (see shared/lambdafn):
// the credential routes, the only function granted the keychain's KMS key,
// and the only bootstrap linking the keychain (shared/credentials) and a KMS
// client.
package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/noetl-go/noetl/shared/api"
	"github.com/noetl-go/noetl/shared/config"
	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/credentials"
	"github.com/noetl-go/noetl/shared/keychain"
	"github.com/noetl-go/noetl/shared/keychain/kmsring"
	"github.com/noetl-go/noetl/shared/lambdafn"
	"github.com/noetl-go/noetl/shared/store"
)

func main() { lambdafn.Main("keychain", lambdafn.Env{OpenKeychain: openKeychain}) }

// openKeychain opens the KMS key ring NOETL_KEYCHAIN_KMS_KEY_ID names (no
// request is made at cold start). Without one, credentials can be listed and
// deleted, not stored or read (503 naming the variable).
func openKeychain(ctx context.Context, cfg *config.Config) (lambdafn.NewKeychain, error) {
	var ring keychain.KeyRing
	if cfg.KeychainKMSKeyID != "" {
		awsCfg, err := cfg.AWSConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", config.EnvKeychainKMSKeyID, err)
		}
		r, err := kmsring.New(awsCfg, cfg.KeychainKMSKeyID)
		if err != nil {
			return nil, err
		}
		ring = r
	}
	return func(st *store.Store, _ *controlplane.Service, log *slog.Logger) api.Keychain {
		return credentials.New(st, ring, log)
	}, nil
}
