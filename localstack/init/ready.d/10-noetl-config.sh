#!/bin/bash
# LocalStack runs this once it is ready: it creates what the functions read
# at cold start (shared/config). env.json points the functions at exactly
# these names: localstack_test.go runs this script against moto and checks
# that, and reads the names from the put_secret / --name / create_bucket
# arguments below (keep them literal).
set -euo pipefail

put_secret() { # name json: create, or update when it already exists (persistence)
  awslocal secretsmanager create-secret --name "$1" --secret-string "$2" >/dev/null 2>&1 \
    || awslocal secretsmanager put-secret-value --secret-id "$1" --secret-string "$2" >/dev/null
  echo "noetl: secret $1"
}

# RDS secret shape; host/port/dbname here are only used without a shard map.
put_secret noetl/local/db '{"username": "noetl", "password": "noetl", "host": "postgres", "port": 5432, "dbname": "noetl", "engine": "postgres"}'

put_secret noetl/local/api-tokens '{"api": "local-api-token", "worker": "local-worker-token", "internal": "local-internal-token"}'

awslocal ssm put-parameter --overwrite --type String --name /noetl/local/shard-map --value '{"cluster": {"host": "postgres", "port": 5432, "dbname": "noetl"}, "shards": [{"host": "postgres", "port": 5432, "dbname": "noetl_shard_0"}, {"host": "postgres", "port": 5432, "dbname": "noetl_shard_1"}]}' >/dev/null
echo "noetl: parameter /noetl/local/shard-map"

create_bucket() { # name: create unless it exists (persistence)
  if ! awslocal s3api head-bucket --bucket "$1" >/dev/null 2>&1; then
    local region="${AWS_DEFAULT_REGION:-us-east-1}"
    if [ "$region" = us-east-1 ]; then
      awslocal s3api create-bucket --bucket "$1" >/dev/null
    else
      awslocal s3api create-bucket --bucket "$1" --create-bucket-configuration "LocationConstraint=$region" >/dev/null
    fi
  fi
  echo "noetl: bucket $1"
}

# Results workers store by reference (worker.md §1): env.json's
# NOETL_RESULT_STORE is s3://noetl-local-results/results.
create_bucket noetl-local-results

create_key_alias() { # alias: a KMS key behind the alias, unless the alias exists (persistence)
  if ! awslocal kms describe-key --key-id "$1" >/dev/null 2>&1; then
    local key
    key=$(awslocal kms create-key --description "NoETL local: seals the keychain's credentials" --query KeyMetadata.KeyId --output text)
    awslocal kms create-alias --alias-name "$1" --target-key-id "$key" >/dev/null
  fi
  echo "noetl: kms key $1"
}

# The keychain's key (shared/keychain/kmsring): env.json's
# NOETL_KEYCHAIN_KMS_KEY_ID is alias/noetl-local-keychain.
create_key_alias alias/noetl-local-keychain
