// Package localstack holds no code: its tests check that docker-compose.yml,
// the init hooks and env.json agree with each other and with what
// shared/config reads (see README.md for using them).
package localstack
