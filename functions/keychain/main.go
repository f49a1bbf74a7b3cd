// Command keychain is the NoETL keychain Lambda function (see shared/lambdafn):
// the credential routes, the only function granted the keychain's KMS key.
package main

import (
	"context"
	"fmt"

	"github.com/noetl-go/noetl/shared/config"
	"github.com/noetl-go/noetl/shared/keychain"
	"github.com/noetl-go/noetl/shared/keychain/kmsring"
	"github.com/noetl-go/noetl/shared/lambdafn"
)

func main() { lambdafn.Main("keychain", lambdafn.Env{OpenKeyRing: openKMS}) }

// openKMS opens the KMS key ring NOETL_KEYCHAIN_KMS_KEY_ID names, or none
// (credentials can then be listed and deleted, not stored or read: 503 naming
// the variable). No request is made at cold start.
func openKMS(ctx context.Context, cfg *config.Config) (keychain.KeyRing, error) {
	if cfg.KeychainKMSKeyID == "" {
		return nil, nil
	}
	awsCfg, err := cfg.AWSConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", config.EnvKeychainKMSKeyID, err)
	}
	return kmsring.New(awsCfg, cfg.KeychainKMSKeyID)
}
