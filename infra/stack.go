package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsrds"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsssm"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Contract with the outbox function (see README.md): it emits this EMF
// metric on every scheduled run, 0 when nothing is pending.
const (
	MetricNamespace  = "NoETL"
	OutboxLagMetric  = "OutboxLagSeconds"
	StageDimension   = "Stage"
	DatabaseName     = "noetl"
	DatabasePort     = 5432
	OutboxBatch      = 500
	maxShards        = 1024 // ids carry 10 shard bits (R-I1)
	defaultShards    = 2
	defaultStage     = "dev"
	defaultLagAlarmS = 300
	// Results stored by reference live under this prefix of the results
	// bucket (NOETL_RESULT_STORE = s3://<bucket>/results).
	ResultsPrefix           = "results"
	defaultResultRetentionD = 30
)

var stageRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,20}$`)

// Config is what the stack is built from; ConfigFromContext fills it from
// `cdk -c key=value` / cdk.json context.
type Config struct {
	Stage  string
	Shards int
	// AssetDir holds <fn>/bootstrap for every function (`make build` writes
	// ../build); tests point it at a temp dir with dummy files.
	AssetDir      string
	RoutesFile    string
	ConfigEnvFile string

	NatsURL            string
	NatsCredsSecretArn string // existing secret; empty = no NATS auth
	ApiTokensSecretArn string // existing secret; empty = the stack creates one
	ServerURL          string // empty = the HTTP API's own URL
	CorsOrigins        []string
	LogLevel           string
	MigrateOnStart     bool // NOETL_MIGRATE_ON_START: for a first deploy only
	MinACU, MaxACU     float64
	OutboxLagAlarmS    float64
	AlarmTopicArn      string // optional SNS topic for every alarm
	// ResultRetentionDays is how long the results bucket keeps a result
	// stored by reference; longer than the longest execution.
	ResultRetentionDays int
	// KeychainKeyArn is an existing KMS key that seals the keychain's
	// credentials; empty = the stack creates one (yearly rotation on).
	// KeychainPreviousKeyArns may still be decrypted with while `noetl
	// credentials rotate` reseals under the new key.
	KeychainKeyArn          string
	KeychainPreviousKeyArns []string
	// ApiThrottleRate and ApiThrottleBurst throttle every route of the HTTP
	// API (requests per second, burst); ReservedConcurrency bounds each
	// function's instances (0: no reservation). Requests without a token
	// still invoke a function: these bound what that costs.
	ApiThrottleRate, ApiThrottleBurst float64
	ReservedConcurrency               int
}

// Throttling defaults (template.yaml's ApiThrottleRateLimit,
// ApiThrottleBurstLimit and FunctionReservedConcurrency).
const (
	defaultThrottleRate        = 200
	defaultThrottleBurst       = 400
	defaultReservedConcurrency = 25
)

