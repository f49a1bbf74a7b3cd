// Command infra is the NoETL AWS CDK app: `npx aws-cdk@2 synth` / `deploy`
// from this directory (see README.md). It reads ../routes.json and
// ../config-env.json and deploys the bootstraps `make build` wrote to ../build.
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	cfg, err := ConfigFromContext(app.Node())
	if err != nil {
		fmt.Fprintln(os.Stderr, "infra:", err)
		os.Exit(2)
	}
	// Env from the CLI's credentials/profile when present; otherwise the
	// stack is environment-agnostic.
	var env *awscdk.Environment
	if acct, region := os.Getenv("CDK_DEFAULT_ACCOUNT"), os.Getenv("CDK_DEFAULT_REGION"); acct != "" && region != "" {
		env = &awscdk.Environment{Account: jsii.String(acct), Region: jsii.String(region)}
	}
	if _, err := NewStack(app, "noetl-cdk-"+cfg.Stage, &awscdk.StackProps{Env: env}, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "infra:", err)
		os.Exit(2)
	}
	app.Synth(nil)
}