// ConfigFromContext reads the stack configuration from the CDK context.
// Values given with -c arrive as strings, cdk.json ones as JSON values.
func ConfigFromContext(node constructs.Node) (Config, error) {
	get := func(key string) string {
		v := node.TryGetContext(jsii.String(key))
		if v == nil {
			return ""
		}
		switch x := v.(type) {
		case string:
			return strings.TrimSpace(x)
		case float64:
			return strconv.FormatFloat(x, 'f', -1, 64)
		default:
			return fmt.Sprint(x)
		}
	}
	c := Config{
		Stage:              get("stage"),
		AssetDir:           get("assetDir"),
		RoutesFile:         "../routes.json",
		ConfigEnvFile:      "../config-env.json",
		NatsURL:            get("natsUrl"),
		NatsCredsSecretArn: get("natsCredsSecretArn"),
		ApiTokensSecretArn: get("apiTokensSecretArn"),
		ServerURL:          get("serverUrl"),
		LogLevel:           get("logLevel"),
		AlarmTopicArn:      get("alarmTopicArn"),
		KeychainKeyArn:     get("keychainKeyArn"),
		MinACU:             0.5,
		MaxACU:             8,
		OutboxLagAlarmS:    defaultLagAlarmS,

		ResultRetentionDays: defaultResultRetentionD,
		ApiThrottleRate:     defaultThrottleRate,
		ApiThrottleBurst:    defaultThrottleBurst,
		ReservedConcurrency: defaultReservedConcurrency,
	}
	if c.Stage == "" {
		c.Stage = defaultStage
	}
	if !stageRE.MatchString(c.Stage) {
		// It names the RDS proxies and the SSM parameter path.
		return c, fmt.Errorf("context stage=%q: use a lower-case letter then up to 20 lower-case letters, digits or '-'", c.Stage)
	}
	if c.AssetDir == "" {
		c.AssetDir = "../build"
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
	switch s := get("migrateOnStart"); s {
	case "", "false":
	case "true":
		c.MigrateOnStart = true
	default:
		return c, fmt.Errorf("context migrateOnStart=%q: want true or false", s)
	}
	if s := get("corsOrigins"); s != "" {
		for _, o := range strings.Split(s, ",") {
			c.CorsOrigins = append(c.CorsOrigins, strings.TrimSpace(o))
		}
	}
	if s := get("keychainPreviousKeyArns"); s != "" {
		for _, a := range strings.Split(s, ",") {
			c.KeychainPreviousKeyArns = append(c.KeychainPreviousKeyArns, strings.TrimSpace(a))
		}
	}
	for _, a := range append([]string{c.KeychainKeyArn}, c.KeychainPreviousKeyArns...) {
		if a != "" && !strings.HasPrefix(a, "arn:") {
			return c, fmt.Errorf("context keychainKeyArn / keychainPreviousKeyArns: %q is not a KMS key ARN", a)
		}
	}
	if s := get("resultRetentionDays"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 3650 {
			return c, fmt.Errorf("context resultRetentionDays=%q: want a whole number of days from 1 to 3650 (longer than the longest execution)", s)
		}
		c.ResultRetentionDays = n
	}
	c.Shards = defaultShards
	if s := get("shards"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxShards {
			return c, fmt.Errorf("context shards=%q: want a whole number from 1 to %d (cdk synth -c shards=2)", s, maxShards)
		}
		c.Shards = n
	}
	if s := get("reservedConcurrency"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 1000 {
			return c, fmt.Errorf("context reservedConcurrency=%q: want the instances each function may run, 0 (no reservation) to 1000", s)
		}
		c.ReservedConcurrency = n
	}
	for key, dst := range map[string]*float64{"minAcu": &c.MinACU, "maxAcu": &c.MaxACU, "outboxLagAlarmSeconds": &c.OutboxLagAlarmS,
		"apiThrottleRate": &c.ApiThrottleRate, "apiThrottleBurst": &c.ApiThrottleBurst} {
		if s := get(key); s != "" {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil || f < 0 {
				return c, fmt.Errorf("context %s=%q: want a non-negative number", key, s)
			}
			*dst = f
		}
	}
	return c, nil
}

// NewStack builds the NoETL stack: VPC, one Aurora PostgreSQL Serverless v2
// cluster + RDS Proxy per shard, secrets, the shard-map parameter, the eight
// functions, the results bucket, the keychain's KMS key, the HTTP API, the
// outbox schedule and alarms.
//
// The cluster database (catalog, tokens) is shard 0's database: tables do not
// overlap, and it saves a whole cluster (events.md §2 allows cluster = shard 0).
func NewStack(scope constructs.Construct, id string, props *awscdk.StackProps, c Config) (awscdk.Stack, error) {
	routes, err := ReadRoutes(c.RoutesFile)
	if err != nil {
		return nil, err
	}
	envFile, err := ReadEnvFile(c.ConfigEnvFile)
	if err != nil {
		return nil, err
	}
	for _, f := range Functions() {
		p := filepath.Join(c.AssetDir, f.Name, "bootstrap")
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("function %s: %w; run `make build` at the repository root first (or -c assetDir=DIR)", f.Name, err)
		}
	}
	if c.Shards < 1 || c.Shards > maxShards {
		return nil, fmt.Errorf("shards=%d: want 1 to %d", c.Shards, maxShards)
	}
	if c.ResultRetentionDays < 1 {
		return nil, fmt.Errorf("resultRetentionDays=%d: want at least 1", c.ResultRetentionDays)
	}

	stack := awscdk.NewStack(scope, jsii.String(id), props)
	awscdk.Tags_Of(stack).Add(jsii.String("noetl:stage"), jsii.String(c.Stage), nil)

	vpc := awsec2.NewVpc(stack, jsii.String("Vpc"), &awsec2.VpcProps{
		MaxAzs: jsii.Number(2),
		// Functions reach Secrets Manager, SSM, X-Ray and NATS through it.
		NatGateways: jsii.Number(1),
		SubnetConfiguration: &[]*awsec2.SubnetConfiguration{
			{Name: jsii.String("public"), SubnetType: awsec2.SubnetType_PUBLIC, CidrMask: jsii.Number(24)},
			{Name: jsii.String("functions"), SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS, CidrMask: jsii.Number(22)},
			{Name: jsii.String("databases"), SubnetType: awsec2.SubnetType_PRIVATE_ISOLATED, CidrMask: jsii.Number(24)},
		},
	})
	// Stored results travel to and from S3 through a gateway endpoint (free),
	// not the NAT gateway (billed per GB).
	vpc.AddGatewayEndpoint(jsii.String("S3"), &awsec2.GatewayVpcEndpointOptions{
		Service: awsec2.GatewayVpcEndpointAwsService_S3(),
		Subnets: &[]*awsec2.SubnetSelection{{SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS}},
	})
	dbSubnets := &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PRIVATE_ISOLATED}
	fnSG := awsec2.NewSecurityGroup(stack, jsii.String("FunctionsSecurityGroup"), &awsec2.SecurityGroupProps{
		Vpc:              vpc,
		Description:      jsii.String("NoETL functions"),
		AllowAllOutbound: jsii.Bool(true),
	})

	type shard struct {
		cluster awsrds.DatabaseCluster
		proxy   awsrds.DatabaseProxy
	}
	shards := make([]shard, c.Shards)
	for i := range shards {
		cl := awsrds.NewDatabaseCluster(stack, jsii.String(fmt.Sprintf("Shard%dCluster", i)), &awsrds.DatabaseClusterProps{
			Engine: awsrds.DatabaseClusterEngine_AuroraPostgres(&awsrds.AuroraPostgresClusterEngineProps{
				Version: awsrds.AuroraPostgresEngineVersion_VER_16_8(),
			}),
			Writer:                  awsrds.ClusterInstance_ServerlessV2(jsii.String("Writer"), nil),
			ServerlessV2MinCapacity: jsii.Number(c.MinACU),
			ServerlessV2MaxCapacity: jsii.Number(c.MaxACU),
			Credentials:             awsrds.Credentials_FromGeneratedSecret(jsii.String("noetl"), nil),
			DefaultDatabaseName:     jsii.String(DatabaseName),
			Vpc:                     vpc,
			VpcSubnets:              dbSubnets,
			StorageEncrypted:        jsii.Bool(true),
			RemovalPolicy:           awscdk.RemovalPolicy_SNAPSHOT,
			DeletionProtection:      jsii.Bool(c.Stage == "prod"),
		})
		px := cl.AddProxy(jsii.String("Proxy"), &awsrds.DatabaseProxyOptions{
			// The default name is the construct id: the same for every shard,
			// and proxy names are unique per account and region.
			DbProxyName: jsii.String(fmt.Sprintf("noetl-%s-shard%d", c.Stage, i)),
			Secrets:     &[]awssecretsmanager.ISecret{cl.Secret()},
			Vpc:         vpc,
			VpcSubnets:  dbSubnets,
			RequireTLS:  jsii.Bool(true),
		})
		// AllowDefaultPortFrom would panic: a proxy's Connections has no default port.
		px.Connections().AllowFrom(fnSG, awsec2.Port_Tcp(jsii.Number(DatabasePort)), jsii.String("NoETL functions"))
		shards[i] = shard{cl, px}
	}

	// The shard map the functions read (NOETL_SHARD_MAP_PARAM): endpoints are
	// the proxies, credentials each cluster's own secret.
	entry := func(s shard) map[string]any {
		return map[string]any{
			"host":       s.proxy.Endpoint(),
			"port":       DatabasePort,
			"dbname":     DatabaseName,
			"secret_arn": s.cluster.Secret().SecretArn(),
		}
	}
	shardEntries := make([]any, len(shards))
	for i, s := range shards {
		shardEntries[i] = entry(s)
	}
	shardMap := awsssm.NewStringParameter(stack, jsii.String("ShardMap"), &awsssm.StringParameterProps{
		ParameterName: jsii.String(fmt.Sprintf("/noetl/%s/shard-map", c.Stage)),
		Description:   jsii.String("NoETL shard map: {cluster, shards[]} with RDS Proxy endpoints and secret ARNs"),
		StringValue:   stack.ToJsonString(map[string]any{"cluster": entry(shards[0]), "shards": shardEntries}, nil),
	})

	var tokens awssecretsmanager.ISecret
	if c.ApiTokensSecretArn != "" {
		tokens = awssecretsmanager.Secret_FromSecretCompleteArn(stack, jsii.String("ApiTokens"), jsii.String(c.ApiTokensSecretArn))
	} else {
		// Generates the api token; worker and internal tokens are added with
		// put-secret-value before workers start (README.md).
		tokens = awssecretsmanager.NewSecret(stack, jsii.String("ApiTokens"), &awssecretsmanager.SecretProps{
			Description: jsii.String(fmt.Sprintf("NoETL %s API tokens {api, worker, internal}", c.Stage)),
			GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
				SecretStringTemplate: jsii.String(`{"worker": [], "internal": []}`),
				GenerateStringKey:    jsii.String("api"),
				ExcludePunctuation:   jsii.Bool(true),
				PasswordLength:       jsii.Number(48),
			},
		})
	}
	var natsCreds awssecretsmanager.ISecret
	if c.NatsCredsSecretArn != "" {
		natsCreds = awssecretsmanager.Secret_FromSecretCompleteArn(stack, jsii.String("NatsCreds"), jsii.String(c.NatsCredsSecretArn))
	}

	// Results too large to post inline (worker.md §1): workers put them under
	// results/ with their own credentials; only the functions that read
	// NOETL_RESULT_STORE (ingest) may get them. Private, encrypted, TLS only,
	// every object expires; retained on stack deletion, like any data.
	results := awss3.NewBucket(stack, jsii.String("ResultsBucket"), &awss3.BucketProps{
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:        jsii.Bool(true),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		LifecycleRules: &[]*awss3.LifecycleRule{{
			Id:                                  jsii.String("ExpireResults"),
			Expiration:                          awscdk.Duration_Days(jsii.Number(float64(c.ResultRetentionDays))),
			AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
		}},
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
	})
	resultStore := results.S3UrlForObject(jsii.String(ResultsPrefix))

	// The keychain's key (shared/keychain): only the functions config-env.json
	// gives NOETL_KEYCHAIN_KMS_KEY_ID (the keychain function) may use it.
	var keychainKey awskms.IKey
	var ownKey awskms.Key // the stack's own key: its policy names the keychain function below
	if c.KeychainKeyArn != "" {
		keychainKey = awskms.Key_FromKeyArn(stack, jsii.String("KeychainKey"), jsii.String(c.KeychainKeyArn))
	} else {
		// An explicit key policy, as template.yaml's (the default trusts every
		// principal of the account whose IAM policies allow kms:Decrypt): the
		// account administers the key, without using it.
		key := awskms.NewKey(stack, jsii.String("KeychainKey"), &awskms.KeyProps{
			Description:       jsii.String(fmt.Sprintf("NoETL %s: seals the keychain's credentials", c.Stage)),
			EnableKeyRotation: jsii.Bool(true),
			Alias:             jsii.String(fmt.Sprintf("alias/noetl-%s-keychain", c.Stage)),
			RemovalPolicy:     awscdk.RemovalPolicy_RETAIN,
			Policy: awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{Statements: &[]awsiam.PolicyStatement{
				awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
					Sid:        jsii.String("AccountAdministersTheKey"),
					Principals: &[]awsiam.IPrincipal{awsiam.NewAccountRootPrincipal()},
					Actions: jsii.Strings("kms:Create*", "kms:Describe*", "kms:Enable*", "kms:List*", "kms:Put*", "kms:Update*",
						"kms:Revoke*", "kms:Disable*", "kms:Get*", "kms:Delete*", "kms:TagResource", "kms:UntagResource",
						"kms:ScheduleKeyDeletion", "kms:CancelKeyDeletion", "kms:RotateKeyOnDemand"),
					Resources: jsii.Strings("*"),
				}),
			}}),
		})
		ownKey = key
		// Same logical id as template.yaml's.
		key.Node().DefaultChild().(awskms.CfnKey).OverrideLogicalId(jsii.String("KeychainKey"))
		keychainKey = key
	}

	cors := &awsapigatewayv2.CorsPreflightOptions{}
	if len(c.CorsOrigins) > 0 {
		cors = &awsapigatewayv2.CorsPreflightOptions{
			AllowOrigins: jsii.Strings(c.CorsOrigins...),
			// As the local gateway does (shared/api/cors.go): any method passes
			// the preflight, so a route we lack answers a 404/405 a page can
			// read; the paging headers of GET /api/executions are exposed.
			AllowMethods: &[]awsapigatewayv2.CorsHttpMethod{awsapigatewayv2.CorsHttpMethod_ANY},
			AllowHeaders: jsii.Strings("authorization", "content-type", "x-request-id", "x-session-token"),
			ExposeHeaders: jsii.Strings("x-request-id", "retry-after", "link", "x-next-cursor", "x-noetl-has-more",
				"x-noetl-limit-applied", "x-noetl-limit-capped"),
			MaxAge: awscdk.Duration_Minutes(jsii.Number(10)),
		}
	} else {
		cors = nil
	}
	api := awsapigatewayv2.NewHttpApi(stack, jsii.String("HttpApi"), &awsapigatewayv2.HttpApiProps{
		ApiName:       jsii.String("noetl-" + c.Stage),
		Description:   jsii.String("NoETL API (" + c.Stage + ")"),
		CorsPreflight: cors,
	})
	// Every route throttled (template.yaml's DefaultRouteSettings).
	api.DefaultStage().Node().DefaultChild().(awsapigatewayv2.CfnStage).SetDefaultRouteSettings(&awsapigatewayv2.CfnStage_RouteSettingsProperty{
		ThrottlingRateLimit: jsii.Number(c.ApiThrottleRate), ThrottlingBurstLimit: jsii.Number(c.ApiThrottleBurst),
	})
	serverURL := c.ServerURL
	if serverURL == "" {
		// The API resource does not depend on the functions (routes and
		// integrations do), so this creates no cycle.
		serverURL = *api.ApiEndpoint()
	}

	// Schedules (docs/schedules.md): the schedules function keeps one
	// EventBridge Scheduler entry per schedule in this group, a one-time
	// at() at the schedule's next fire time, invoking it with the role below.
	// Its name is fixed so the ARN can be written without a reference to
	// the function (which would make a cycle through its environment).
	schedulesFnName := fmt.Sprintf("noetl-%s-schedules", c.Stage)
	schedulesFnArn := stack.FormatArn(&awscdk.ArnComponents{Service: jsii.String("lambda"), Resource: jsii.String("function"),
		ResourceName: jsii.String(schedulesFnName), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME})
	scheduleGroup := awsscheduler.NewCfnScheduleGroup(stack, jsii.String("ScheduleGroup"), &awsscheduler.CfnScheduleGroupProps{
		Name: jsii.String("noetl-" + c.Stage),
	})
	invokeRole := awsiam.NewRole(stack, jsii.String("SchedulerInvokeRole"), &awsiam.RoleProps{
		Description: jsii.String(fmt.Sprintf("NoETL %s: EventBridge Scheduler invokes the schedules function", c.Stage)),
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("scheduler.amazonaws.com"), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": stack.Account()}},
		}),
	})
	invokeRole.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("InvokeSchedulesFunction"),
		Actions:   jsii.Strings("lambda:InvokeFunction"),
		Resources: &[]*string{schedulesFnArn},
	}))

	// Values of every name config-env.json may list for a function. A name
	// missing here fails the synth, so config-env.json and the stack move
	// together.
	values := map[string]*string{
		"NOETL_STAGE":                 jsii.String(c.Stage),
		"NOETL_DB_SECRET_ARN":         shards[0].cluster.Secret().SecretArn(),
		"NOETL_SHARD_MAP_PARAM":       shardMap.ParameterName(),
		"NOETL_DB_SSLMODE":            jsii.String("require"), // RDS Proxy requires TLS
		"NOETL_DB_MAX_CONNS":          jsii.String("2"),
		"NOETL_MIGRATE_ON_START":      jsii.String(strconv.FormatBool(c.MigrateOnStart)),
		"NOETL_API_TOKENS_SECRET_ARN": tokens.SecretArn(),
		"NOETL_ALLOW_OPEN":            jsii.String("false"),
		"NOETL_LOG_LEVEL":             jsii.String(c.LogLevel),
		"NOETL_MAX_BODY_BYTES":        jsii.String("1048576"),
		"NOETL_CORS_ORIGINS":          jsii.String(strings.Join(c.CorsOrigins, ",")),
		"NOETL_LEASE_SECONDS":         jsii.String("60"),
		"NOETL_NATS_URL":              jsii.String(c.NatsURL),
		"NOETL_NATS_CREDS_SECRET_ARN": jsii.String(c.NatsCredsSecretArn),
		"NOETL_SERVER_URL":            jsii.String(serverURL),
		"NOETL_RESULT_STORE":          resultStore,
		"NOETL_KEYCHAIN_KMS_KEY_ID":   keychainKey.KeyArn(),
		"NOETL_SCHEDULER_GROUP":       scheduleGroup.Ref(),
		"NOETL_SCHEDULER_TARGET_ARN":  schedulesFnArn,
		"NOETL_SCHEDULER_ROLE_ARN":    invokeRole.RoleArn(),
	}

	var topic awssns.ITopic
	if c.AlarmTopicArn != "" {
		topic = awssns.Topic_FromTopicArn(stack, jsii.String("AlarmTopic"), jsii.String(c.AlarmTopicArn))
	}
	alarm := func(a awscloudwatch.Alarm) {
		if topic != nil {
			a.AddAlarmAction(awscloudwatchactions.NewSnsAction(topic))
		}
	}

	fns := map[string]awslambda.Function{}
	for _, f := range Functions() {
		env := map[string]*string{}
		for _, name := range envFile.Functions[f.Name] {
			v, ok := values[name]
			if !ok {
				return nil, fmt.Errorf("config-env.json lists %s for %s but infra/stack.go has no value for it: add it to values", name, f.Name)
			}
			env[name] = v
		}
		logs := awslogs.NewLogGroup(stack, jsii.String(f.LogicalID+"Logs"), &awslogs.LogGroupProps{
			Retention:     awslogs.RetentionDays_ONE_MONTH,
			RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
		})
		var name *string
		if f.Name == "schedules" {
			name = jsii.String(schedulesFnName)
		}
		var reserved *float64
		if c.ReservedConcurrency > 0 {
			reserved = jsii.Number(float64(c.ReservedConcurrency))
		}
		fn := awslambda.NewFunction(stack, jsii.String(f.LogicalID), &awslambda.FunctionProps{
			FunctionName:                 name,
			ReservedConcurrentExecutions: reserved,
			Description:                  jsii.String(f.Description),
			Runtime:                      awslambda.Runtime_PROVIDED_AL2023(),
			Architecture:                 awslambda.Architecture_ARM_64(),
			Handler:                      jsii.String("bootstrap"),
			Code:                         awslambda.Code_FromAsset(jsii.String(filepath.Join(c.AssetDir, f.Name)), nil),
			Environment:                  &env,
			MemorySize:                   jsii.Number(512),
			Timeout:                      awscdk.Duration_Seconds(jsii.Number(f.TimeoutSeconds)),
			Tracing:                      awslambda.Tracing_ACTIVE,
			LoggingFormat:                awslambda.LoggingFormat_JSON,
			LogGroup:                     logs,
			Vpc:                          vpc,
			VpcSubnets:                   &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS},
			SecurityGroups:               &[]awsec2.ISecurityGroup{fnSG},
		})
		// Same logical ids as template.yaml.
		fn.Node().DefaultChild().(awslambda.CfnFunction).OverrideLogicalId(jsii.String(f.LogicalID))
		// Least privilege, as in template.yaml: the two calls shared/config
		// makes, on exactly the secrets and parameter it reads (the Grant*
		// helpers would add DescribeSecret, GetParameters, history...).
		secretArns := []*string{tokens.SecretArn()}
		for _, s := range shards {
			secretArns = append(secretArns, s.cluster.Secret().SecretArn())
		}
		if natsCreds != nil && envFile.Uses(f.Name, "NOETL_NATS_CREDS_SECRET_ARN") {
			secretArns = append(secretArns, natsCreds.SecretArn())
		}
		fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("ReadConfigSecrets"),
			Actions:   jsii.Strings("secretsmanager:GetSecretValue"),
			Resources: &secretArns,
		}))
		fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("ReadShardMap"),
			Actions:   jsii.Strings("ssm:GetParameter"),
			Resources: &[]*string{shardMap.ParameterArn()},
		}))
		if envFile.Uses(f.Name, "NOETL_RESULT_STORE") {
			// GetObject under the prefix only (GrantRead would add List*,
			// GetBucket* and every key of the bucket).
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid:       jsii.String("ReadStoredResults"),
				Actions:   jsii.Strings("s3:GetObject"),
				Resources: &[]*string{results.ArnForObjects(jsii.String(ResultsPrefix + "/*"))},
			}))
			// It keeps only what NoETL's workers stage through it (PUT /api/result).
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid:       jsii.String("StageResults"),
				Actions:   jsii.Strings("s3:PutObject"),
				Resources: &[]*string{results.ArnForObjects(jsii.String(ResultsPrefix + "/noetl/*"))},
			}))
		}
		if envFile.Uses(f.Name, "NOETL_KEYCHAIN_KMS_KEY_ID") {
			// The three calls shared/keychain/kmsring makes, on the key alone
			// (GrantEncryptDecrypt would add ReEncrypt* and more).
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid:       jsii.String("UseKeychainKey"),
				Actions:   jsii.Strings("kms:GenerateDataKey", "kms:Decrypt", "kms:DescribeKey"),
				Resources: &[]*string{keychainKey.KeyArn()},
			}))
			if ownKey != nil {
				// The key policy names the function's role: only it may use the key.
				ownKey.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
					Sid:        jsii.String("KeychainFunctionUsesTheKey"),
					Principals: &[]awsiam.IPrincipal{fn.Role()},
					Actions:    jsii.Strings("kms:GenerateDataKey", "kms:Decrypt", "kms:DescribeKey"),
					Resources:  jsii.Strings("*"),
				}), jsii.Bool(false))
			}
			if len(c.KeychainPreviousKeyArns) > 0 {
				fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
					Sid:       jsii.String("OpenUnderPreviousKeys"),
					Actions:   jsii.Strings("kms:Decrypt"),
					Resources: jsii.Strings(c.KeychainPreviousKeyArns...),
				}))
			}
		}
		if envFile.Uses(f.Name, "NOETL_SCHEDULER_GROUP") {
			// Entries of its own group only, and the invoke role passed only
			// to EventBridge Scheduler.
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid: jsii.String("WriteScheduleEntries"),
				Actions: jsii.Strings("scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule",
					"scheduler:GetSchedule"),
				Resources: &[]*string{stack.FormatArn(&awscdk.ArnComponents{Service: jsii.String("scheduler"), Resource: jsii.String("schedule"),
					ResourceName: jsii.String(fmt.Sprintf("noetl-%s/*", c.Stage)), ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME})},
			}))
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid:        jsii.String("PassInvokeRole"),
				Actions:    jsii.Strings("iam:PassRole"),
				Resources:  &[]*string{invokeRole.RoleArn()},
				Conditions: &map[string]any{"StringEquals": map[string]any{"iam:PassedToService": "scheduler.amazonaws.com"}},
			}))
			fn.Node().AddDependency(scheduleGroup)
		}
		alarm(fn.MetricErrors(&awscloudwatch.MetricOptions{
			Period:    awscdk.Duration_Minutes(jsii.Number(5)),
			Statistic: jsii.String("Sum"),
		}).CreateAlarm(stack, jsii.String(f.LogicalID+"Errors"), &awscloudwatch.CreateAlarmOptions{
			AlarmDescription:   jsii.String(fmt.Sprintf("NoETL %s: the %s function reported errors (crashes, timeouts, unhandled errors)", c.Stage, f.Name)),
			Threshold:          jsii.Number(1),
			EvaluationPeriods:  jsii.Number(1),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		}))
		fns[f.Name] = fn
	}

	integrations := map[string]awsapigatewayv2integrations.HttpLambdaIntegration{}
	for _, f := range Functions() {
		integrations[f.Name] = awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String(f.LogicalID+"Integration"), fns[f.Name], nil)
	}
	for _, r := range routes {
		api.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
			Path:        jsii.String(r.Path),
			Methods:     &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod(r.Method)},
			Integration: integrations[r.Function],
		})
	}

	awsevents.NewRule(stack, jsii.String("OutboxSchedule"), &awsevents.RuleProps{
		Description: jsii.String(fmt.Sprintf("NoETL %s: drain the outbox, expire leases, issue due retries", c.Stage)),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(1))),
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(fns["outbox"], &awseventstargets.LambdaFunctionProps{
			Event: awsevents.RuleTargetInput_FromObject(map[string]any{"maxBatch": OutboxBatch}),
		})},
	})

	// The schedules' sweep: fires whatever a scheduler entry missed.
	awsevents.NewRule(stack, jsii.String("SchedulesSweep"), &awsevents.RuleProps{
		Description: jsii.String(fmt.Sprintf("NoETL %s: fire the schedules whose scheduler entry missed", c.Stage)),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(1))),
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(fns["schedules"], &awseventstargets.LambdaFunctionProps{
			Event: awsevents.RuleTargetInput_FromObject(map[string]any{"fire_schedules": true}),
		})},
	})

	// Missing data breaches: the outbox function emits the metric on every
	// run, so silence means the drain is not running.
	alarm(awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:     jsii.String(MetricNamespace),
		MetricName:    jsii.String(OutboxLagMetric),
		DimensionsMap: &map[string]*string{StageDimension: jsii.String(c.Stage)},
		Statistic:     jsii.String("Maximum"),
		Period:        awscdk.Duration_Minutes(jsii.Number(1)),
	}).CreateAlarm(stack, jsii.String("OutboxLagAlarm"), &awscloudwatch.CreateAlarmOptions{
		AlarmDescription:   jsii.String(fmt.Sprintf("NoETL %s: the oldest unpublished outbox row is older than %.0f s, or the outbox function stopped reporting", c.Stage, c.OutboxLagAlarmS)),
		Threshold:          jsii.Number(c.OutboxLagAlarmS),
		EvaluationPeriods:  jsii.Number(5),
		DatapointsToAlarm:  jsii.Number(3),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
		TreatMissingData:   awscloudwatch.TreatMissingData_BREACHING,
	}))

	out := func(id string, v *string, desc string) {
		awscdk.NewCfnOutput(stack, jsii.String(id), &awscdk.CfnOutputProps{Value: v, Description: jsii.String(desc)})
	}
	out("ApiUrl", api.Url(), "Base URL of the NoETL API")
	out("ShardMapParameterName", shardMap.ParameterName(), "SSM parameter holding the shard map")
	out("DbSecretArn", shards[0].cluster.Secret().SecretArn(), "Credentials of the cluster database (shard 0)")
	out("ApiTokensSecretArn", tokens.SecretArn(), "API tokens {api, worker, internal}")
	out("ResultsBucketName", results.BucketName(), "Bucket of results stored by reference; workers need s3:PutObject on results/* with their own credentials")
	out("ResultStoreUrl", resultStore, "The result store URL (NOETL_RESULT_STORE of the ingest function and of workers)")
	out("KeychainKeyArn", keychainKey.KeyArn(), "The KMS key that seals the keychain's credentials (only the keychain function may use it)")
	out("ScheduleGroupName", scheduleGroup.Ref(), "The EventBridge Scheduler group holding one entry per schedule")
	return stack, nil
}
